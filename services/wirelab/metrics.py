"""One metrics module for both transports: the same names, labels, label values and buckets."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PROTOCOLS = ("rest", "grpc")

# Interaction kinds. The *_json kinds exist on REST only: they carry binary data as base64 JSON so
# the cost of JSON for binary payloads is visible next to the raw octet-stream and protobuf paths.
KINDS_BY_PROTOCOL: dict[str, tuple[str, ...]] = {
    "grpc": (
        "unary",
        "server_stream",
        "bidi",
        "upload",
        "upload_chunked",
        "download",
        "download_chunked",
    ),
    "rest": (
        "unary",
        "server_stream",
        "bidi",
        "upload",
        "upload_chunked",
        "upload_json",
        "download",
        "download_chunked",
        "download_json",
    ),
}
# Kinds whose responses are a stream of messages: they also get a time-to-first-message histogram.
STREAM_KINDS = frozenset({"server_stream", "download_chunked", "bidi"})

# One outcome label for both protocols; the raw HTTP status or gRPC status name goes in `code`.
OUTCOMES = ("ok", "client_error", "cancelled", "timeout", "server_error")
_CANONICAL_CODES = {
    "rest": {
        "ok": "200",
        "client_error": "400",
        "cancelled": "499",
        "timeout": "504",
        "server_error": "500",
    },
    "grpc": {
        "ok": "OK",
        "client_error": "INVALID_ARGUMENT",
        "cancelled": "CANCELLED",
        "timeout": "DEADLINE_EXCEEDED",
        "server_error": "INTERNAL",
    },
}

# Durations: 50 µs resolution at the bottom for loopback unary calls, up to 5 min for large
# transfers. Defined once; the Locust client histograms import the same tuple.
DURATION_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075,
    0.001, 0.0015, 0.002, 0.003, 0.005, 0.0075,
    0.01, 0.015, 0.02, 0.03, 0.05, 0.075,
    0.1, 0.15, 0.2, 0.3, 0.5, 0.75,
    1.0, 1.5, 2.0, 3.0, 5.0, 7.5,
    10.0, 15.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip
# Bytes per call: powers of four from 64 B to 1 GiB cover a 1 KiB order and a 256 MiB blob.
SIZE_BUCKETS = tuple(float(4**i) for i in range(3, 16))

_GRPC_CLIENT_ERRORS = frozenset(
    {
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "FAILED_PRECONDITION",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "RESOURCE_EXHAUSTED",
    }
)


def http_outcome(status: int) -> str:
    """Map an HTTP status (101 for an accepted WebSocket) to the shared outcome label."""
    if status < 400:
        return "ok"
    if status == 499:
        return "cancelled"
    if status in (408, 504):
        return "timeout"
    if status < 500:
        return "client_error"
    return "server_error"


def grpc_outcome(code_name: str) -> str:
    """Map a gRPC status name (``grpc.StatusCode.X.name``) to the shared outcome label."""
    if code_name == "OK":
        return "ok"
    if code_name == "CANCELLED":
        return "cancelled"
    if code_name == "DEADLINE_EXCEEDED":
        return "timeout"
    if code_name in _GRPC_CLIENT_ERRORS:
        return "client_error"
    return "server_error"


class ServerMetrics:
    """The server-side instruments, bound to one protocol and registered in ``registry``."""

    def __init__(self, protocol: str, registry: CollectorRegistry, concurrency: str) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}")
        self.protocol = protocol
        kind = ("protocol", "kind")
        self.requests = Counter(
            "wirelab_server_requests",
            "Completed calls by outcome and raw status code",
            [*kind, "outcome", "code"],
            registry=registry,
        )
        self.duration = Histogram(
            "wirelab_server_request_duration_seconds",
            "Whole-call duration: from the request arriving to the last response byte sent",
            [*kind, "outcome"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.first_message = Histogram(
            "wirelab_server_time_to_first_message_seconds",
            "Streams: from the request arriving to the first response message sent",
            kind,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.request_bytes = Histogram(
            "wirelab_server_request_bytes",
            "Bytes received per call: HTTP body (or WebSocket message) bytes; protobuf bytes",
            kind,
            buckets=SIZE_BUCKETS,
            registry=registry,
        )
        self.response_bytes = Histogram(
            "wirelab_server_response_bytes",
            "Bytes sent per call: HTTP body (or WebSocket message) bytes; protobuf bytes",
            kind,
            buckets=SIZE_BUCKETS,
            registry=registry,
        )
        self.messages_received = Counter(
            "wirelab_server_messages_received",
            "Messages received (1 per request body; each stream message or chunk)",
            kind,
            registry=registry,
        )
        self.messages_sent = Counter(
            "wirelab_server_messages_sent",
            "Messages sent (1 per response body; each stream message or chunk)",
            kind,
            registry=registry,
        )
        self.in_flight = Gauge(
            "wirelab_server_requests_in_flight",
            "Calls started and not yet finished",
            kind,
            registry=registry,
        )
        info = Gauge(
            "wirelab_server_info",
            "Always 1; labels say which server and concurrency model is running",
            ["protocol", "concurrency"],
            registry=registry,
        )
        info.labels(protocol, concurrency).set(1)
        self._bound: dict[str, KindInstruments] = {}
        self._preinitialise(KINDS_BY_PROTOCOL[protocol])

    def _preinitialise(self, kinds: Iterable[str]) -> None:
        # Zero-valued series for every known label value, so panels and error ratios show 0
        # instead of "no data" before the first call of a kind.
        p = self.protocol
        for kind in kinds:
            for outcome, code in _CANONICAL_CODES[p].items():
                self.requests.labels(p, kind, outcome, code)
                self.duration.labels(p, kind, outcome)
            if kind in STREAM_KINDS:
                self.first_message.labels(p, kind)
            self.request_bytes.labels(p, kind)
            self.response_bytes.labels(p, kind)
            self.messages_received.labels(p, kind)
            self.messages_sent.labels(p, kind)
            self.in_flight.labels(p, kind)

    def bound(self, kind: str) -> KindInstruments:
        """The pre-resolved children of ``kind`` (resolved once, then a dict lookup)."""
        found = self._bound.get(kind)
        if found is None:
            found = self._bound[kind] = KindInstruments(self, kind)
        return found

    def start(self, kind: str) -> Call:
        """Begin timing one call of ``kind``; finish it with :meth:`Call.finish`."""
        bound = self.bound(kind)
        bound.in_flight.inc()
        return Call(self, kind, time.perf_counter(), bound)


class KindInstruments:
    """Label children of one (protocol, kind), resolved once. ``labels()`` takes a lock and builds
    a key on every call; a call path that resolves eight children per request pays for that in
    throughput, which the observer-effect benchmark shows."""

    def __init__(self, metrics: ServerMetrics, kind: str) -> None:
        p = metrics.protocol
        self._metrics = metrics
        self.kind = kind
        self.in_flight = metrics.in_flight.labels(p, kind)
        self.first_message = metrics.first_message.labels(p, kind) if kind in STREAM_KINDS else None
        self.request_bytes = metrics.request_bytes.labels(p, kind)
        self.response_bytes = metrics.response_bytes.labels(p, kind)
        self.messages_received = metrics.messages_received.labels(p, kind)
        self.messages_sent = metrics.messages_sent.labels(p, kind)
        self._requests: dict[tuple[str, str], Counter] = {}
        self._durations: dict[str, Histogram] = {}

    def requests(self, outcome: str, code: str) -> Counter:
        child = self._requests.get((outcome, code))
        if child is None:
            m = self._metrics
            child = self._requests[outcome, code] = m.requests.labels(
                m.protocol, self.kind, outcome, code
            )
        return child

    def duration(self, outcome: str) -> Histogram:
        child = self._durations.get(outcome)
        if child is None:
            m = self._metrics
            child = self._durations[outcome] = m.duration.labels(m.protocol, self.kind, outcome)
        return child


@dataclass(slots=True)
class Call:
    """One call being measured: counts bytes and messages, then records its outcome once."""

    metrics: ServerMetrics
    kind: str
    started: float
    bound: KindInstruments
    bytes_in: int = 0
    bytes_out: int = 0
    messages_in: int = 0
    messages_out: int = 0
    first_sent: float | None = None
    finished: bool = field(default=False)

    def received(self, nbytes: int, messages: int = 1) -> None:
        self.bytes_in += nbytes
        self.messages_in += messages

    def sent(self, nbytes: int, messages: int = 1) -> None:
        if self.first_sent is None and messages:
            self.first_sent = time.perf_counter()
        self.bytes_out += nbytes
        self.messages_out += messages

    def finish(self, outcome: str, code: str) -> None:
        """Record the call; a second call is ignored so error paths cannot double count."""
        if self.finished:
            return
        self.finished = True
        b = self.bound
        b.in_flight.dec()
        b.requests(outcome, code).inc()
        b.duration(outcome).observe(time.perf_counter() - self.started)
        if b.first_message is not None and self.first_sent is not None:
            b.first_message.observe(self.first_sent - self.started)
        b.request_bytes.observe(self.bytes_in)
        b.response_bytes.observe(self.bytes_out)
        if self.messages_in:
            b.messages_received.inc(self.messages_in)
        if self.messages_out:
            b.messages_sent.inc(self.messages_out)

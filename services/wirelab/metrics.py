"""One metrics module for both transports: the same names, labels, label values and buckets."""

from __future__ import annotations

import bisect
import collections
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from wirelab.core import PayloadBudget

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
    # 503 is the REST service refusing a call for load (payload budget, concurrency limit):
    # counted as gRPC counts its RESOURCE_EXHAUSTED for the same refusal, so one event reads
    # alike on both sides; the raw code tells a refusal for load from a refusal for size (413).
    if status < 500 or status == 503:
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
        # Started calls and finished-call records (see record), applied by flush(). Records
        # lie flat in the queue, RECORD_FIELDS items each, added by one atomic ``extend``: a
        # tuple per call kept until the flush would survive the garbage collector's young
        # generation and drive it. Measured in-process, 100,000 REST calls: with a queued tuple
        # each, 255 young, 23 middle and 2 full collections (0.65 us a call); flat, none, as
        # with metrics off. Lists, not deques: appending is as atomic under the GIL, and flush
        # takes a whole batch with one slice and one deletion instead of a popleft per item
        # (measured: 2 ms for the 45,000 items of 5,000 records, against 0.1 ms).
        self._starts: list[KindInstruments] = []
        self._queue: list[Any] = []
        # record() without its own frame, for the REST middleware's hot path: extend by a
        # tuple laid out as record's arguments.
        self.enqueue = self._queue.extend
        self._flush_lock = threading.Lock()
        flush_first = _FlushFirst()
        registry.register(flush_first)
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
        # The payload budget (wirelab.core.admission): 0 capacity until report_budget is called,
        # which is also what the knob's 0 (admission off) reads as.
        budget_capacity = Gauge(
            "wirelab_server_payload_budget_bytes",
            "Payload bytes the calls in flight may hold at once (0: no admission control)",
            ["protocol"],
            registry=registry,
        )
        budget_in_use = Gauge(
            "wirelab_server_payload_in_flight_bytes",
            "Payload bytes admitted by the budget and held by calls in flight",
            ["protocol"],
            registry=registry,
        )
        self._budget_capacity = budget_capacity.labels(protocol)
        self._budget_in_use = budget_in_use.labels(protocol)
        self._budget: PayloadBudget | None = None
        # Every instrument, in registration order (the order an exposition lists them in).
        self.instruments: tuple[Counter | Gauge | Histogram, ...] = (
            self.requests,
            self.duration,
            self.first_message,
            self.request_bytes,
            self.response_bytes,
            self.messages_received,
            self.messages_sent,
            self.in_flight,
            info,
            budget_capacity,
            budget_in_use,
        )
        self._bound: dict[str, KindInstruments] = {}
        flush_first.metrics = self
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

    def report_budget(self, budget: PayloadBudget) -> None:
        """Export ``budget``'s capacity and the bytes it has admitted; the in-use figure is read
        at every flush, so each scrape sees it as it is then, at no cost on the request path."""
        self._budget = budget
        self._budget_capacity.set(budget.capacity)
        self._budget_in_use.set(budget.in_use)

    def bound(self, kind: str) -> KindInstruments:
        """The pre-resolved children of ``kind`` (resolved once, then a dict lookup)."""
        found = self._bound.get(kind)
        if found is None:
            found = self._bound[kind] = KindInstruments(self, kind)
        return found

    def begin(self, kind: str) -> KindInstruments:
        """Count one call of ``kind`` as started (in flight) and return its instruments; pair it
        with exactly one :meth:`record`. :meth:`start` wraps both in a Call object."""
        return self.enter(self.bound(kind))

    def enter(self, bound: KindInstruments) -> KindInstruments:
        """:meth:`begin` for instruments already resolved by :meth:`bound`."""
        starts = self._starts
        starts.append(bound)
        if len(starts) >= FLUSH_EVERY:
            self.flush()
        return bound

    def record(
        self,
        bound: KindInstruments,
        outcome: str,
        code: str,
        duration: float,
        first_message: float | None,
        bytes_in: int,
        bytes_out: int,
        messages_in: int,
        messages_out: int,
    ) -> None:
        """Queue one finished call: a list extend instead of eight lock round trips; the
        instruments are brought up to date in batches (:meth:`flush`)."""
        self.enqueue(
            (
                bound,
                outcome,
                code,
                duration,
                first_message,
                bytes_in,
                bytes_out,
                messages_in,
                messages_out,
            )
        )

    def start(self, kind: str, started: float | None = None) -> Call:
        """Begin one call of ``kind``, timed from ``started`` (a ``time.perf_counter()`` taken
        when the call arrived) or from now; finish it with :meth:`Call.finish`."""
        return Call(
            self, kind, time.perf_counter() if started is None else started, self.begin(kind)
        )

    def flush(self) -> None:
        """Apply the queued starts and finished calls to the instruments. Runs before every
        collection (so a scrape always sees every call) and every FLUSH_EVERY records."""
        with self._flush_lock:
            if self._budget is not None:
                self._budget_in_use.set(self._budget.in_use)
            # Each take is a slice of the first n items and a deletion of the same n, both
            # atomic under the GIL, and other threads only ever append (a whole record in one
            # extend), so whatever they add meanwhile waits for the next flush, never lost.
            # Finished calls are taken first: each one's start was queued before it, so it is
            # taken too and the in-flight gauge never dips below zero (a call that starts and
            # ends between the two takes counts as in flight until the next flush).
            flat = _take(self._queue)
            # Column by column: a tuple per record here would feed the garbage collector what
            # the flat queue starves it of (see __init__).
            columns = [flat[i::RECORD_FIELDS] for i in range(RECORD_FIELDS)]
            started = collections.Counter(_take(self._starts))
            for bound in list(self._bound.values()):
                # Starts counted by a single-threaded caller (KindInstruments.arrived), read
                # after the batch was taken for the same reason as the queued starts.
                arrived = bound.arrived
                if arrived != bound.arrived_applied:
                    started[bound] += arrived - bound.arrived_applied
                    bound.arrived_applied = arrived
            kinds = set(started) | set(columns[0])
            for bound in kinds:
                if len(kinds) == 1:
                    mine = columns
                else:
                    rows = [i for i, b in enumerate(columns[0]) if b is bound]
                    mine = [[column[i] for i in rows] for column in columns]
                bound.apply(started[bound], mine)


# Items per queued record: the arguments of ServerMetrics.record.
RECORD_FIELDS = 9


def _take(queue: list[Any]) -> list[Any]:
    """Remove and return what ``queue`` holds now (see ServerMetrics.flush)."""
    count = len(queue)
    taken = queue[:count]
    del queue[:count]
    return taken


# Queued calls are applied at every scrape (the lab scrapes each second) and at the latest after
# this many starts, which bounds the queue (about 2 MB); a power of two, so a counted start can
# test it with a mask. Larger batches should cost less per call (a flush touches the instruments
# and evicts the request path from the cache): one interleaved in-process run measured 5.8 us a
# call flushing every 256 starts, 3.3 us every 16384; later runs could not tell them apart.
FLUSH_EVERY = 16384
FLUSH_MASK = FLUSH_EVERY - 1


class _FlushFirst(Collector):
    """Registered before the instruments, so the registry flushes queued calls into them
    before it collects them (a collector's order in the registry is its registration order)."""

    def __init__(self) -> None:
        self.metrics: ServerMetrics | None = None

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> list[Metric]:
        if self.metrics is not None:
            self.metrics.flush()
        return []


def _observe_many(histogram: Histogram, values: Sequence[float]) -> None:
    """``observe`` for a batch: one bucket increment per bucket touched instead of a lock pair
    per value. Mirrors Histogram.observe (first upper bound >= value, +Inf last); a unit test
    compares the two, as this reads prometheus_client internals (pinned in pyproject)."""
    # Sorted once in C, then one bisect per bucket bound instead of one per value: measured
    # 3-5x cheaper per batch than counting a bisect of every value.
    ordered = sorted(values)
    total = len(ordered)
    buckets = histogram._buckets
    below = 0
    for index, bound in enumerate(histogram._upper_bounds):
        upto = bisect.bisect_right(ordered, bound, below)
        if upto > below:
            buckets[index].inc(upto - below)
            below = upto
            if below == total:
                break
    histogram._sum.inc(sum(values))


class KindInstruments:
    """Label children of one (protocol, kind), resolved once: ``labels()`` takes a lock and
    builds a key on every call, which the observer-effect benchmark shows in throughput."""

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
        # Calls started by one thread only (the REST event loop), counted here with a plain
        # ``+= 1`` instead of ServerMetrics.enter: no call, which the observer-effect benchmark
        # shows. ServerMetrics.flush turns the count into in-flight starts; not thread-safe for
        # more than one writer, so thread-pool servers use enter.
        self.arrived = 0
        self.arrived_applied = 0

    def apply(self, started: int, columns: list[list[Any]]) -> None:
        """Record ``started`` new calls and a batch of finished ones, given as one list per
        argument of ServerMetrics.record."""
        _, outcomes, codes, durations, firsts, bytes_in, bytes_out, msgs_in, msgs_out = columns
        total = len(outcomes)
        if started != total:
            self.in_flight.inc(started - total)
        if not total:
            return
        m, p, k = self._metrics, self._metrics.protocol, self.kind
        # Usually every call in a batch ended alike: two C counts instead of a Counter of pairs.
        if codes.count(codes[0]) == total and outcomes.count(outcomes[0]) == total:
            ended = {(outcomes[0], codes[0]): total}
        else:
            ended = collections.Counter(zip(outcomes, codes, strict=True))
        for (outcome, code), count in ended.items():
            m.requests.labels(p, k, outcome, code).inc(count)
        for outcome in set(outcomes):
            values = (
                durations
                if total == outcomes.count(outcome)
                else [d for d, o in zip(durations, outcomes, strict=True) if o == outcome]
            )
            _observe_many(m.duration.labels(p, k, outcome), values)
        if self.first_message is not None:
            measured = [f for f in firsts if f is not None]
            if measured:
                _observe_many(self.first_message, measured)
        _observe_many(self.request_bytes, bytes_in)
        _observe_many(self.response_bytes, bytes_out)
        self.messages_received.inc(sum(msgs_in))
        self.messages_sent.inc(sum(msgs_out))


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
        first = None if self.first_sent is None else self.first_sent - self.started
        self.metrics.record(
            self.bound,
            outcome,
            code,
            time.perf_counter() - self.started,
            first,
            self.bytes_in,
            self.bytes_out,
            self.messages_in,
            self.messages_out,
        )

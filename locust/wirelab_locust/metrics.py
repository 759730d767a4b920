"""Client-side metrics as mergeable histogram state, so workers can ship them to the master."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from wirelab.metrics import (
    DURATION_BUCKETS,
    KINDS_BY_PROTOCOL,
    OUTCOMES,
    SIZE_BUCKETS,
    STREAM_KINDS,
)

# The RPC each kind calls; REST rows use the same names so they sit beside the gRPC rows.
CALLS = {
    "unary": "ProcessOrder",
    "server_stream": "StreamMessages",
    "bidi": "PingPong",
    "upload": "Upload",
    "upload_chunked": "UploadStream",
    "upload_json": "UploadJson",
    "download": "Download",
    "download_chunked": "DownloadStream",
    "download_json": "DownloadJson",
}
CLIENT_OUTCOMES = (*OUTCOMES, "failure", "connection_error")
CALL_LABELS = ("protocol", "kind", "call")

# name -> (help, buckets, has outcome label); all histograms share this shape of state.
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...], bool]] = {
    "wirelab_client_request_duration_seconds": (
        "Whole call as the client saw it: request start to last response byte",
        DURATION_BUCKETS,
        True,
    ),
    "wirelab_client_time_to_first_message_seconds": (
        "Streams: request start to the first response message",
        DURATION_BUCKETS,
        False,
    ),
    "wirelab_client_request_bytes": ("Bytes sent per call (body or protobuf)", SIZE_BUCKETS, False),
    "wirelab_client_response_bytes": ("Bytes received per call", SIZE_BUCKETS, False),
}
COUNTERS = {
    "wirelab_client_requests": "Completed calls by outcome",
    "wirelab_client_messages_sent": "Messages sent (1 per body; each stream message or chunk)",
    "wirelab_client_messages_received": "Messages received (1 per body; each message or chunk)",
}
Key = tuple[str, tuple[str, ...]]
# What a worker ships: [[name, labels, values], ...]; msgpack-friendly (no tuples as map keys).
Shipment = list[list[object]]


@dataclass
class Observations:
    """Counter and histogram state of this process; histograms keep per-bucket counts + sum."""

    counters: dict[Key, float] = field(default_factory=dict)
    histograms: dict[Key, list[float]] = field(default_factory=dict)

    def count(self, name: str, labels: tuple[str, ...], amount: float = 1.0) -> None:
        key = (name, labels)
        self.counters[key] = self.counters.get(key, 0.0) + amount

    def observe(self, name: str, labels: tuple[str, ...], value: float) -> None:
        buckets = HISTOGRAMS[name][1]
        state = self.histograms.get((name, labels))
        if state is None:
            # one slot per bucket, one for +Inf, then the sum
            state = self.histograms[(name, labels)] = [0.0] * (len(buckets) + 2)
        state[bisect_left(buckets, value)] += 1
        state[-1] += value

    def preinitialise(self) -> None:
        """Zero series for every known label value, like the server side."""
        for protocol, kinds in KINDS_BY_PROTOCOL.items():
            for kind in kinds:
                labels = (protocol, kind, CALLS[kind])
                for outcome in CLIENT_OUTCOMES:
                    self.count("wirelab_client_requests", (*labels, outcome), 0)
                    self._touch("wirelab_client_request_duration_seconds", (*labels, outcome))
                if kind in STREAM_KINDS:
                    self._touch("wirelab_client_time_to_first_message_seconds", labels)
                for name in ("wirelab_client_request_bytes", "wirelab_client_response_bytes"):
                    self._touch(name, labels)
                self.count("wirelab_client_messages_sent", labels, 0)
                self.count("wirelab_client_messages_received", labels, 0)

    def _touch(self, name: str, labels: tuple[str, ...]) -> None:
        size = len(HISTOGRAMS[name][1]) + 2
        self.histograms.setdefault((name, labels), [0.0] * size)

    def drain(self) -> Shipment:
        """Hand over everything observed since the last drain (a worker's report to the master)."""
        counters, histograms = self.counters, self.histograms
        self.counters, self.histograms = {}, {}
        shipped: Shipment = [[n, list(labels), v] for (n, labels), v in counters.items() if v]
        shipped += [[n, list(labels), s] for (n, labels), s in histograms.items() if any(s)]
        return shipped

    def merge(self, shipment: Shipment) -> None:
        for name, labels, values in shipment:
            assert isinstance(labels, list)
            key = (str(name), tuple(str(v) for v in labels))
            if isinstance(values, list):
                state = self.histograms.setdefault(key, [0.0] * len(values))
                for i, v in enumerate(values):
                    state[i] += float(v)
            else:
                assert isinstance(values, int | float)
                self.counters[key] = self.counters.get(key, 0.0) + float(values)


@dataclass(frozen=True)
class Gauges:
    """Live values read at scrape time from the runner: users, workers, CPU per process."""

    users: int
    workers: int
    cpu: dict[str, float]


class ClientCollector(Collector):
    """Exposes merged observations and runner gauges in Prometheus' text format."""

    def __init__(self, observations: Observations, gauges: Callable[[], Gauges]) -> None:
        self.observations = observations
        self.gauges = gauges

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        obs = self.observations
        for name, text in COUNTERS.items():
            outcome = ("outcome",) if name == "wirelab_client_requests" else ()
            family = CounterMetricFamily(name, text, labels=[*CALL_LABELS, *outcome])
            for (n, labels), value in sorted(obs.counters.items()):
                if n == name:
                    family.add_metric(list(labels), value)
            yield family
        for name, (text, buckets, has_outcome) in HISTOGRAMS.items():
            outcome = ("outcome",) if has_outcome else ()
            hist = HistogramMetricFamily(name, text, labels=[*CALL_LABELS, *outcome])
            for (n, labels), state in sorted(obs.histograms.items()):
                if n != name:
                    continue
                cumulative, running = [], 0.0
                for bound, hits in zip(bucket_bounds(buckets), state[:-1], strict=True):
                    running += hits
                    cumulative.append((bound, running))
                hist.add_metric(list(labels), cumulative, sum_value=state[-1])
            yield hist
        yield from self._gauges()

    def _gauges(self) -> Iterator[GaugeMetricFamily]:
        now = self.gauges()
        yield GaugeMetricFamily("wirelab_client_users", "Running users, all workers", now.users)
        yield GaugeMetricFamily("wirelab_client_workers", "Connected workers", now.workers)
        cpu = GaugeMetricFamily(
            "wirelab_client_cpu_usage_ratio",
            "CPU of each load-generator process as a fraction of one core",
            labels=["instance_name"],
        )
        saturated = GaugeMetricFamily(
            "wirelab_client_saturated",
            "1 when that load-generator process is at >= 90% CPU: the client is the bottleneck",
            labels=["instance_name"],
        )
        for instance, ratio in sorted(now.cpu.items()):
            cpu.add_metric([instance], ratio)
            saturated.add_metric([instance], float(ratio >= SATURATED_RATIO))
        yield cpu
        yield saturated


SATURATED_RATIO = 0.9


def bucket_bounds(buckets: tuple[float, ...]) -> list[str]:
    """The `le` label values, spelled as prometheus_client spells the server's buckets."""
    return [str(floatToGoString(b)) for b in (*buckets, float("inf"))]  # type: ignore[no-untyped-call]

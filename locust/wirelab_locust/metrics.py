"""Client-side metrics as mergeable histogram state, so workers can ship them to the master."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from wirelab.contract import CALLS, CLIENT, CLIENT_OUTCOMES, KINDS_BY_PROTOCOL, STREAM_KINDS, Family

COUNTERS = {name: f for name, f in CLIENT.items() if f.type == "counter"}
# All histograms share one shape of state: a count per bucket, one for +Inf, then the sum.
HISTOGRAMS = {name: f for name, f in CLIENT.items() if f.type == "histogram"}
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
        buckets = HISTOGRAMS[name].buckets
        state = self.histograms.get((name, labels))
        if state is None:
            # one slot per bucket, one for +Inf, then the sum
            state = self.histograms[(name, labels)] = [0.0] * (len(buckets) + 2)
        state[bisect_left(buckets, value)] += 1
        state[-1] += value

    def preinitialise(self, peers: Mapping[str, str]) -> None:
        """Zero series for the known label values the contract names, like the server side, for
        calls to ``peers`` (protocol -> peer label of the service that protocol's users call)."""
        for protocol, peer in peers.items():
            for kind in KINDS_BY_PROTOCOL[protocol]:
                labels = (protocol, kind, CALLS[kind], peer)
                for family in CLIENT.values():
                    each = family.preinitialise
                    if each == "kind" or (each == "stream_kind" and kind in STREAM_KINDS):
                        self._touch(family, labels)
                    elif each == "kind_outcome":
                        for outcome in CLIENT_OUTCOMES:
                            self._touch(family, (*labels, outcome))

    def _touch(self, family: Family, labels: tuple[str, ...]) -> None:
        if family.type == "counter":
            self.count(family.name, labels, 0)
        else:
            self.histograms.setdefault((family.name, labels), [0.0] * (len(family.buckets) + 2))

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
        for name, counter in COUNTERS.items():
            family = CounterMetricFamily(name, counter.help, labels=counter.labels)
            for (n, labels), value in sorted(obs.counters.items()):
                if n == name:
                    family.add_metric(list(labels), value)
            yield family
        for name, histogram in HISTOGRAMS.items():
            hist = HistogramMetricFamily(name, histogram.help, labels=histogram.labels)
            for (n, labels), state in sorted(obs.histograms.items()):
                if n != name:
                    continue
                cumulative, running = [], 0.0
                bounds = bucket_bounds(histogram.buckets)
                for bound, hits in zip(bounds, state[:-1], strict=True):
                    running += hits
                    cumulative.append((bound, running))
                hist.add_metric(list(labels), cumulative, sum_value=state[-1])
            yield hist
        yield from self._gauges()

    def _gauges(self) -> Iterator[GaugeMetricFamily]:
        now = self.gauges()
        yield _gauge(CLIENT["wirelab_client_users"], now.users)
        yield _gauge(CLIENT["wirelab_client_workers"], now.workers)
        cpu = _gauge(CLIENT["wirelab_client_cpu_usage_ratio"])
        saturated = _gauge(CLIENT["wirelab_client_saturated"])
        for instance, ratio in sorted(now.cpu.items()):
            cpu.add_metric([instance], ratio)
            saturated.add_metric([instance], float(ratio >= SATURATED_RATIO))
        yield cpu
        yield saturated


SATURATED_RATIO = 0.9


def _gauge(family: Family, value: float | None = None) -> GaugeMetricFamily:
    if value is None:  # labelled: its samples are added by the caller
        return GaugeMetricFamily(family.name, family.help, labels=family.labels)
    return GaugeMetricFamily(family.name, family.help, value)


def bucket_bounds(buckets: tuple[float, ...]) -> list[str]:
    """The `le` label values, spelled as prometheus_client spells the server's buckets."""
    return [str(floatToGoString(b)) for b in (*buckets, float("inf"))]  # type: ignore[no-untyped-call]

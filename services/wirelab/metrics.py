"""The contract's server families for both transports: counts applied from a queue of calls."""

from __future__ import annotations

import bisect
import collections
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import Context, ContextVar, copy_context
from dataclasses import dataclass, field
from typing import Any, get_args

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

from wirelab.contract import CANONICAL_CODES, KINDS_BY_PROTOCOL, PROTOCOLS, SERVER, STREAM_KINDS
from wirelab.core import PayloadBudget

FIRST_MESSAGE = "wirelab_server_time_to_first_message_seconds"


@dataclass(slots=True, eq=False)
class Sampled:
    """The trace id (32 lowercase hex) of the call running in this context, once a kept span of
    its trace has started there (wirelab.traces.exemplars); None until then."""

    trace_id: str | None = None


# The exemplars' one label, as the Node.js services name it and Grafana's Prometheus datasource
# reads it to open the trace in Jaeger (grafana/provisioning/datasources).
TRACE_ID_LABEL = "trace_id"
# The current call's Sampled, read where its record is made (None without traces; gRPC: opened).
SAMPLED: ContextVar[Sampled | None] = ContextVar("wirelab_sampled", default=None)


# Counts, not the library's instruments: docs/services.md#counts-not-the-librarys-instruments
class ServerMetrics(Collector):
    """The server-side families of one protocol, registered in ``registry``: plain counts applied
    in batches (:meth:`flush`), exposed as the library's metric families at each collection."""

    def __init__(
        self,
        protocol: str,
        registry: CollectorRegistry,
        concurrency: str,
        fanout: str = "none",
        client: str = "none",
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol!r}")
        self.protocol = protocol
        self.registry = registry
        # Started calls, and finished calls' Records lying flat in a list, RECORD_FIELDS items
        # each, added by one atomic extend: docs/services.md#a-flat-queue
        self._starts: list[KindInstruments] = []
        self._queue: list[Any] = []
        # Queues one finished call with no frame of its own on the hot paths that call it.
        self.enqueue: Callable[[Record], None] = self._queue.extend
        self._lock = threading.Lock()
        self._info = (concurrency, fanout, client)
        self.budget = PayloadBudget(0)  # the service sets its own; read at each collection
        self._bound: dict[str, KindInstruments] = {}
        self.exemplars = False
        # Zero series of the contract's kinds and canonical outcomes: 0 on panels, not "no data".
        for kind in KINDS_BY_PROTOCOL[protocol]:
            ended = self.bound(kind).ended
            for outcome, code in CANONICAL_CODES[protocol].items():
                ended[outcome, code] = 0
        registry.register(self)

    def keep_exemplars(self) -> None:
        """With traces on, a sampled call's trace id (SAMPLED) becomes the exemplar of its duration
        bucket, the latest per bucket. Call before the transports take :attr:`enqueue`."""
        # Traces off, the calls' path is unchanged: docs/services.md#exemplars-off-the-calls-path
        self.exemplars = True
        extend = self._queue.extend

        def enqueue(record: Record) -> None:
            extend(record)
            sampled = SAMPLED.get()
            if sampled is not None and sampled.trace_id is not None:
                record[0].duration.note(record[3], sampled.trace_id)

        self.enqueue = enqueue

    def bound(self, kind: str) -> KindInstruments:
        """The counts of ``kind`` (made once, then a dict lookup)."""
        found = self._bound.get(kind)
        if found is None:
            found = self._bound[kind] = KindInstruments(kind)
        return found

    def enter(self, bound: KindInstruments) -> KindInstruments:
        """Count one call of ``bound``'s kind as started (in flight) and return its counts; pair
        it with exactly one :attr:`enqueue`d Record. :meth:`start` wraps both in a Call."""
        starts = self._starts
        starts.append(bound)
        if len(starts) >= FLUSH_EVERY:
            self.flush()
        return bound

    def start(self, kind: str, started: float | None = None) -> Call:
        """Begin one call of ``kind``, timed from ``started`` (a ``time.perf_counter()`` taken
        when the call arrived) or from now; finish it with :meth:`Call.finish`."""
        return Call(
            self, time.perf_counter() if started is None else started, self.enter(self.bound(kind))
        )

    def start_traced(self, kind: str, started: float) -> Call:
        """:meth:`start` for a call that grpc records outside its context, exemplars kept."""
        return TracedCall(self, started, self.enter(self.bound(kind)))

    def flush(self) -> None:
        """Apply the queued starts and finished calls: at every collection (so a scrape sees every
        call) and every FLUSH_EVERY starts."""
        with self._lock:
            self._apply()

    def _apply(self) -> None:
        # Each take (a slice, then a deletion, each atomic under the GIL) leaves what other threads
        # append meanwhile to the next flush. Finished calls are taken first, so each one's start
        # is taken too and the in-flight gauge never dips below zero (a call that starts and ends
        # between the two takes stays in flight until the next flush).
        flat = _take(self._queue)
        # Column by column: a tuple per record would feed the garbage collector (see __init__).
        columns = [flat[i::RECORD_FIELDS] for i in range(RECORD_FIELDS)]
        started = collections.Counter(_take(self._starts))
        for bound in list(self._bound.values()):
            # Starts counted by a single-threaded caller (KindInstruments.arrived), read after the
            # batch was taken for the same reason as the queued starts.
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

    def describe(self) -> list[Metric]:
        return [_FAMILIES[f.type](f.name, f.help, labels=f.labels) for f in SERVER.values()]

    def collect(self) -> Iterator[Metric]:
        """The contract's server families in its order, each series as of this collection."""
        p = self.protocol
        with self._lock:
            self._apply()
            # By name: the three family types' add_metric take different values.
            out: dict[str, Any] = {family.name: family for family in self.describe()}
            for b in self._bound.values():
                labels = [p, b.kind]
                for (outcome, code), count in b.ended.items():
                    out["wirelab_server_requests"].add_metric([*labels, outcome, code], count)
                for name, histogram in b.histograms.items():
                    out[name].add_metric(labels, histogram.buckets(), histogram.sum)
                out["wirelab_server_messages_received"].add_metric(labels, b.messages_received)
                out["wirelab_server_messages_sent"].add_metric(labels, b.messages_sent)
                out["wirelab_server_requests_in_flight"].add_metric(labels, b.in_flight)
            out["wirelab_server_info"].add_metric([p, *self._info], 1)
            out["wirelab_server_payload_budget_bytes"].add_metric([p], self.budget.capacity)
            out["wirelab_server_payload_in_flight_bytes"].add_metric([p], self.budget.in_use)
        yield from out.values()


# The library's family of each of the contract's types, empty until a collection fills it.
_FAMILIES: dict[str, Callable[..., Metric]] = {
    "counter": CounterMetricFamily,
    "gauge": GaugeMetricFamily,
    "histogram": HistogramMetricFamily,
}


# One finished call: its kind's counts, outcome, raw code, duration, time to first message (None
# unless a stream sent one), bytes in, bytes out, messages in, messages out.
# A tuple, not a NamedTuple: docs/services.md#a-tuple-per-record
Record = tuple["KindInstruments", str, str, float, float | None, int, int, int, int]
RECORD_FIELDS = len(get_args(Record))


def _take(queue: list[Any]) -> list[Any]:
    """Remove and return what ``queue`` holds now (see ServerMetrics._apply)."""
    count = len(queue)
    taken = queue[:count]
    del queue[:count]
    return taken


# Queued calls are applied at every scrape and after this many starts at the latest (a queue of
# about 2 MB), a power of two to test with a mask: docs/services.md#flush-every-16384-starts
FLUSH_EVERY = 16384
FLUSH_MASK = FLUSH_EVERY - 1


Bucket = tuple[str, float] | tuple[str, float, Exemplar]


class Buckets:
    """A histogram's counts: one per upper bound (+Inf last), and the sum of what was observed."""

    __slots__ = ("bounds", "counts", "exemplars", "les", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = (*bounds, float("inf")) if bounds[-1] != float("inf") else tuple(bounds)
        self.les = [floatToGoString(b) for b in self.bounds]  # type: ignore[no-untyped-call]
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0
        # The latest exemplar per bucket (ServerMetrics.keep_exemplars), None until one is noted.
        self.exemplars: list[Exemplar | None] | None = None

    def note(self, value: float, trace_id: str) -> None:
        """Make ``trace_id`` the exemplar of the bucket ``value`` is counted in (one list item
        set, atomic under the GIL, so any thread may note)."""
        if self.exemplars is None:
            self.exemplars = [None] * len(self.bounds)
        exemplar = Exemplar({TRACE_ID_LABEL: trace_id}, value, time.time())
        self.exemplars[bisect.bisect_left(self.bounds, value)] = exemplar

    def observe(self, values: Sequence[float]) -> None:
        """Count each of ``values`` in the first bucket whose upper bound is >= it, as
        ``Histogram.observe`` does (a unit test compares the two)."""
        # Sorted once, then a bisect per bound: docs/services.md#buckets-sorted-once
        ordered = sorted(values)
        total = len(ordered)
        counts = self.counts
        below = 0
        for index, bound in enumerate(self.bounds):
            upto = bisect.bisect_right(ordered, bound, below)
            if upto > below:
                counts[index] += upto - below
                below = upto
                if below == total:
                    break
        self.sum += sum(values)

    def buckets(self) -> list[Bucket]:
        """Cumulative counts by ``le``, as HistogramMetricFamily takes them, with each bucket's
        exemplar when it has one."""
        out: list[Bucket] = [*zip(self.les, itertools.accumulate(self.counts), strict=True)]
        for index, exemplar in enumerate(self.exemplars or ()):
            if exemplar is not None:
                out[index] = (*out[index][:2], exemplar)
        return out


class KindInstruments:
    """The counts of one (protocol, kind), applied under the metrics' lock."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.in_flight = 0
        self.ended: dict[tuple[str, str], int] = {}
        # The contract's histograms in its order, as the collection lists them; a time to first
        # message for stream kinds only.
        self.histograms = {
            name: Buckets(family.buckets)
            for name, family in SERVER.items()
            if family.type == "histogram" and (name != FIRST_MESSAGE or kind in STREAM_KINDS)
        }
        self.duration = self.histograms["wirelab_server_request_duration_seconds"]
        self.first_message = self.histograms.get(FIRST_MESSAGE)
        self.request_bytes = self.histograms["wirelab_server_request_bytes"]
        self.response_bytes = self.histograms["wirelab_server_response_bytes"]
        self.messages_received = 0
        self.messages_sent = 0
        # Starts counted by the event loop's one thread with a plain ``+= 1`` (thread-pool servers
        # call ServerMetrics.enter): docs/services.md#starts-counted-by-the-event-loop
        self.arrived = 0
        self.arrived_applied = 0

    def apply(self, started: int, columns: list[list[Any]]) -> None:
        """Record ``started`` new calls and a batch of finished ones, given as one list per
        field of Record."""
        _, outcomes, codes, durations, firsts, bytes_in, bytes_out, msgs_in, msgs_out = columns
        total = len(outcomes)
        self.in_flight += started - total
        if not total:
            return
        # Usually every call in a batch ended alike: two C counts instead of a Counter of pairs.
        if codes.count(codes[0]) == total and outcomes.count(outcomes[0]) == total:
            ended = {(outcomes[0], codes[0]): total}
        else:
            ended = collections.Counter(zip(outcomes, codes, strict=True))
        for key, count in ended.items():
            self.ended[key] = self.ended.get(key, 0) + count
        self.duration.observe(durations)
        if self.first_message is not None:
            measured = [f for f in firsts if f is not None]
            if measured:
                self.first_message.observe(measured)
        self.request_bytes.observe(bytes_in)
        self.response_bytes.observe(bytes_out)
        self.messages_received += sum(msgs_in)
        self.messages_sent += sum(msgs_out)


@dataclass(slots=True)
class Call:
    """One call being measured: counts bytes and messages, then records its outcome once."""

    metrics: ServerMetrics
    started: float
    bound: KindInstruments
    bytes_in: int = 0
    bytes_out: int = 0
    messages_in: int = 0
    messages_out: int = 0
    first: float | None = None  # time to first message, once one is sent
    finished: bool = field(default=False)

    def received(self, nbytes: int, messages: int = 1) -> None:
        self.bytes_in += nbytes
        self.messages_in += messages

    def sent(self, nbytes: int, messages: int = 1) -> None:
        if self.first is None and messages:
            self.first = time.perf_counter() - self.started
        self.bytes_out += nbytes
        self.messages_out += messages

    def finish(self, outcome: str, code: str) -> None:
        """Record the call; a second call is ignored so error paths cannot double count."""
        if self.finished:
            return
        self.finished = True
        self.metrics.enqueue(
            (self.bound, outcome, code, time.perf_counter() - self.started, self.first,
             self.bytes_in, self.bytes_out, self.messages_in, self.messages_out)
        )  # fmt: skip


def opened() -> Context:
    """A new Sampled made current here, and a copy of this context that holds it: grpc's done
    callbacks run outside it, so a call makes its record in the copy (TracedCall, measure_aio)."""
    SAMPLED.set(Sampled())
    return copy_context()


@dataclass(slots=True)
class TracedCall(Call):
    """A Call of a traced service (ServerMetrics.keep_exemplars): it opens the Sampled a kept
    span of its trace fills and makes its record in the context that holds it."""

    record_in: Context = field(default_factory=opened)

    def finish(self, outcome: str, code: str) -> None:
        self.record_in.run(Call.finish, self, outcome, code)

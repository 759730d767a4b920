"""One metrics module for both transports: the server families of the metric contract
(wirelab.contract), kept as plain counts and exposed through a collector, and the queue that
batches finished calls into them."""

from __future__ import annotations

import bisect
import collections
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

from wirelab.contract import (
    CANONICAL_CODES,
    KINDS_BY_PROTOCOL,
    PROTOCOLS,
    SERVER,
    STREAM_KINDS,
    Family,
)

if TYPE_CHECKING:
    from wirelab.core import PayloadBudget

# The families' names, as the contract spells them.
REQUESTS = "wirelab_server_requests"
DURATION = "wirelab_server_request_duration_seconds"
FIRST_MESSAGE = "wirelab_server_time_to_first_message_seconds"
REQUEST_BYTES = "wirelab_server_request_bytes"
RESPONSE_BYTES = "wirelab_server_response_bytes"
MESSAGES_RECEIVED = "wirelab_server_messages_received"
MESSAGES_SENT = "wirelab_server_messages_sent"
IN_FLIGHT = "wirelab_server_requests_in_flight"
INFO = "wirelab_server_info"
BUDGET = "wirelab_server_payload_budget_bytes"
BUDGET_IN_USE = "wirelab_server_payload_in_flight_bytes"


class Sampled:
    """The trace id (32 lowercase hex) of the call running in this context, once a kept span of
    its trace has started there (wirelab.traces.exemplars); None until then."""

    __slots__ = ("trace_id",)

    def __init__(self, trace_id: str | None = None) -> None:
        self.trace_id = trace_id


# The exemplars' one label, as the Node.js services name it too and Grafana's Prometheus
# datasource reads it to open the trace in Jaeger (grafana/provisioning/datasources).
TRACE_ID_LABEL = "trace_id"
# The current call's Sampled, read where its record is made to give the duration histogram an
# exemplar; None without traces. A measured gRPC call opens its own (TracedCall), since grpc
# records it in a done callback, outside the call's context.
SAMPLED: ContextVar[Sampled | None] = ContextVar("wirelab_sampled", default=None)


class ServerMetrics(Collector):
    """The server-side families of one protocol, registered in ``registry``.

    The counts are plain numbers applied in batches (:meth:`flush`) and exposed through the
    library's public metric families at each collection. The library's instruments take a lock per
    increment and per observed value, and their public API takes a batch value by value: timed
    in-process on 28 Nov 2026 (16,000 queued unary calls, flushed 20 times, three rounds),
    applying them cost 27 ms through ``Histogram.observe`` against 3.3 ms as counts here, as much
    as the batched path it replaced, which wrote into the instruments' private attributes; and
    the /metrics page rendered in 1.3 ms instead of 2.2 (REST, 50 calls of every kind).
    Exemplars (keep_exemplars, traces on only) left both as they were with traces off: the same
    method, CPU time, this change and the commit before it (74ce0fe) in turn, three times each,
    28 Nov 2026 on this shared 2-core machine at load average 5: flush 3.59-3.85 ms against
    3.63-3.95, page 1.46-1.58 ms against 1.48-1.62 (`wirelab perf scrape-cost` prints the
    flush: 3.99 ms at that load).
    """

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
        # Started calls and finished-call records (see Record), applied by flush(). Records
        # lie flat in the queue, RECORD_FIELDS items each, added by one atomic ``extend``: a
        # tuple per call kept until the flush would survive the garbage collector's young
        # generation and drive it. Measured in-process, 100,000 REST calls: with a queued tuple
        # each, 255 young, 23 middle and 2 full collections (0.65 us a call); flat, none, as
        # with metrics off. Lists, not deques: appending is as atomic under the GIL, and flush
        # takes a whole batch with one slice and one deletion instead of a popleft per item
        # (measured: 2 ms for the 45,000 items of 5,000 records, against 0.1 ms).
        self._starts: list[KindInstruments] = []
        self._queue: list[Any] = []
        # Queue one finished call: a list extend instead of eight lock round trips, and no
        # frame of its own on the hot paths that call it; flush() applies the records.
        self.enqueue: Callable[[Record], None] = self._queue.extend
        self._lock = threading.Lock()
        self._info = (concurrency, fanout, client)
        # The payload budget (wirelab.core.admission): 0 capacity until report_budget is called,
        # which is also what the knob's 0 (admission off) reads as.
        self._budget: PayloadBudget | None = None
        self._bound: dict[str, KindInstruments] = {}
        self.exemplars = False
        # Zero-valued series for the contract's kinds (and, for requests, their canonical
        # outcomes), so panels and error ratios show 0 instead of "no data" before the first call.
        for kind in KINDS_BY_PROTOCOL[protocol]:
            ended = self.bound(kind).ended
            for outcome, code in CANONICAL_CODES[protocol].items():
                ended[outcome, code] = 0
        registry.register(self)

    def keep_exemplars(self) -> None:
        """With traces on: the duration histogram keeps the trace id of a sampled call
        (wirelab.metrics.SAMPLED) as the exemplar of the bucket the call fell in, the latest per
        bucket, as prometheus_client's instruments do. Call it before the transports are built:
        they take :attr:`enqueue` then. Without it (traces off) nothing on the
        calls' path changes."""
        self.exemplars = True
        extend = self._queue.extend

        def enqueue(record: Record) -> None:
            extend(record)
            sampled = SAMPLED.get()
            if sampled is not None and sampled.trace_id is not None:
                record[0].duration.note(record[3], sampled.trace_id)

        self.enqueue = enqueue

    def report_budget(self, budget: PayloadBudget) -> None:
        """Export ``budget``'s capacity and the bytes it has admitted, read at each collection."""
        self._budget = budget

    def bound(self, kind: str) -> KindInstruments:
        """The counts of ``kind`` (made once, then a dict lookup)."""
        found = self._bound.get(kind)
        if found is None:
            found = self._bound[kind] = KindInstruments(self, kind)
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
            self,
            kind,
            time.perf_counter() if started is None else started,
            self.enter(self.bound(kind)),
        )

    def start_traced(self, kind: str, started: float) -> Call:
        """:meth:`start` for a call that grpc records outside its context, exemplars kept."""
        return TracedCall(self, kind, started, self.enter(self.bound(kind)))

    def flush(self) -> None:
        """Apply the queued starts and finished calls. Runs at every collection (so a scrape
        always sees every call) and every FLUSH_EVERY starts."""
        with self._lock:
            self._apply()

    def _apply(self) -> None:
        # Each take is a slice of the first n items and a deletion of the same n, both atomic
        # under the GIL, and other threads only ever append (a whole record in one extend), so
        # whatever they add meanwhile waits for the next flush, never lost. Finished calls are
        # taken first: each one's start was queued before it, so it is taken too and the
        # in-flight gauge never dips below zero (a call that starts and ends between the two
        # takes counts as in flight until the next flush).
        flat = _take(self._queue)
        # Column by column: a tuple per record here would feed the garbage collector what the
        # flat queue starves it of (see __init__).
        columns = [flat[i::RECORD_FIELDS] for i in range(RECORD_FIELDS)]
        started = collections.Counter(_take(self._starts))
        for bound in list(self._bound.values()):
            # Starts counted by a single-threaded caller (KindInstruments.arrived), read after
            # the batch was taken for the same reason as the queued starts.
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
        return [_family(f) for f in SERVER.values()]

    def collect(self) -> Iterator[Metric]:
        """The contract's server families in its order, each series as of this collection."""
        p = self.protocol
        with self._lock:
            self._apply()
            # By name: the three family types' add_metric take different values.
            out: dict[str, Any] = {name: _family(f) for name, f in SERVER.items()}
            for b in self._bound.values():
                labels = [p, b.kind]
                for (outcome, code), count in b.ended.items():
                    out[REQUESTS].add_metric([*labels, outcome, code], count)
                for name, histogram in b.histograms.items():
                    out[name].add_metric(labels, histogram.buckets(), histogram.sum)
                out[MESSAGES_RECEIVED].add_metric(labels, b.messages_received)
                out[MESSAGES_SENT].add_metric(labels, b.messages_sent)
                out[IN_FLIGHT].add_metric(labels, b.in_flight)
            out[INFO].add_metric([p, *self._info], 1)
            budget = self._budget
            out[BUDGET].add_metric([p], 0 if budget is None else budget.capacity)
            out[BUDGET_IN_USE].add_metric([p], 0 if budget is None else budget.in_use)
        yield from out.values()


def _family(family: Family) -> Metric:
    """An empty family of the library's, of ``family``'s type, name, help and labels."""
    if family.type == "counter":
        return CounterMetricFamily(family.name, family.help, labels=family.labels)
    if family.type == "gauge":
        return GaugeMetricFamily(family.name, family.help, labels=family.labels)
    return HistogramMetricFamily(family.name, family.help, labels=family.labels)


# One finished call: its kind's counts, outcome, raw code, duration, time to first message
# (None unless a stream sent one), bytes in, bytes out, messages in, messages out. A tuple type,
# not a NamedTuple or slotted class: mypy checks every place that builds one, and building one
# costs what a tuple costs. A NamedTuple's Python-level __new__ measured 0.45 us a build against
# 0.14 us for the tuple (timeit, best of 7 x 300,000 builds on this machine), 0.3 us more per
# call on paths tuned call by call against the observer-effect benchmark. Either is freed by the
# extend that queues its items, so neither feeds the garbage collector (see ServerMetrics).
Record = tuple["KindInstruments", str, str, float, float | None, int, int, int, int]
RECORD_FIELDS = len(get_args(Record))


def _take(queue: list[Any]) -> list[Any]:
    """Remove and return what ``queue`` holds now (see ServerMetrics._apply)."""
    count = len(queue)
    taken = queue[:count]
    del queue[:count]
    return taken


# Queued calls are applied at every scrape (the lab scrapes each second) and at the latest after
# this many starts, which bounds the queue (about 2 MB); a power of two, so a counted start can
# test it with a mask. Larger batches should cost less per call (a flush touches the counts and
# evicts the request path from the cache): one interleaved in-process run measured 5.8 us a
# call flushing every 256 starts, 3.3 us every 16384; later runs could not tell them apart.
FLUSH_EVERY = 16384
FLUSH_MASK = FLUSH_EVERY - 1


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
        # Sorted once in C, then one bisect per bucket bound instead of one per value: measured
        # 3-5x cheaper per batch than a bisect of every value.
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

    def buckets(self) -> list[tuple[str, float] | tuple[str, float, Exemplar]]:
        """Cumulative counts by ``le``, as HistogramMetricFamily takes them, with each bucket's
        exemplar when it has one."""
        total = 0
        out: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
        for le, count in zip(self.les, self.counts, strict=True):
            total += count
            out.append((le, total))
        if self.exemplars is not None:
            for index, exemplar in enumerate(self.exemplars):
                if exemplar is not None:
                    out[index] = (*out[index][:2], exemplar)
        return out


class KindInstruments:
    """The counts of one (protocol, kind), applied under the metrics' lock."""

    def __init__(self, metrics: ServerMetrics, kind: str) -> None:
        self._metrics = metrics
        self.kind = kind
        self.in_flight = 0
        self.ended: dict[tuple[str, str], int] = {}
        duration, size = SERVER[DURATION].buckets, SERVER[REQUEST_BYTES].buckets
        self.duration = Buckets(duration)
        self.first_message = Buckets(duration) if kind in STREAM_KINDS else None
        self.request_bytes = Buckets(size)
        self.response_bytes = Buckets(SERVER[RESPONSE_BYTES].buckets)
        # In the contract's order, as the collection lists them.
        self.histograms = {
            DURATION: self.duration,
            **({FIRST_MESSAGE: self.first_message} if self.first_message else {}),
            REQUEST_BYTES: self.request_bytes,
            RESPONSE_BYTES: self.response_bytes,
        }
        self.messages_received = 0
        self.messages_sent = 0
        # Calls started by one thread only (the REST event loop), counted here with a plain
        # ``+= 1`` instead of ServerMetrics.enter: no call, which the observer-effect benchmark
        # shows. ServerMetrics._apply turns the count into in-flight starts; not thread-safe for
        # more than one writer, so thread-pool servers use enter.
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
        self.metrics.enqueue(
            (
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
        )


def opened() -> Sampled:
    """A new Sampled, current in this context: a call whose record is made elsewhere takes it
    along (TracedCall, rpc.measure_aio)."""
    sampled = Sampled()
    SAMPLED.set(sampled)
    return sampled


def carried(sampled: Sampled, record: Callable[..., None], *args: Any) -> None:
    """``record(*args)`` with ``sampled`` current, wherever it runs (grpc's done callbacks run
    outside the call's context)."""
    token = SAMPLED.set(sampled)
    try:
        record(*args)
    finally:
        SAMPLED.reset(token)


@dataclass(slots=True)
class TracedCall(Call):
    """A Call of a traced service (ServerMetrics.keep_exemplars): it opens the Sampled a kept
    span of its trace fills and carries it to its record."""

    sampled: Sampled = field(default_factory=opened)

    def finish(self, outcome: str, code: str) -> None:
        carried(self.sampled, Call.finish, self, outcome, code)

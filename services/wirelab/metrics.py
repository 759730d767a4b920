"""One metrics module for both transports: the instruments of the metric contract
(wirelab.contract) and the queue that batches finished calls into them."""

from __future__ import annotations

import bisect
import collections
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

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


class ServerMetrics:
    """The server-side instruments, bound to one protocol and registered in ``registry``."""

    def __init__(
        self, protocol: str, registry: CollectorRegistry, concurrency: str, fanout: str = "none"
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
        self._flush_lock = threading.Lock()
        flush_first = _FlushFirst()
        registry.register(flush_first)
        # Every instrument of the contract, in its order (the order an exposition lists them in).
        made = {name: _instrument(family, registry) for name, family in SERVER.items()}
        self.instruments: tuple[Counter | Gauge | Histogram, ...] = tuple(made.values())
        self.requests = cast(Counter, made["wirelab_server_requests"])
        self.duration = cast(Histogram, made["wirelab_server_request_duration_seconds"])
        self.first_message = cast(Histogram, made["wirelab_server_time_to_first_message_seconds"])
        self.request_bytes = cast(Histogram, made["wirelab_server_request_bytes"])
        self.response_bytes = cast(Histogram, made["wirelab_server_response_bytes"])
        self.messages_received = cast(Counter, made["wirelab_server_messages_received"])
        self.messages_sent = cast(Counter, made["wirelab_server_messages_sent"])
        self.in_flight = cast(Gauge, made["wirelab_server_requests_in_flight"])
        cast(Gauge, made["wirelab_server_info"]).labels(protocol, concurrency, fanout).set(1)
        # The payload budget (wirelab.core.admission): 0 capacity until report_budget is called,
        # which is also what the knob's 0 (admission off) reads as.
        budget_capacity = cast(Gauge, made["wirelab_server_payload_budget_bytes"])
        budget_in_use = cast(Gauge, made["wirelab_server_payload_in_flight_bytes"])
        self._budget_capacity = budget_capacity.labels(protocol)
        self._budget_in_use = budget_in_use.labels(protocol)
        self._budget: PayloadBudget | None = None
        self._bound: dict[str, KindInstruments] = {}
        flush_first.metrics = self
        self._preinitialise()

    def _preinitialise(self) -> None:
        # Zero-valued series for the known label values the contract names, so panels and error
        # ratios show 0 instead of "no data" before the first call of a kind.
        p = self.protocol
        for metric in self.instruments:
            each = SERVER[metric._name].preinitialise
            for kind in KINDS_BY_PROTOCOL[p]:
                if each == "kind" or (each == "stream_kind" and kind in STREAM_KINDS):
                    metric.labels(p, kind)
                elif each == "kind_outcome":
                    for outcome, code in CANONICAL_CODES[p].items():
                        labels = (p, kind, outcome, code)
                        metric.labels(*labels[: len(metric._labelnames)])

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
        with exactly one :attr:`enqueue`d Record. :meth:`start` wraps both in a Call object."""
        return self.enter(self.bound(kind))

    def enter(self, bound: KindInstruments) -> KindInstruments:
        """:meth:`begin` for instruments already resolved by :meth:`bound`."""
        starts = self._starts
        starts.append(bound)
        if len(starts) >= FLUSH_EVERY:
            self.flush()
        return bound

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


# One finished call: its kind's instruments, outcome, raw code, duration, time to first message
# (None unless a stream sent one), bytes in, bytes out, messages in, messages out. A tuple type,
# not a NamedTuple or slotted class: mypy checks every place that builds one, and building one
# costs what a tuple costs. A NamedTuple's Python-level __new__ measured 0.45 us a build against
# 0.14 us for the tuple (timeit, best of 7 x 300,000 builds on this machine), 0.3 us more per
# call on paths tuned call by call against the observer-effect benchmark. Either is freed by the
# extend that queues its items, so neither feeds the garbage collector (see ServerMetrics).
Record = tuple["KindInstruments", str, str, float, float | None, int, int, int, int]
RECORD_FIELDS = len(get_args(Record))


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


def _instrument(family: Family, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
    if family.type == "counter":
        return Counter(family.name, family.help, family.labels, registry=registry)
    if family.type == "gauge":
        return Gauge(family.name, family.help, family.labels, registry=registry)
    return Histogram(
        family.name, family.help, family.labels, buckets=family.buckets, registry=registry
    )


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
        self.duration = metrics.duration.labels(p, kind)
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
        field of Record."""
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
        _observe_many(self.duration, durations)
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

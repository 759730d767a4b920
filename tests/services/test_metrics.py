"""The batched recording in wirelab.metrics gives exactly what per-call recording would, and the
measurement path stays small."""

from __future__ import annotations

import gc
import random
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram
from wirelab import metrics
from wirelab.contract import DURATION_BUCKETS
from wirelab.core import PayloadBudget
from wirelab.metrics import ServerMetrics

from tests.services.conftest import requests, value


def test_buckets_count_as_the_librarys_histogram_observes() -> None:
    registry = CollectorRegistry()
    one = Histogram("one", "h", buckets=DURATION_BUCKETS, registry=registry)
    rng = random.Random(7)
    # Values on, between and beyond the bucket bounds, including +Inf territory.
    values = [*DURATION_BUCKETS, 0.0, 1e6, *(rng.uniform(0, 400) ** 2 / 1e3 for _ in range(500))]
    for v in values:
        one.observe(v)
    many = metrics.Buckets(DURATION_BUCKETS)
    many.observe(values[:300])
    many.observe(values[300:])
    library = [
        (s.labels["le"], s.value)
        for s in next(iter(one.collect())).samples
        if s.name.endswith("_bucket")
    ]
    assert many.buckets() == library
    assert many.sum == pytest.approx(sum(values))


def test_queued_calls_are_visible_at_every_collection() -> None:
    registry = CollectorRegistry()
    m = ServerMetrics("grpc", registry, "aio")
    open_call = m.start("bidi")
    for i in range(10):
        call = m.start("unary")
        call.received(10)
        call.sent(20 + i)
        call.finish("ok", "OK")
    labels = {"protocol": "grpc", "kind": "unary"}
    assert requests(registry, "grpc", "unary", "ok", "OK") == 10
    assert value(registry, "wirelab_server_response_bytes_sum", **labels) == sum(range(20, 30))
    assert value(registry, "wirelab_server_requests_in_flight", protocol="grpc", kind="bidi") == 1
    open_call.sent(5)
    open_call.finish("cancelled", "CANCELLED")
    open_call.finish("ok", "OK")  # ignored: a call is recorded once
    assert value(registry, "wirelab_server_requests_in_flight", protocol="grpc", kind="bidi") == 0
    first = "wirelab_server_time_to_first_message_seconds_count"
    assert value(registry, first, protocol="grpc", kind="bidi") == 1
    assert requests(registry, "grpc", "bidi", "cancelled", "CANCELLED") == 1


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_payload_budget_is_reported_as_it_is_at_each_collection(protocol: str) -> None:
    registry = CollectorRegistry()
    m = ServerMetrics(protocol, registry, "async")
    capacity = "wirelab_server_payload_budget_bytes"
    in_use = "wirelab_server_payload_in_flight_bytes"
    # Present before any budget is reported: 0 capacity reads as "no admission control".
    assert registry.get_sample_value(capacity, {"protocol": protocol}) == 0
    budget = PayloadBudget(1000)
    m.budget = budget
    assert value(registry, capacity, protocol=protocol) == 1000
    budget.acquire(600)
    assert value(registry, in_use, protocol=protocol) == 600
    budget.release(600)
    assert value(registry, in_use, protocol=protocol) == 0


def test_many_threads_lose_no_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "FLUSH_EVERY", 64)  # flushes happen while others append
    registry = CollectorRegistry()
    m = ServerMetrics("rest", registry, "sync")
    per_thread = 40 * metrics.FLUSH_EVERY

    def work() -> None:
        for _ in range(per_thread):
            m.start("download").finish("ok", "200")

    threads = [threading.Thread(target=work) for _ in range(4)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # hand the GIL over often, mid-flush too
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(switch)
    assert requests(registry, "rest", "download", "ok", "200") == 4 * per_thread
    assert (
        value(registry, "wirelab_server_requests_in_flight", protocol="rest", kind="download") == 0
    )


def test_a_flush_keeps_what_is_appended_while_it_takes_the_queue() -> None:
    class AppendsWhileSliced(list[object]):
        # Another thread's record landing between flush's slice and its deletion.
        def __getitem__(self, key: Any) -> Any:
            taken = super().__getitem__(key)
            self.append("late")
            return taken

    queue = AppendsWhileSliced(["a", "b"])
    assert metrics._take(queue) == ["a", "b"]
    assert queue == ["late"]


def test_queued_records_are_not_tracked_by_the_garbage_collector() -> None:
    registry = CollectorRegistry()
    m = ServerMetrics("grpc", registry, "aio")
    m.start("unary").finish("ok", "OK")
    gc.collect()
    tracked = len(gc.get_objects())
    for i in range(2000):
        call = m.start("unary")
        call.received(10)
        call.sent(i)
        call.finish("ok", "OK")
    assert len(gc.get_objects()) - tracked < 100
    assert requests(registry, "grpc", "unary", "ok", "OK") == 2001


REPO = Path(__file__).resolve().parents[2]
# Everything that records the server metrics on a call's path and exposes them: a module split
# off one of these, or added beside them, joins the list.
MEASUREMENT_PATH = (
    "services/wirelab/metrics.py",
    "services/wirelab/exposition.py",
    "services/wirelab/rest/middleware.py",
    "services/wirelab/rpc/measure.py",
    "services/wirelab/rpc/measure_aio.py",
    "services/wirelab/rpc/measure_sync.py",
)
# A ceiling that only comes down, as the path gets smaller: the goal is 1,000 lines.
MEASUREMENT_PATH_LINES = 1168


def test_the_measurement_path_stays_within_its_lines() -> None:
    measured = {
        p.relative_to(REPO).as_posix() for p in REPO.glob("services/wirelab/rpc/measure*.py")
    }
    assert measured <= set(MEASUREMENT_PATH), measured - set(MEASUREMENT_PATH)
    lines = {path: (REPO / path).read_bytes().count(b"\n") for path in MEASUREMENT_PATH}  # wc -l
    total = sum(lines.values())
    each = ", ".join(f"{path} {count}" for path, count in lines.items())
    assert total <= MEASUREMENT_PATH_LINES, (
        f"the measurement path is {total} lines, over {MEASUREMENT_PATH_LINES}: {each}"
    )

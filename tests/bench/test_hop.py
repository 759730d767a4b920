"""The hop benchmark's arithmetic: arm order, paired differences, CPU per call, vegeta's report,
and the guard that refuses an arm that did not get the offered load."""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter
from collections.abc import Callable

import psutil
import pytest
from wirelab_bench.loadtools import Load
from wirelab_bench.perf import hop
from wirelab_bench.perf.hopstats import (
    ARMS,
    BARE,
    DIRECT,
    NGINX,
    WIRELAB,
    ArmRun,
    Round,
    added,
    arm_order,
    p50,
    relay_cpu,
)
from wirelab_bench.perf.vegeta import parse_vegeta
from wirelab_bench.svcprocs import Service


def _run(p50_ms: float, relay_cpu_s: float = 0.0, ok: int = 100) -> ArmRun:
    return ArmRun(Load(1.0, Counter({"200": ok}), p50_ms, 2 * p50_ms), relay_cpu_s, 0.1)


def test_every_arm_runs_in_every_position_and_after_every_other_arm_equally_often() -> None:
    n = len(ARMS)
    for start in (0, 7):
        orders = [arm_order(r) for r in range(start, start + n)]
        for position in range(n):
            assert Counter(o[position] for o in orders) == dict.fromkeys(ARMS, 1)
        assert all(sorted(o) == sorted(ARMS) for o in orders)
        assert all(a != b for a, b in itertools.pairwise(orders))
        follows = Counter(pair for o in orders for pair in itertools.pairwise(o))
        assert set(follows.values()) == {1} and len(follows) == n * (n - 1)


def test_added_pairs_each_round_with_its_own_direct_run() -> None:
    # The rounds' own differences are 1, 1 and 5: median 1. Differencing the arms' medians
    # instead (10 - 6) would say 4.
    rounds: list[Round] = [
        {DIRECT: _run(1.0), WIRELAB: _run(2.0), BARE: _run(1.5)},
        {DIRECT: _run(9.0), WIRELAB: _run(10.0), BARE: _run(9.5)},
        {DIRECT: _run(6.0), WIRELAB: _run(11.0), BARE: _run(6.5)},
    ]
    got = added(rounds, WIRELAB, DIRECT, p50)
    assert (got.median, got.low, got.high) == (1.0, 1.0, 5.0)
    assert added(rounds, WIRELAB, BARE, p50).median == 0.5


def test_relay_cpu_is_per_completed_call_in_milliseconds() -> None:
    assert relay_cpu(_run(1.0, relay_cpu_s=0.3, ok=300)) == pytest.approx(1.0)
    rounds: list[Round] = [{DIRECT: _run(1.0), WIRELAB: _run(2.0, 0.25, 100)}]
    assert added(rounds, WIRELAB, DIRECT, relay_cpu).median == pytest.approx(2.5)


def test_parse_vegeta_reads_statuses_and_nanosecond_latencies() -> None:
    report = {
        "latencies": {"50th": 1_250_000, "99th": 12_000_000, "max": 20_000_000},
        "requests": 300,
        "status_codes": {"200": 297, "0": 2, "503": 1},
        "errors": ["connection refused"],
    }
    load = parse_vegeta(report, 3.0)
    assert (load.p50_ms, load.p99_ms) == (1.25, 12.0)
    assert load.ok == 297
    assert load.errors == {"0": 2, "503": 1}


def _procs() -> dict[str, Service]:
    me = psutil.Process(os.getpid())
    return {arm: Service("rest", f"http://127.0.0.1:1/{arm}", me, "") for arm in ARMS}


def _offer(codes: dict[str, int]) -> Callable[[str, int], Load]:
    return lambda address, seconds: Load(seconds, Counter(codes), 1.0, 2.0)


def test_an_arm_that_kept_the_rate_is_measured() -> None:
    run = hop.run_arm(_offer({"200": 299}), _procs(), WIRELAB, 3, 100)
    assert run.load.ok == 299
    assert run.relay_cpu >= 0


@pytest.mark.parametrize(
    ("codes", "why"),
    [({"200": 280}, "280 calls of the 300 offered"), ({"200": 299, "503": 1}, "calls failed")],
)
def test_an_arm_short_of_the_offered_load_or_with_errors_is_refused(
    codes: dict[str, int], why: str
) -> None:
    with pytest.raises(RuntimeError, match=why):
        hop.run_arm(_offer(codes), _procs(), BARE, 3, 100)


@pytest.mark.integration
@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_every_relay_answers_as_b_does_and_nginx_counts_its_worker(protocol: str) -> None:
    """The benchmark's process set on loopback: B, wirelab's relay, the bare relay and nginx as
    the cluster's load balancer, each answering B's reply (process_set checks it)."""
    with hop.process_set(protocol, "on") as procs:
        assert set(procs) == set(ARMS)
        nginx = procs[NGINX]
        before = nginx.cpu_seconds()
        # The master only waits; the calls cost its worker, a child. CPU time moves in clock
        # ticks (10 ms), which 50 small calls may not fill: calls go on until one is counted,
        # for at most 10 s.
        deadline = time.monotonic() + 10
        while nginx.cpu_seconds() <= before and time.monotonic() < deadline:
            for _ in range(50):
                hop.answer(protocol, nginx.address)
        assert nginx.process.children() and nginx.cpu_seconds() > before

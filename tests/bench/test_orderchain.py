"""The order-chain benchmark's parts (wirelab_perf.orderchain): the generator's closed-loop
figures, the arms' rotation, CPU per order above idle from cAdvisor's stamped samples."""

from __future__ import annotations

import math
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from wirelab.hops.confirm import confirmation
from wirelab_bench.loadgen import ClosedRun, closed_figures
from wirelab_bench.promql import SERVICE_LABEL
from wirelab_bench.scrape import parse
from wirelab_perf import confirmations, orderchain
from wirelab_perf.orderchain import Cpu, CpuSample, per_order, rotation, services


def summary(answered: int, failed: int, late: int) -> dict[str, Any]:
    """The parts of wirelab-loadgen's summary JSON that a closed run's figures read (10 s)."""
    return {
        "mode": "closed",
        "seconds": 10.0,
        "answered": answered,
        "failed": failed,
        "late": late,
        "latency_ms": {"mean": 450, "p50": 420, "p95": 610, "p99": 880, "max": 1200},
    }


def test_confirmed_orders_are_those_answered_in_time_without_error() -> None:
    run = closed_figures(summary(1000, failed=20, late=30), 100)
    assert run == ClosedRun(100, 100.0, 95.0, 420, 610, 880, failed=50, late=30)
    on_time = closed_figures(summary(1000, failed=0, late=0), 10)
    assert (on_time.confirmed_per_s, on_time.failed, on_time.late) == (100.0, 0, 0)
    with pytest.raises(KeyError):  # always written: a missing count is not read as none
        closed_figures({k: v for k, v in summary(10, 0, 0).items() if k != "late"}, 1)


def test_each_arm_leads_one_load_in_three() -> None:
    arms = orderchain.ARMS
    orders = [rotation(arms, i) for i in range(3)]
    assert {tuple(o) for o in orders} == {("rest", "grpc", "amqp"), ("grpc", "amqp", "rest"),
                                          ("amqp", "rest", "grpc")}  # fmt: skip
    assert sorted(o[0] for o in orders) == sorted(arms)
    assert services("amqp") == ("amqp", "amqp-product", "amqp-customer", "amqp-shipping")


def _sample(seconds: float, at: float) -> CpuSample:
    return CpuSample({"amqp": {"/docker/a": seconds}}, {"amqp": at})


def test_a_runs_cpu_is_the_increase_over_its_window_less_the_idle_rate() -> None:
    cpu = Cpu("http://prometheus", ["amqp"])
    cpu.idle = {"amqp": 0.05}  # cores
    # 40 s between cAdvisor's stamps, 12 CPU seconds: 2 of them idle.
    assert cpu.used(_sample(100.0, 1000.0), _sample(112.0, 1040.0), "amqp") == pytest.approx(10.0)
    run = ClosedRun(10, 25.0, 20.0, 400, 410, 420, 100, 0)
    assert per_order(10.0, run, 30) == pytest.approx(1000 * 10 / 600)
    assert math.isnan(per_order(1.0, ClosedRun(10, 0, 0, 0, 0, 0, 0, 0), 30))


def test_a_container_recreated_mid_run_counts_its_own_cpu_not_the_old_ones_loss() -> None:
    """cAdvisor drops a removed container's counter: the service's sum falls (20 -> 3 s here)
    though the new container spent 3 s and the old one 2 s more before it went."""
    cpu = Cpu("http://prometheus", ["amqp"])
    first = CpuSample({"amqp": {"/docker/old": 18.0}}, {"amqp": 1000.0})
    middle = CpuSample({"amqp": {"/docker/old": 20.0}}, {"amqp": 1010.0})
    last = CpuSample({"amqp": {"/docker/new": 3.0}}, {"amqp": 1040.0})
    assert cpu.used(first, last, "amqp") == pytest.approx(3.0)  # the old one's 2 s went with it
    assert cpu.used(first, middle, "amqp") == pytest.approx(2.0)
    # Two replicas of one service: each one's increase, summed.
    two = CpuSample({"amqp": {"/docker/a": 5.0, "/docker/b": 7.0}}, {"amqp": 1000.0})
    later = CpuSample({"amqp": {"/docker/a": 6.0, "/docker/b": 9.5}}, {"amqp": 1010.0})
    assert cpu.used(two, later, "amqp") == pytest.approx(3.5)


def test_a_sample_reads_each_containers_counter_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = Cpu("http://prometheus", ["amqp"])
    queries: list[str] = []

    def answer(expr: str) -> list[tuple[dict[str, str], float]]:
        queries.append(expr)
        if expr.startswith("max by"):
            return [({SERVICE_LABEL: "amqp"}, 1000.0)]
        return [
            ({SERVICE_LABEL: "amqp", "id": c}, s)
            for c, s in (("/docker/a", 1.0), ("/docker/b", 2.0))
        ]

    monkeypatch.setattr(cpu, "_query", answer)
    assert cpu.sample() == CpuSample(
        {"amqp": {"/docker/a": 1.0, "/docker/b": 2.0}}, {"amqp": 1000.0}
    )
    assert queries[0].startswith(f"sum by ({SERVICE_LABEL}, id) (")
    monkeypatch.setattr(cpu, "_query", lambda expr: [])
    with pytest.raises(RuntimeError, match="no CPU for"):
        cpu.sample()


def test_idle_and_fresh_samples_follow_cadvisors_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """measure_idle waits for a sample stamped after its window; after() for one past a run."""
    stamps = iter([(10.0, 1000.0), (10.0, 1000.0), (11.0, 1020.0), (11.0, 1020.0), (13.0, 1030.0)])
    cpu = Cpu("http://prometheus", ["amqp"])
    monkeypatch.setattr(cpu, "sample", lambda: _sample(*next(stamps)))
    monkeypatch.setattr("wirelab_perf.orderchain.time.sleep", lambda _: None)
    cpu.measure_idle(10)  # first at 1000; 1000 is not past 1005, 1020 is
    assert cpu.idle == {"amqp": pytest.approx(0.05)}
    assert cpu.after(1025.0) == _sample(13.0, 1030.0)


def test_the_command_refuses_loads_it_cannot_run(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("10,x", "0,10"):
        with pytest.raises(SystemExit):
            orderchain.main(["--loads", bad])
    assert "--loads must be" in capsys.readouterr().err


def _confirmation_page(times: list[float]) -> str:
    """An edge's /metrics with the fire-and-forget histogram after confirmations of ``times``."""
    registry = CollectorRegistry()
    histogram = confirmation(registry)
    for t in times:
        histogram.observe(t)
    return generate_latest(registry).decode()


def test_confirmations_over_a_run_are_the_histograms_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    later = [0.45] * 5 + [0.5] * 8 + [1.2] * 2
    pages = iter([_confirmation_page([0.45] * 5), _confirmation_page(later)])
    monkeypatch.setattr(confirmations, "scrape", lambda url, job: parse(next(pages), job))
    before, after = confirmations.read("u"), confirmations.read("u")
    got = confirmations.between(before, after, threshold_ms=900)
    assert got.confirmed == 10 and got.over_bound == 2 and got.bound_ms == 1000
    assert 300 < got.p50_ms <= 500 and 1000 < got.p99_ms <= 1500
    assert confirmations.between(after, after, 900) == confirmations.NONE
    assert confirmations.between([], [], 900) == confirmations.NONE


def test_an_edge_without_the_histogram_or_an_answer_reads_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(confirmations, "scrape", lambda url, job: parse("", job))
    assert confirmations.read("u") == []
    monkeypatch.undo()
    assert confirmations.read("http://127.0.0.1:9/metrics") == []  # nothing listens there


def test_the_arms_knob_refuses_an_unknown_arm(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        orderchain.main(["--arms", "grpc,soap"])
    assert "--arms must be some of rest, grpc, amqp" in capsys.readouterr().err

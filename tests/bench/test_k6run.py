"""k6 runs as figures (wirelab_bench.k6run) and the open-loop sweep's knee (perf.openloop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wirelab_bench.k6run import CLIENT_CPU_KEY, SCRIPT, K6Run, figures, ticks_for
from wirelab_bench.perf.openloop import knee, main, plot


def summary(
    duration: str, count: int, dropped: int | None = None, fails: int = 0
) -> dict[str, Any]:
    """The parts of k6's --summary-export JSON that k6run reads, as k6 1.8 writes them (a run
    with nothing dropped has no dropped_iterations at all)."""
    metrics: dict[str, Any] = {
        duration: {"avg": 1.5, "med": 1.25, "p(99)": 4.75, "count": count},
        "checks": {"passes": count - fails, "fails": fails, "value": 1},
        "iterations": {"count": count, "rate": count / 10},
    }
    if dropped is not None:
        metrics["dropped_iterations"] = {"count": dropped, "rate": dropped / 10}
    return {"metrics": metrics}


def test_each_protocol_reads_its_own_duration_trend() -> None:
    rest = figures(summary("http_req_duration", 2000), "rest", 200, 10)
    assert (rest.answered_per_s, rest.median_ms, rest.p99_ms, rest.mean_ms) == (
        200,
        1.25,
        4.75,
        1.5,
    )
    assert (rest.dropped, rest.failed, rest.on_time) == (0, 0, True)
    grpc = figures(summary("grpc_req_duration", 1500, dropped=500, fails=3), "grpc", 200, 10)
    assert (grpc.answered_per_s, grpc.dropped, grpc.failed, grpc.on_time) == (150, 500, 3, False)
    with pytest.raises(KeyError):
        figures(summary("http_req_duration", 10), "grpc", 1, 10)


def run(offered: float, answered: float, dropped: int = 0, p99: float = 1.0) -> K6Run:
    return K6Run(offered, answered, 1.0, 1.0, p99, dropped, 0)


def test_the_knee_is_the_last_rate_served_on_time_before_the_first_that_was_not() -> None:
    series = [run(250, 250), run(500, 499), run(1000, 990), run(1500, 1200), run(2000, 2000)]
    assert knee(series) == series[2]  # 1500 fell short; 2000 after it does not count
    assert knee([run(250, 250, dropped=1), run(500, 500)]) is None  # a late start is a miss
    assert knee([run(250, 250), run(500, 500)]) == run(500, 500)


def test_the_sweep_refuses_rates_out_of_order(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--rates", "500,250"])
    assert "--rates must be positive and ascending" in capsys.readouterr().err


def test_the_script_is_open_loop_with_a_bounded_pool() -> None:
    text = SCRIPT.read_text()
    assert 'executor: "constant-arrival-rate"' in text
    assert "preAllocatedVUs: vus" in text and "maxVUs: vus" in text


def test_the_sweep_draws_both_protocols_with_their_knees(tmp_path: Path) -> None:
    series = [run(250, 250, p99=2.0), run(500, 500, p99=3.0), run(1000, 700, dropped=9, p99=40.0)]
    path = tmp_path / "openloop.png"
    plot({("rest", "constant"): series, ("grpc", "poisson"): series[:2]}, path)
    assert path.stat().st_size > 10_000


def test_poisson_arrivals_tick_finer_and_send_on_a_share_of_the_ticks() -> None:
    assert ticks_for("constant", 500, 8) == {"WIRELAB_RATE": "500"}
    assert ticks_for("poisson", 500, 8) == {"WIRELAB_RATE": "4000", "WIRELAB_FIRE": "0.125"}
    with pytest.raises(ValueError):
        ticks_for("poisson", 500, 1)  # one tick per call is constant arrivals
    with pytest.raises(ValueError):
        ticks_for("bursty", 500, 8)
    text = SCRIPT.read_text()
    assert "Math.random() >= fire) return;" in text


def test_a_poisson_runs_dropped_ticks_count_as_the_calls_they_would_have_sent() -> None:
    # 8 ticks a call: 81 dropped ticks held 81/8 calls on average; rounded up, never hidden.
    got = figures(summary("http_req_duration", 900, dropped=81), "rest", 100, 10, ticks_per_call=8)
    assert (got.offered_per_s, got.answered_per_s, got.dropped, got.on_time) == (100, 90, 11, False)
    assert figures(summary("http_req_duration", 1000, dropped=0), "rest", 100, 10, 8).on_time


@pytest.mark.parametrize("argv", [["--arrivals", "bursty"], ["--arrivals", ""],
                                  ["--ticks-per-call", "1", "--arrivals", "poisson"]])  # fmt: skip
def test_the_sweep_refuses_unknown_arrivals(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2


def test_k6s_own_cpu_is_read_per_second_of_the_run() -> None:
    """A generator near one core per second set the pace itself: the sweep prints it."""
    busy = {**summary("grpc_req_duration", 100), CLIENT_CPU_KEY: 9.5}
    assert figures(busy, "grpc", 10, 10).client_cpu == 0.95
    assert figures(summary("grpc_req_duration", 100), "grpc", 10, 10).client_cpu == 0.0

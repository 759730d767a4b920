"""wirelab-loadgen runs as figures (wirelab_bench.loadgen); the open-loop sweep (perf.openloop)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from wirelab_bench.load import Target, loadgen_command, locust_command
from wirelab_bench.loadgen import (
    BINARY,
    CONTRACT,
    PROTO_ROOT,
    ClosedRun,
    OpenRun,
    closed_figures,
    knee,
    open_figures,
    run_closed,
    run_open,
)
from wirelab_bench.scenario_file import load_scenario
from wirelab_locust.content import order
from wirelab_perf import crosscheck, openloop, orderchain
from wirelab_perf.openloop import main, plot

BODY = {"order": {"order_id": "o-1"}, "work_ms": 0}


def summary(**changes: Any) -> dict[str, Any]:
    """The generator's summary JSON of a 10 s open run at 200 calls/s, with ``changes``."""
    return {
        "protocol": "rest",
        "mode": "open",
        "arrivals": "constant",
        "offered_per_s": 200.0,
        "seconds": 10.0,
        "workers": 10,
        "scheduled": 2000,
        "started": 2000,
        "dropped": 0,
        "answered": 2000,
        "failed": 0,
        "late": 0,
        "latency_ms": {"mean": 1.5, "p50": 1.25, "p95": 3.0, "p99": 4.75, "max": 9.0},
        "start_lag_ms": {"p50": 0.05, "p99": 0.4, "max": 1.2},
        "cpu_seconds": 1.9,
        **changes,
    }


def test_an_open_runs_figures_come_from_its_summary() -> None:
    assert open_figures(summary(cpu_seconds=2.5)) == OpenRun(
        offered_per_s=200.0,
        answered_per_s=200.0,
        median_ms=1.25,
        mean_ms=1.5,
        p99_ms=4.75,
        dropped=0,
        failed=0,
        client_cpu=0.25,
        start_lag_p99_ms=0.4,
        answered=2000,
    )
    short = open_figures(summary(started=1500, dropped=500, answered=1500, failed=3))
    assert (short.answered_per_s, short.dropped, short.failed) == (150.0, 500, 3)


def test_a_run_is_on_time_when_nothing_dropped_and_nearly_all_answered() -> None:
    assert open_figures(summary()).on_time
    assert open_figures(summary(answered=1900)).on_time  # 95 % of the offered rate
    assert not open_figures(summary(answered=1899)).on_time
    assert not open_figures(summary(dropped=1)).on_time  # a call never started is a miss


def test_a_closed_runs_confirmed_orders_are_those_answered_in_time_without_error() -> None:
    closed = summary(mode="closed", offered_per_s=0.0, answered=1000, failed=20, late=30)
    assert closed_figures(closed, 100) == ClosedRun(
        users=100,
        answered_per_s=100.0,
        confirmed_per_s=95.0,
        p50_ms=1.25,
        p95_ms=3.0,
        p99_ms=4.75,
        failed=50,
        late=30,
    )


def test_the_generators_own_cpu_is_read_per_second_of_the_run() -> None:
    """A generator near one core per second set the pace itself: the sweep prints it."""
    assert open_figures(summary(cpu_seconds=9.5)).client_cpu == pytest.approx(0.95)
    assert open_figures(summary(cpu_seconds=0.0)).client_cpu == 0.0


Run = Callable[..., subprocess.CompletedProcess[str]]


def capture(calls: list[list[str]], written: dict[str, Any]) -> Run:
    """A stand-in for subprocess.run that records argv and writes ``written`` as the summary."""

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        Path(argv[argv.index("-summary") + 1]).write_text(json.dumps(written))
        return subprocess.CompletedProcess(argv, 0, "", "")

    return run


def test_an_open_run_passes_its_schedule_and_the_proto_to_the_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr("wirelab_bench.loadgen.subprocess.run", capture(calls, summary()))
    run = run_open("/bin/lg", "grpc", "127.0.0.1:50051", BODY, 1500, 64, 10, cpu=1,
                   arrivals="poisson", seed=7)  # fmt: skip
    assert run == open_figures(summary())
    (argv,) = calls
    assert argv[:-1] == [
        "taskset", "--cpu-list", "1", "/bin/lg",
        "-protocol", "grpc", "-target", "127.0.0.1:50051", "-body", json.dumps(BODY),
        "-contract", str(CONTRACT), "-proto", str(PROTO_ROOT),
        "-mode", "open", "-arrivals", "poisson", "-rate", "1500", "-seed", "7",
        "-fail-over-ms", "0", "-workers", "64", "-seconds", "10", "-summary",
    ]  # fmt: skip
    assert (PROTO_ROOT / "wirelab" / "v1" / "wirelab.proto").is_file() and CONTRACT.is_file()


def test_a_closed_rest_run_has_no_schedule_proto_or_pinning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[list[str]] = []
    done = summary(mode="closed", offered_per_s=0.0, answered=300, late=30)
    monkeypatch.setattr("wirelab_bench.loadgen.subprocess.run", capture(calls, done))
    run = run_closed(BINARY, "rest", "http://127.0.0.1:8000", BODY, 100, 30, 900)
    assert (run.users, run.late, run.failed) == (100, 30, 30)
    (argv,) = calls
    assert argv[:-1] == [
        str(BINARY),
        "-protocol", "rest", "-target", "http://127.0.0.1:8000", "-body", json.dumps(BODY),
        "-contract", str(CONTRACT),
        "-mode", "closed", "-fail-over-ms", "900", "-workers", "100", "-seconds", "30",
        "-summary",
    ]  # fmt: skip


def test_a_failed_run_raises_with_the_generators_message(tmp_path: Path) -> None:
    binary = tmp_path / "wirelab-loadgen"
    binary.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "sys.stderr.write('x' * 3000 + 'dial tcp 127.0.0.1:9: connection refused')\nsys.exit(3)\n"
    )
    binary.chmod(0o755)
    with pytest.raises(RuntimeError, match=r"failed \(3\):\nx+dial tcp .* refused$") as raised:
        run_open(binary, "rest", "http://127.0.0.1:9", BODY, 10, 1, 1)
    assert len(str(raised.value)) < 2100  # the tail of stderr only


def test_a_run_reads_the_summary_the_generator_wrote(tmp_path: Path) -> None:
    binary = tmp_path / "wirelab-loadgen"
    binary.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"open(sys.argv[sys.argv.index('-summary') + 1], 'w').write({json.dumps(summary())!r})\n"
    )
    binary.chmod(0o755)
    assert run_open(binary, "rest", "http://127.0.0.1:9", BODY, 200, 10, 10) == open_figures(
        summary()
    )


@pytest.mark.parametrize(
    ("command", "argv"),
    [(openloop.main, []), (orderchain.main, []), (crosscheck.main, ["--ghz", sys.executable])],
)
def test_each_command_stops_without_the_generator(
    command: Callable[[list[str]], int],
    argv: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert command([*argv, "--loadgen", str(tmp_path / "none")]) == 2
    out = capsys.readouterr().out
    assert str(tmp_path / "none") in out and "make tools" in out


def run(offered: float, answered: float, dropped: int = 0, p99: float = 1.0) -> OpenRun:
    return OpenRun(offered, answered, 1.0, 1.0, p99, dropped, 0)


def test_the_knee_is_the_last_rate_served_on_time_before_the_first_that_was_not() -> None:
    series = [run(250, 250), run(500, 499), run(1000, 990), run(1500, 1200), run(2000, 2000)]
    assert knee(series) == series[2]  # 1500 fell short; 2000 after it does not count
    assert knee([run(250, 250, dropped=1), run(500, 500)]) is None  # a late start is a miss
    assert knee([run(250, 250), run(500, 500)]) == run(500, 500)


def test_the_sweep_refuses_rates_out_of_order(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--rates", "500,250"])
    assert "--rates must be positive and ascending" in capsys.readouterr().err


def test_the_sweep_draws_both_protocols_with_their_knees(tmp_path: Path) -> None:
    series = [run(250, 250, p99=2.0), run(500, 500, p99=3.0), run(1000, 700, dropped=9, p99=40.0)]
    path = tmp_path / "openloop.png"
    plot({("rest", "constant"): series, ("grpc", "poisson"): series[:2]}, path)
    assert path.stat().st_size > 10_000


@pytest.mark.parametrize(
    "argv", [["--arrivals", "bursty"], ["--arrivals", ""], ["--arrivals", "constant,bursty"]]
)
def test_the_sweep_refuses_unknown_arrivals(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "--arrivals from constant, poisson" in capsys.readouterr().err


def test_the_runner_drives_a_loadgen_cell_as_a_locust_child_closed_or_at_its_rate(
    tmp_path: Path,
) -> None:
    """A group with generator = "loadgen": Locust's order and work, the load's users as
    workers, the cell's metrics port and threshold, a closed loop or an open one at the rate."""
    text = (
        'kinds = ["unary"]\ngenerator = "loadgen"\nwork_ms = 3\nfailure_threshold_ms = 900\n'
        "warmup_s = 2\nduration_s = 5\nloads = [{users = 4}, {users = 8, rate = 400}]\n"
    )
    path = tmp_path / "g.toml"
    path.write_text(text)
    closed, paced = (c for c in load_scenario(path).cells() if c.protocol == "grpc")
    target = Target("http://127.0.0.1:8000", "127.0.0.1:50051", Path("lf.py"), 9646)
    argv = loadgen_command(closed, target, "/bin/lg", tmp_path / "s.json")
    assert argv[:4] == ["/bin/lg", "-protocol", "grpc", "-target"] and argv[4] == "127.0.0.1:50051"
    body = json.loads(argv[argv.index("-body") + 1])
    assert body == {"order": order(0, 16), "work_ms": 3, "count_words": False}
    flags = dict(zip(argv[5::2], argv[6::2], strict=False))
    assert flags["-mode"] == "closed" and flags["-workers"] == "4" and "-rate" not in flags
    assert "-window-from" not in flags and "-window-to" not in flags
    assert flags["-metrics-addr"] == "127.0.0.1:9646" and flags["-fail-over-ms"] == "900"
    assert flags["-seconds"] == "67" and flags["-summary"] == str(tmp_path / "s.json")
    argv = loadgen_command(paced, target, "/bin/lg", tmp_path / "s.json")
    flags = dict(zip(argv[5::2], argv[6::2], strict=False))
    assert (flags["-mode"], flags["-rate"], flags["-workers"]) == ("open", "400", "8")
    assert (flags["-arrivals"], flags["-seed"]) == ("constant", "1")
    # The schedule's own figures for the measured window: after the warm-up, for its length.
    assert (flags["-window-from"], flags["-window-to"]) == ("2", "7")
    rest = next(c for c in load_scenario(path).cells() if c.protocol == "rest")
    assert loadgen_command(rest, target, "/bin/lg", tmp_path / "s.json")[4] == target.rest_url


@pytest.mark.parametrize("generator", ["loadgen", "locust"])
def test_a_groups_rest_http_reaches_its_rest_cells_only(tmp_path: Path, generator: str) -> None:
    path = tmp_path / "h.toml"
    path.write_text(
        f'kinds = ["unary"]\ngenerator = "{generator}"\nrest_http = "h2c"\n'
        "loads = [{users = 1}]\n"
    )
    cells = {c.protocol: c for c in load_scenario(path).cells()}
    suffix = "_loadgen" if generator == "loadgen" else ""
    assert cells["rest"].cell_id.endswith(f"_0b_h2c{suffix}_r0")
    assert "h2c" not in cells["grpc"].cell_id
    target = Target("http://127.0.0.1:8000", "127.0.0.1:50051", Path("lf.py"), 9646)

    def argv(protocol: str) -> list[str]:
        if generator == "loadgen":
            return loadgen_command(cells[protocol], target, "/bin/lg", tmp_path / "s.json")
        return locust_command(cells[protocol], target, tmp_path / "csv")

    flag = "-http" if generator == "loadgen" else "--rest-http"
    rest, grpc = argv("rest"), argv("grpc")
    assert rest[rest.index(flag) + 1] == "h2c" and flag not in grpc

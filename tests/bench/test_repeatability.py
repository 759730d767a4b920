"""Run-to-run repeatability: the spread of each protocol's figures and of gRPC/REST over runs,
from tidy tables, from results folders (`wirelab repeatability`) and from `wirelab bench --runs`."""

from __future__ import annotations

import copy
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from wirelab_bench import cli
from wirelab_bench import repeatability as rep
from wirelab_bench.conclusions import compare_kind
from wirelab_bench.knobs import REPO, Knobs
from wirelab_bench.scenario import Scenario

MANIFEST: dict[str, Any] = {
    "scenario": "smoke",
    "scenario_text": 'description = "synthetic"\n',
    "status": "complete",
    "knobs": {"locust_args": "", "network": ""},
    "git": {"sha": "a" * 40, "dirty": False},
    "host": {"hostname": "vm", "cpu_count": 2, "cpu_model": "AMD EPYC", "kernel": "6.1"},
    "docker": {"images": {"rest": {"image": "wirelab/rest:local", "id": "sha256:r1"}}},
    "servers": {"rest": "async", "grpc": "aio"},
    "topology": {"name": "one-hop", "peers": {}},
}
# Three runs' successful calls/s for unary: REST, gRPC.
UNARY = [(100.0, 60.0), (110.0, 70.0), (90.0, 50.0)]


def row(
    protocol: str, ok: float, kind: str = "unary", rep: int = 0, **extra: Any
) -> dict[str, Any]:
    return {
        "cell_id": f"{rep:03d}_{protocol}_{kind}_low_0b_r{rep}",
        "topology": "one-hop", "network": "direct", "hop_network": "", "generator": "locust",
        "protocol": protocol, "kind": kind, "load": "low", "users": 4, "payload_bytes": 0,
        "repetition": rep, "ok_per_s": ok, "client_p50_ms": 1000.0 / ok, "client_p99_ms": 9.0,
        "error_pct": 0.0, "generator_saturated": False, "gate_reasons": "",
        "wire_bytes_per_request": 100.0, "cpu_s_per_request": math.nan,
    } | extra  # fmt: skip


def runs() -> list[pd.DataFrame]:
    """Three runs: unary on both protocols, download at a steady 0.8, and a server stream
    measured on REST only."""
    return [
        pd.DataFrame(
            [
                *(row("rest", r), row("grpc", g)),
                *(row("rest", 50.0, "download"), row("grpc", 40.0, "download")),
                row("rest", 30.0, "server_stream"),
            ]
        )
        for r, g in UNARY
    ]


def pick(t: pd.DataFrame, kind: str, figure: str, arm: str) -> pd.Series:
    found = t[(t.kind == kind) & (t.figure == figure) & (t.arm == arm)]
    assert len(found) == 1, found
    return found.iloc[0]


def test_each_protocols_spread_is_its_runs_mean_and_coefficient_of_variation() -> None:
    t = rep.table(runs())
    for i, arm in enumerate(("rest", "grpc")):
        values = [run[i] for run in UNARY]
        r = pick(t, "unary", "ok_per_s", arm)
        assert r.runs == 3 and r["mean"] == pytest.approx(statistics.mean(values))
        assert r.cv == pytest.approx(statistics.stdev(values) / statistics.mean(values))
        assert r.low < r["mean"] < r.high
        assert r["values"] == ";".join(f"{v:g}" for v in values)


def test_the_ratio_is_each_runs_own_and_its_spread_is_theirs() -> None:
    t = rep.table(runs())
    ratios = [g / r for r, g in UNARY]
    r = pick(t, "unary", "ok_per_s", rep.RATIO)
    assert r.cv == pytest.approx(statistics.stdev(ratios) / statistics.mean(ratios))
    assert r["mean"] == pytest.approx(statistics.geometric_mean(ratios))
    assert r.low < min(ratios) and r.high > max(ratios)  # three runs: a wide t interval
    assert r.goal == "missed"  # 6.8 % CV
    latency = pick(t, "unary", "client_p50_ms", rep.RATIO)
    assert latency["mean"] == pytest.approx(statistics.geometric_mean([1 / x for x in ratios]))
    steady = pick(t, "download", "ok_per_s", rep.RATIO)
    assert (steady["mean"], steady.cv, steady.goal) == (pytest.approx(0.8), pytest.approx(0), "met")
    # p99 is shown with its spread but is not one of the goal's figures.
    assert pick(t, "download", "client_p99_ms", rep.RATIO).goal == ""


def test_a_kind_on_one_protocol_has_its_spread_and_no_ratio() -> None:
    t = rep.table(runs())
    stream = t[t.kind == "server_stream"]
    assert set(stream.arm) == {"rest"} and set(stream.runs) == {3}


def test_repetitions_inside_a_run_are_averaged_before_runs_are_compared() -> None:
    first = pd.DataFrame(
        [
            *(row("rest", 90.0), row("rest", 110.0, rep=1)),
            row("grpc", 50.0),
            row("grpc", 70.0, rep=1),
        ]
    )
    second = pd.DataFrame([row("rest", 100.0), row("grpc", 60.0)])
    t = rep.table([first, second])
    assert pick(t, "unary", "ok_per_s", "rest")["values"] == "100;100"
    assert pick(t, "unary", "ok_per_s", rep.RATIO)["values"] == "0.6;0.6"


def test_rest_over_h2c_is_an_arm_of_its_own_and_the_ratio_stays_against_http_1_1() -> None:
    t = rep.table(
        [
            pd.DataFrame(
                [
                    *(row("rest", r, rest_http="1.1"), row("rest", 2 * r, rest_http="h2c")),
                    row("grpc", g, rest_http=""),
                ]
            )
            for r, g in UNARY
        ]
    )
    assert set(t.arm) == {"rest", "grpc", "rest-h2c", rep.RATIO}
    assert pick(t, "unary", "ok_per_s", rep.RATIO)["values"] == "0.6;0.636364;0.555556"


def test_a_condition_missing_from_a_run_counts_the_runs_that_have_it() -> None:
    two = runs()
    two[2] = two[2][two[2].kind != "download"]
    t = rep.table(two)
    assert pick(t, "download", "ok_per_s", "grpc").runs == 2
    assert pick(t, "unary", "ok_per_s", "grpc").runs == 3


def test_the_summary_gives_each_ratio_with_both_protocols_spread_and_the_goal() -> None:
    lines = rep.summary(rep.table(runs()))
    unary = next(x for x in lines if x.startswith("unary low: successful calls/s"))
    assert "gRPC/REST 0.596" in unary and "CV 6.8 % over 3 runs" in unary
    assert "(REST 10.0 %, gRPC 16.7 %)" in unary
    assert lines[-1] == "goal, the calls/s and median latency ratios within 5 % CV: met in 2 of 4"


def test_the_summary_gives_each_figures_median_spread_across_conditions() -> None:
    lines = rep.spread_by_figure(rep.table(runs()))
    calls = next(x for x in lines if x.startswith("successful calls/s"))
    # unary's REST 10/100 and gRPC 10/60 (stdev over mean), download's 0 (a steady 50 and 40),
    # server_stream REST only, so no ratio: two ratios, unary's 6.8 % and download's 0.
    assert calls.startswith("successful calls/s, median CV over 2 conditions: ")
    assert "REST 0.0 % (0.0 %-10.0 %), gRPC 8.3 % (0.0 %-16.7 %)" in calls
    assert "gRPC/REST 3.4 % (0.0 %-6.8 %); ratio within 5 %: 1 of 2" in calls
    # A figure no run measured (CPU per call is NaN throughout) gets no line.
    assert not any(x.startswith("server CPU per call") for x in lines)
    assert rep.summary(rep.table(runs()))[-1 - len(lines) : -1] == lines


def _folders(tmp_path: Path, manifests: list[dict[str, Any]] | None = None) -> list[Path]:
    out = []
    for i, tidy in enumerate(runs()):
        folder = tmp_path / f"2026112{i}T000000Z_smoke"
        folder.mkdir()
        manifest = (manifests or [MANIFEST] * 3)[i]
        (folder / "manifest.json").write_text(json.dumps(manifest))
        tidy.to_csv(folder / "tidy.csv", index=False)
        out.append(folder)
    return out


def test_the_command_writes_the_table_into_the_last_folder_and_prints_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folders = _folders(tmp_path)
    assert cli.main(["repeatability", *map(str, folders)]) == 0
    out = capsys.readouterr().out
    assert "unary low: successful calls/s gRPC/REST 0.596" in out
    written = pd.read_csv(folders[-1] / rep.CSV)
    assert len(written) == len(rep.table(runs()))
    # Read back, the empty hop_network is NaN on every row: each ratio still finds its sides.
    again = rep.summary(pd.read_csv(folders[-1] / rep.CSV))
    assert again == rep.summary(rep.table(runs()))
    assert any(x.endswith("(REST 10.0 %, gRPC 16.7 %)") for x in again)
    page = (folders[-1] / rep.HTML).read_text()
    assert "repeatability over 3 runs" in page and str(folders[0]) in page


def test_runs_of_another_scenario_or_host_are_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = copy.deepcopy(MANIFEST)
    other["scenario"], other["host"]["cpu_count"] = "quick", 4
    folders = _folders(tmp_path, [MANIFEST, MANIFEST, other])
    assert cli.main(["repeatability", *map(str, folders)]) == 2
    err = capsys.readouterr().err
    assert "scenario 'quick', not 'smoke'" in err and "host.cpu_count: 2 (A) vs 4 (B)" in err
    assert not (folders[-1] / rep.CSV).exists()
    out = tmp_path / "out"
    assert cli.main(["repeatability", *map(str, folders), "--force", "--output-dir", str(out)]) == 0
    assert "host.cpu_count" in (out / rep.HTML).read_text()


def test_one_folder_or_one_without_its_tables_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folders = _folders(tmp_path)
    assert cli.main(["repeatability", str(folders[0])]) == 2
    (folders[1] / "tidy.csv").unlink()
    assert cli.main(["repeatability", *map(str, folders)]) == 2
    assert "has no tidy.csv" in capsys.readouterr().err


def test_bench_runs_the_scenario_n_times_then_writes_their_repeatability(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = iter(_folders(tmp_path))
    first: list[str] = []

    def fake_run(scenario: Scenario, knobs: Knobs) -> tuple[int, Path]:
        first.append(scenario.cells()[0].protocol)
        return 0, next(made)

    monkeypatch.setattr(cli, "run", fake_run)
    args = ["bench", str(REPO / "scenarios" / "smoke.toml"), "--runs", "3"]
    assert cli.main([*args, "--results-dir", str(tmp_path)]) == 0
    last = sorted(tmp_path.glob("*_smoke"))[-1]
    assert pick(pd.read_csv(last / rep.CSV), "unary", "ok_per_s", "grpc").runs == 3
    # One repetition each: the runs take turns at which protocol goes first.
    assert first == ["rest", "grpc", "rest"]


def test_a_run_that_stops_short_ends_the_series_with_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folders = _folders(tmp_path)
    codes = iter([(0, folders[0]), (3, folders[1])])
    monkeypatch.setattr(cli, "run", lambda scenario, knobs: next(codes))
    args = ["bench", str(REPO / "scenarios" / "smoke.toml"), "--runs", "3"]
    assert cli.main([*args, "--results-dir", str(tmp_path)]) == 3
    assert not any((f / rep.CSV).exists() for f in folders)


def test_the_dry_run_announces_the_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", str(REPO / "scenarios" / "smoke.toml"), "--dry-run", "--runs", "3"]
    assert cli.main([*args, "--results-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    one, three = (float(lines[i].split("about ")[1].split()[0]) for i in (-3, -1))
    assert lines[-1].startswith("3 runs, about ") and three == pytest.approx(3 * one, abs=0.15)


def test_the_reports_conclusions_use_the_spread_over_runs_when_the_folder_has_it(
    tmp_path: Path,
) -> None:
    folders = _folders(tmp_path)
    tidy = runs()[-1]
    hist = pd.DataFrame(columns=["cell_id", "side", "metric", "le", "count"])
    alone = compare_kind(tidy, "unary", hist, folders[-1])
    assert "across 3 runs" not in alone
    assert cli.main(["repeatability", *map(str, folders)]) == 0
    said = compare_kind(tidy, "unary", hist, folders[-1])
    assert said.count(f"across 3 runs of this scenario ({rep.CSV})") == 2  # calls/s, latency
    assert "0.60 [0.50-0.71]" in said


def test_what_moved_the_figures_is_the_other_work_on_the_host_in_each_cell() -> None:
    # Every run's REST cell lost 20 % of its calls/s per core of other work, gRPC none, and
    # other work fell on REST's cell in runs 0 and 2: the ratio moved with it.
    others = [(1.0, 0.0), (0.0, 0.0), (0.5, 0.0)]
    tidies = [
        pd.DataFrame(
            [
                row("rest", 100.0 * (1 - 0.2 * o_rest), host_other_cpu=o_rest),
                row("grpc", 60.0, host_other_cpu=o_grpc),
            ]
        )
        for o_rest, o_grpc in others
    ]
    lines = rep.movers(tidies, [Path("unused")] * 3)
    assert lines[0].startswith("other work on the host (host_other_cpu): 0.00-1.00 of a core")
    # Each cell's calls/s over its arm's mean: REST 80, 100, 90 over 90; gRPC 1 throughout.
    other = [1.0, 0.0, 0.0, 0.0, 0.5, 0.0]
    relative = [80 / 90, 1.0, 100 / 90, 1.0, 1.0, 1.0]
    r = statistics.correlation(other, relative)
    slope = statistics.linear_regression(other, relative).slope
    assert f"moved {slope * 0.1:+.1%} per 0.1 core of it (r = {r:.2f} over 6 cells" in lines[0]
    assert f"accounts for {r * r:.0%} of their spread" in lines[0]
    # The gap (gRPC's other work less REST's) was most negative where REST's cell was slowest,
    # i.e. the ratio highest: they move exactly against each other here.
    assert lines[1].endswith("r = -1.00 over 3 pairs"), lines[1]
    assert "differ by a median 0.50 core (max 1.00)" in lines[1]


def test_a_run_made_before_the_column_reads_other_work_from_its_kept_exports(
    tmp_path: Path,
) -> None:
    from tests.bench.test_hostcpu import containers, host

    folders = _folders(tmp_path)
    for folder in folders:
        tidy = pd.read_csv(folder / "tidy.csv")
        assert rep.OTHER not in tidy.columns
        (folder / "prometheus").mkdir()
        for cell in tidy["cell_id"]:
            raw = {"host_cpu_seconds": host(1.5), "container_cpu_seconds": containers(rest=0.5)}
            (folder / "prometheus" / f"{cell}.json").write_text(json.dumps(raw))
    tidy = pd.read_csv(folders[0] / "tidy.csv").assign(
        generator_cpu_ratio=0.5, runner_cpu_ratio=0.0
    )
    assert rep.recorded_other(tidy, folders[0]).tolist() == pytest.approx([0.5] * len(tidy))
    # A cell whose exports were not kept is unknown.
    (folders[0] / "prometheus" / f"{tidy['cell_id'][0]}.json").unlink()
    assert math.isnan(rep.recorded_other(tidy, folders[0])[0])


def test_a_windows_own_noise_comes_from_its_locust_history_in_blocks(tmp_path: Path) -> None:
    # 15 s window from t=1000: 100 calls a second, then 120, then 80 in its three 5 s blocks.
    per_second = [100] * 5 + [120] * 5 + [80] * 5
    counts = [0, *(sum(per_second[: i + 1]) for i in range(15))]
    history = pd.DataFrame(
        {
            "Timestamp": [1000 + i for i in range(16)],
            "Name": "Aggregated",
            "Total Request Count": counts,
        }
    )
    (tmp_path / "locust").mkdir()
    history.to_csv(tmp_path / "locust" / "c1_stats_history.csv", index=False)
    tidy = pd.DataFrame(
        [
            {"cell_id": "c1", "started_at": 1000.0, "window_s": 15.0},
            {"cell_id": "c2", "started_at": 1000.0, "window_s": 15.0},  # no history
        ]
    )
    got = rep.within_window(tidy, tmp_path)
    blocks = [500, 600, 400]
    assert got[0] == pytest.approx(statistics.stdev(blocks) / 500 / math.sqrt(3))
    assert math.isnan(got[1])

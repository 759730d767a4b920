"""The announced time of a run: its cells' phases plus the overhead its last runs measured."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from wirelab_bench.cellcost import cell_cost, run_overhead
from wirelab_bench.cli import main
from wirelab_bench.knobs import REPO
from wirelab_bench.scenario import CELL_OVERHEAD_S
from wirelab_bench.scenario_file import load_scenario

SMOKE = REPO / "scenarios" / "smoke.toml"
# `make bench SCENARIO=smoke` three times on an idle lab (28 Nov), 16/16 cells each.
SMOKE_RUNS_S = (75, 80, 82)


def write_run(
    root: Path,
    name: str,
    wall_s: float,
    scenario: Path = SMOKE,
    status: str = "complete",
    text: str | None = None,
) -> Path:
    """A results folder as far as the estimate reads it: the manifest the runner writes."""
    cells = load_scenario(scenario).cells()
    start = 1_800_000_000 + len(list(root.glob("*"))) * 1000
    folder = root / name
    folder.mkdir(parents=True)
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    manifest = {
        "scenario": scenario.stem,
        "scenario_file": str(scenario),
        "scenario_text": scenario.read_text() if text is None else text,
        "status": status,
        "started_at": time.strftime(stamp, time.gmtime(start)),
        "finished_at": time.strftime(stamp, time.gmtime(start + wall_s)),
        "cells_planned": len(cells),
        "cells_done": [c.cell_id for c in cells] if status == "complete" else [],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def announced(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[float, str]:
    """`wirelab bench ... --dry-run`: the seconds it announces, and what it printed."""
    assert main(["bench", *args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    minutes = re.search(r"(\d+) cells, about ([\d.]+) min", out)
    assert minutes, out
    return float(minutes[2]) * 60, out


def test_the_default_announces_smoke_within_20_percent_of_its_recorded_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Guards against: smoke announced about 2.9 min (9 s a cell) and took 1:15-1:22.
    seconds, out = announced(capsys, "smoke", "--results-dir", str(tmp_path / "none"))
    for real in SMOKE_RUNS_S:
        assert abs(seconds - real) <= 0.2 * real, (seconds, real)
    assert "per cell beyond its phases: default" in out


def test_the_estimate_takes_the_overhead_of_the_scenarios_last_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A slower machine: its runs took twice the default's time; the estimate follows them.
    for i, wall in enumerate((160, 170, 150)):
        write_run(tmp_path, f"20261128T0{i}0000Z_smoke", wall)
    seconds, out = announced(capsys, "smoke", "--results-dir", str(tmp_path))
    assert abs(seconds - 160) <= 0.1 * 160
    assert "median of the last 3 complete smoke run(s)" in out


def test_one_run_overhead_is_its_wall_time_less_its_planned_phases_per_cell() -> None:
    cells = load_scenario(SMOKE).cells()
    manifest = {
        "scenario": "smoke",
        "scenario_file": str(SMOKE),
        "scenario_text": SMOKE.read_text(),
        "status": "complete",
        "started_at": "2026-11-28T06:00:00Z",
        "finished_at": "2026-11-28T06:01:20Z",
        "cells_done": [c.cell_id for c in cells],
    }
    assert run_overhead(manifest) == pytest.approx((80 - 16 * 2.0) / 16)
    assert run_overhead({**manifest, "status": "incomplete"}) is None
    assert run_overhead({**manifest, "cells_done": manifest["cells_done"][:3]}) is None
    assert run_overhead({k: v for k, v in manifest.items() if k != "finished_at"}) is None


def test_only_the_newest_complete_runs_of_the_same_scenario_count(tmp_path: Path) -> None:
    write_run(tmp_path, "20261127T000000Z_smoke", 32 + 16 * 20.0)  # older than the three below
    for i, wall in enumerate((32 + 16 * 2.0, 32 + 16 * 3.0, 32 + 16 * 4.0)):
        write_run(tmp_path, f"20261128T0{i}0000Z_smoke", wall)
    write_run(tmp_path, "20261128T090000Z_smoke", 32 + 16 * 50.0, status="incomplete")
    other = tmp_path / "smoke-like.toml"
    other.write_text(SMOKE.read_text())
    write_run(tmp_path, "20261128T100000Z_smoke-like", 32 + 16 * 50.0, scenario=other)
    cost = cell_cost(tmp_path, "smoke")
    assert cost.seconds == pytest.approx(3.0)
    assert "20261128T020000Z_smoke" in cost.source
    assert "20261127T000000Z_smoke" not in cost.source


def test_a_past_run_is_measured_against_its_own_scenario_text(tmp_path: Path) -> None:
    # The file changed since: its windows were 10 s then. Measured against today's 2 s cells
    # the overhead would come out 8 s too high.
    then = SMOKE.read_text().replace("duration_s = 1.5", "duration_s = 9.5")
    assert then != SMOKE.read_text()
    write_run(tmp_path, "20261128T000000Z_smoke", 16 * (10.0 + 3.0), text=then)
    assert cell_cost(tmp_path, "smoke").seconds == pytest.approx(3.0)


def test_without_runs_the_default_is_used_and_said(tmp_path: Path) -> None:
    write_run(tmp_path, "20261128T000000Z_smoke", 100, status="incomplete")
    cost = cell_cost(tmp_path, "smoke")
    assert cost.seconds == CELL_OVERHEAD_S
    assert cost.source.startswith("default")


def test_the_runs_progress_line_announces_the_measured_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i, wall in enumerate((160, 170, 150)):
        write_run(tmp_path, f"20261128T0{i}0000Z_smoke", wall)
    nowhere = ["--rest-url", "http://127.0.0.1:9", "--grpc-target", "127.0.0.1:9"]
    unscraped = ["--rest-metrics-url", "", "--grpc-metrics-url", "", "--prometheus-url", ""]
    args = ["--results-dir", str(tmp_path), "--health-timeout-s", "0.2", *nowhere, *unscraped]
    # No lab here: the run stops at its health check, after announcing its time.
    assert main(["bench", "smoke", *args]) == 3
    assert "16 cells, about 0:02:40" in capsys.readouterr().err

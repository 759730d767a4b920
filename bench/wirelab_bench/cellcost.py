"""What a cell costs beyond its phases, as the scenario's last complete runs measured it."""

from __future__ import annotations

import json
import statistics
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wirelab_bench.results import MANIFEST
from wirelab_bench.scenario import CELL_OVERHEAD_S
from wirelab_bench.scenario_file import parse_scenario

# The last runs that set the figure: enough that one slow run moves it little, few enough that
# a change of the lab (or of the runner) shows in the next estimate.
RECENT_RUNS = 3


@dataclass(frozen=True)
class CellCost:
    """Seconds per cell beyond its planned phases, and where the figure comes from."""

    seconds: float
    source: str


def run_overhead(manifest: dict[str, Any]) -> float | None:
    """A complete run's wall time (the manifest's start to finish, preflight included, so the
    estimate covers all that the user waits for) less the phases its scenario file planned,
    per cell; None for a run that is not complete or a manifest without what the figure needs."""
    if manifest.get("status") != "complete":
        return None
    try:
        wall = _at(manifest["finished_at"]) - _at(manifest["started_at"])
        # The folder's own scenario text: the file may have changed since the run.
        data = tomllib.loads(manifest["scenario_text"])
        # The profiles it names were known when it ran: only its cells' phases matter here.
        cells = parse_scenario(data, Path(manifest["scenario_file"]), _networks(data)).cells()
    except (ValueError, KeyError, TypeError):
        return None  # ScenarioError and TOMLDecodeError are ValueErrors
    if not cells or len(manifest.get("cells_done") or ()) != len(cells):
        return None
    return max(0.0, (wall - sum(c.seconds for c in cells)) / len(cells))


def cell_cost(results_root: Path, scenario: str) -> CellCost:
    """The median overhead of ``scenario``'s last RECENT_RUNS complete runs under
    ``results_root`` (folders named by their UTC start time), else the default."""
    found: list[tuple[str, float]] = []
    # A missing root globs to nothing; names start with the UTC time, so the newest come first.
    runs = sorted(results_root.glob(f"*_{scenario}*"), reverse=True)
    for run_dir in runs:
        if len(found) == RECENT_RUNS:
            break
        manifest = _manifest(run_dir)
        s = run_overhead(manifest) if manifest.get("scenario") == scenario else None
        if s is not None:
            found.append((run_dir.name, s))
    if not found:
        return CellCost(CELL_OVERHEAD_S, f"default; no complete {scenario} run in {results_root}")
    names = ", ".join(name for name, _ in found)
    return CellCost(
        statistics.median(s for _, s in found),
        f"median of the last {len(found)} complete {scenario} run(s): {names}",
    )


def _manifest(run_dir: Path) -> dict[str, Any]:
    try:
        found = json.loads((run_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _networks(data: dict[str, Any]) -> set[str]:
    tables = [data, *(g for g in data.get("groups") or () if isinstance(g, dict))]
    return {t[k] for t in tables for k in ("network", "hop_network") if isinstance(t.get(k), str)}


def _at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()

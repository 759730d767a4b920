"""A run's results folder: created once, never reused, rewritten after every cell."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

TIDY_CSV = "tidy.csv"
TIDY_PARQUET = "tidy.parquet"
HISTOGRAMS_CSV = "histograms.csv"
REPLICAS_CSV = "replicas.csv"
CONTAINERS_CSV = "containers.csv"
CONTAINER_COLUMNS = (
    "cell_id",
    "service",
    "cpu_ms_per_order",
    "cores",
    "throttled_pct",
    "memory_peak_mib",
)
MANIFEST = "manifest.json"


def new_run_dir(root: Path, scenario: str, now: float | None = None) -> Path:
    """``root/<UTC time>_<scenario>``; a name already taken gets a suffix, nothing is reused."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        path = root / (f"{stamp}_{scenario}" + (f"_{n}" if n else ""))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"no free results folder name under {root} for {stamp}_{scenario}")


def write_json(path: Path, data: Any) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    os.replace(tmp, path)


def write_tables(
    run_dir: Path,
    rows: list[dict[str, Any]],
    hist_rows: list[dict[str, Any]],
    replica_rows: list[dict[str, Any]] | None = None,
    container_rows: list[dict[str, Any]] | None = None,
) -> None:
    """The tidy table (CSV always, Parquet too), the histogram buckets the notebook plots and,
    in a topology run with Prometheus, the orders each hop replica served per cell and what each
    container on a cell's path used (tidy_hops.container_rows)."""
    tidy = pd.DataFrame(rows)
    _atomic_csv(tidy, run_dir / TIDY_CSV)
    tmp = run_dir / (TIDY_PARQUET + ".tmp")
    tidy.to_parquet(tmp, index=False)
    os.replace(tmp, run_dir / TIDY_PARQUET)
    hist = pd.DataFrame(hist_rows, columns=["cell_id", "side", "metric", "le", "count"])
    _atomic_csv(hist, run_dir / HISTOGRAMS_CSV)
    if replica_rows is not None:
        columns = ["cell_id", "service", "instance", "requests"]
        _atomic_csv(pd.DataFrame(replica_rows, columns=columns), run_dir / REPLICAS_CSV)
    if container_rows is not None:
        frame = pd.DataFrame(container_rows, columns=list(CONTAINER_COLUMNS))
        _atomic_csv(frame, run_dir / CONTAINERS_CSV)


def _atomic_csv(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def latest_run(root: Path) -> Path:
    """The newest results folder (by name, which starts with its UTC start time)."""
    runs = sorted(p for p in root.iterdir() if (p / MANIFEST).exists()) if root.exists() else []
    if not runs:
        raise FileNotFoundError(f"no results folder with a {MANIFEST} under {root}")
    return runs[-1]

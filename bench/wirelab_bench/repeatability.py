"""Run-to-run repeatability: per condition and figure, each protocol's and gRPC/REST's spread."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd

from wirelab_bench import compare as cmp
from wirelab_bench.hostcpu import other_cpu
from wirelab_bench.intervals import Ratio, t_interval

CSV, HTML = "repeatability.csv", "repeatability.html"
FIGURES = {
    "ok_per_s": "successful calls/s",
    "client_p50_ms": "median latency",
    "client_p99_ms": "p99 latency",
    # The service's own CPU per call: what it costs, where the others also say what it was given.
    "cpu_s_per_request": "server CPU per call",
}
RATIO = "grpc/rest"
ARMS = ("rest", "grpc", RATIO)  # the order of a condition's rows; other arms follow
# The lab's goal for the ratios a user quotes: they repeat within 5 % coefficient of variation.
GOAL_CV = 0.05
GOAL_FIGURES = ("ok_per_s", "client_p50_ms")
COLUMNS = ("figure", "arm", "runs", "mean", "low", "high", "cv", "goal", "values")
# What a run's conditions are matched on across runs: compare's keys, less the arm's own.
CONDITION = tuple(k for k in cmp.KEYS if k not in ("protocol", "rest_http"))


def _arm(protocol: str, rest_http: str) -> str:
    """The arm a row measures: its protocol, REST over h2c told apart from REST over 1.1."""
    return f"{protocol}-h2c" if protocol == "rest" and rest_http == "h2c" else protocol


def per_run(runs: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """One row per run, condition and arm: each figure of that run (the mean of its
    repetitions), and the run's gRPC/REST ratio of each as one more arm, ``grpc/rest``."""
    keys = [k for k in cmp.KEYS if any(k in t.columns for t in runs)]
    condition = [k for k in keys if k in CONDITION]
    figures = [f for f in FIGURES if any(f in t.columns for t in runs)]
    parts = []
    for i, tidy in enumerate(runs):
        t = cmp.keyed(tidy.reindex(columns=sorted({*tidy.columns, *figures})), keys)
        http = t["rest_http"] if "rest_http" in t.columns else [""] * len(t)
        t["arm"] = [_arm(p, h) for p, h in zip(t["protocol"], http, strict=True)]
        means = t.groupby([*condition, "arm"])[figures].mean().reset_index()
        rest, grpc = (
            means[means["arm"] == a].set_index(condition)[figures] for a in ("rest", "grpc")
        )
        ratio = (grpc / rest).dropna(how="all").reset_index().assign(arm=RATIO)
        parts.append(pd.concat([means, ratio], ignore_index=True).assign(run=i))
    return pd.concat(parts, ignore_index=True)


def _cv(values: Sequence[float]) -> float:
    """Standard deviation over mean (ddof 1); NaN under two values or a mean of zero."""
    if len(values) < 2 or not sum(values):
        return math.nan
    mean = sum(values) / len(values)
    return math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1)) / abs(mean)


def table(runs: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Per condition, figure and arm: how many runs measured it, the mean of their figures and
    its 95 % interval, their coefficient of variation, the goal where it applies, and the runs'
    own figures. The gRPC/REST row's mean is the runs' ratios' geometric mean, with a Student's t
    interval on their logarithms, as a run's repetitions give one (intervals.across_repetitions)."""
    rows = per_run(runs)
    condition = [k for k in CONDITION if k in rows.columns]
    figures = [f for f in FIGURES if f in rows.columns]
    out: list[dict[str, Any]] = []
    for cond, part in rows.groupby(condition):
        arms = sorted(set(part["arm"]), key=lambda a: (ARMS.index(a) if a in ARMS else 9, a))
        for figure, arm in ((f, a) for f in figures for a in arms):
            found = part.loc[part["arm"] == arm, figure]
            values = [float(v) for v in found if math.isfinite(v)]
            if not values:
                continue
            mean, low, high, _ = cmp.ci(values)
            if arm == RATIO and len(values) > 1 and min(values) > 0:
                centre, half = t_interval([math.log(v) for v in values])
                mean, low, high = (math.exp(centre + d) for d in (0, -half, half))
            cv = _cv(values)
            goal = ""
            if arm == RATIO and figure in GOAL_FIGURES and not math.isnan(cv):
                goal = "met" if cv <= GOAL_CV else "missed"
            out.append(
                dict(zip(condition, cond, strict=True))
                | {"figure": figure, "arm": arm, "runs": len(values), "mean": mean, "low": low}
                | {"high": high, "cv": cv, "goal": goal}
                | {"values": ";".join(f"{v:.6g}" for v in values)}
            )
    return pd.DataFrame(out, columns=[*condition, *COLUMNS])


NAMES = {"rest": "REST", "grpc": "gRPC"}


def _pct(share: float, digits: int = 1) -> str:
    return f"{share * 100:.{digits}f} %"


def _condition(row: pd.Series) -> str:
    size = f" {int(row['payload_bytes'])} B" if row.get("payload_bytes") else ""
    generator = row.get("generator", "locust")
    by = "" if generator == "locust" else f" ({generator})"
    network = row.get("network", "direct")
    where = "" if network in ("direct", "") else f" {network}"
    return f"{row['kind']} {row['load']}{size}{by}{where}"


def summary(t: pd.DataFrame) -> list[str]:
    """What the terminal shows: each condition's gRPC/REST ratios with their spread, then the
    goal's tally."""
    lines = []
    # Grouped with NaN kept as a key: an empty column (hop_network in a one-hop run) reads back
    # from the CSV as NaN, which equals nothing, itself included.
    condition = [c for c in CONDITION if c in t.columns]
    for _, part in t.groupby(condition, dropna=False, sort=False):
        for _, r in part[part["arm"] == RATIO].iterrows():
            sides = part[part["figure"] == r["figure"]]
            cvs = dict(zip(sides["arm"], sides["cv"], strict=True))
            each = ", ".join(
                f"{name} {_pct(cvs[arm])}" for arm, name in NAMES.items() if arm in cvs
            )
            lines.append(
                f"{_condition(r)}: {FIGURES[r['figure']]} gRPC/REST {r['mean']:.3g} "
                f"[{r['low']:.3g}-{r['high']:.3g}], CV {_pct(r['cv'])} over {r['runs']} runs "
                f"({each})"
            )
    lines += spread_by_figure(t)
    judged = t[t["goal"].isin(["met", "missed"])]
    if len(judged):
        met = int((judged["goal"] == "met").sum())
        lines.append(
            f"goal, the calls/s and median latency ratios within {_pct(GOAL_CV, 0)} CV: met in "
            f"{met} of {len(judged)}"
        )
    return lines


def spread_by_figure(t: pd.DataFrame) -> list[str]:
    """Per figure, across the conditions: each arm's median CV with its range, and how many of
    the gRPC/REST ratios repeat within the goal's CV (the docs' tables are these lines)."""
    lines = []
    for figure, name in FIGURES.items():
        rows = t[(t["figure"] == figure) & t["cv"].notna()]
        if rows.empty:
            continue
        parts = []
        for arm, label in (*NAMES.items(), (RATIO, "gRPC/REST")):
            cvs = rows[rows["arm"] == arm]["cv"]
            if len(cvs):
                parts.append(f"{label} {_pct(cvs.median())} ({_pct(cvs.min())}-{_pct(cvs.max())})")
        ratios = rows[rows["arm"] == RATIO]["cv"]
        within = int((ratios <= GOAL_CV).sum())
        lines.append(
            f"{name}, median CV over {len(ratios)} conditions: {', '.join(parts)}; "
            f"ratio within {_pct(GOAL_CV, 0)}: {within} of {len(ratios)}"
        )
    return lines


# Each cell's share of a core spent by other work on the host (tidy.host_other_cpu).
OTHER = "host_other_cpu"


def recorded_other(tidy: pd.DataFrame, folder: Path) -> pd.Series:
    """Each cell's ``host_other_cpu``: its column, or, in a run made before the runner recorded
    it, the same figure from the window's range exports the run kept (prometheus/<cell>.json)."""
    if OTHER in tidy.columns:
        return tidy[OTHER]
    values = []
    for _, cell in tidy.iterrows():
        path = folder / "prometheus" / f"{cell['cell_id']}.json"
        raw = json.loads(path.read_text()) if path.is_file() else {}
        gen, own = (
            float(cell.get(c, math.nan)) for c in ("generator_cpu_ratio", "runner_cpu_ratio")
        )
        values.append(other_cpu(raw, gen, own, float(cell.get("proxy_cpu_ratio", math.nan))))
    return pd.Series(values, index=tidy.index, dtype=float)


BLOCK_S = 5  # the window's blocks whose calls/s give its own standard error


def within_window(tidy: pd.DataFrame, folder: Path) -> pd.Series:
    """Each cell's calls/s standard error inside its own window, over its mean: from Locust's
    per-second history (locust/<cell>_stats_history.csv), the window cut in 5 s blocks (Locust's
    workers report every 3 s, so single seconds come in lumps). NaN without the history."""
    values = []
    for _, cell in tidy.iterrows():
        path = folder / "locust" / f"{cell['cell_id']}_stats_history.csv"
        se = math.nan
        if path.is_file() and {"started_at", "window_s"} <= set(cell.index):
            h = pd.read_csv(path)
            h = h[h["Name"] == "Aggregated"].set_index("Timestamp")["Total Request Count"]
            start, seconds = float(cell["started_at"]), float(cell["window_s"])
            edges = [start + i * BLOCK_S for i in range(int(seconds // BLOCK_S) + 1)]
            at = [h[h.index <= t].iloc[-1] if (h.index <= t).any() else math.nan for t in edges]
            blocks = [b - a for a, b in pairwise(at)]
            if len(blocks) >= 2 and all(math.isfinite(b) for b in blocks) and sum(blocks) > 0:
                mean = sum(blocks) / len(blocks)
                se = _cv(blocks) / math.sqrt(len(blocks)) if mean else math.nan
        values.append(se)
    return pd.Series(values, index=tidy.index, dtype=float)


def movers(runs: Sequence[pd.DataFrame], folders: Sequence[Path]) -> list[str]:
    """What moved the figures from run to run, as far as the cells recorded it: other work on
    the host during each cell (``host_other_cpu``) against the cell's calls per second relative
    to its condition and arm's mean over the runs. Empty where the runs did not record it."""
    keys = [k for k in CONDITION if all(k in t.columns for t in runs)]
    frames = [
        t.assign(run=i, **{OTHER: recorded_other(t, folder)})
        for i, (t, folder) in enumerate(zip(runs, folders, strict=True))
    ]
    if len(frames) < 2:
        return []
    cells = pd.concat(frames, ignore_index=True)
    http = cells["rest_http"] if "rest_http" in cells.columns else pd.Series("", index=cells.index)
    cells["arm"] = [_arm(p, h) for p, h in zip(cells["protocol"], http, strict=True)]
    group = cells.groupby([*keys, "arm"], dropna=False)["ok_per_s"]
    cells["relative"] = cells["ok_per_s"] / group.transform("mean")
    both = cells[[OTHER, "relative"]].replace([math.inf, -math.inf], math.nan).dropna()
    if len(both) < 3 or both[OTHER].std() == 0 or both["relative"].std() == 0:
        return []
    r = float(both[OTHER].corr(both["relative"]))
    slope = float(both["relative"].cov(both[OTHER]) / both[OTHER].var())
    other = both[OTHER]
    lines = [
        f"other work on the host (host_other_cpu): {other.min():.2f}-{other.max():.2f} of a core "
        f"during the cells, median {other.median():.2f}; a cell's calls/s against its condition's "
        f"mean moved {slope * 0.1:+.1%} per 0.1 core of it (r = {r:.2f} over {len(both)} cells: it "
        f"accounts for {r * r:.0%} of their spread)"
    ]
    # The two protocols of a condition measured in one run: how differently loaded their cells were.
    # How much of the spread one window's own noise explains; and whether calls cost the
    # service more CPU when they went slower (contended cores, not only fewer of them).
    cells["within"] = [
        v for t, folder in zip(runs, folders, strict=True) for v in within_window(t, folder)
    ]
    spread = group.transform(lambda s: _cv([float(v) for v in s if math.isfinite(v)]))
    if cells["within"].notna().sum() >= 3:
        lines.append(
            f"inside one window, calls/s over {BLOCK_S} s blocks had a standard error of a median "
            f"{cells['within'].median():.1%} of their mean; from run to run a cell's calls/s "
            f"moved by a median {spread.median():.1%} (CV): a longer window narrows the first only"
        )
    if "cpu_s_per_request" in cells.columns:
        cost = cells[["cpu_s_per_request", "ok_per_s"]].dropna()
        cost = cost.assign(
            cpu=cells["cpu_s_per_request"]
            / cells.groupby([*keys, "arm"], dropna=False)["cpu_s_per_request"].transform("mean")
        ).dropna()
        if len(cost) >= 3 and cost["cpu"].std() > 0:
            rho = cost["cpu"].corr(cells.loc[cost.index, "relative"], method="spearman")
            lines.append(
                f"server CPU per call against the cell's calls/s, each over its condition's mean: "
                f"Spearman r = {rho:.2f} over {len(cost)} cells (negative: calls cost more CPU "
                "when they went slower, as on contended cores)"
            )
    # The ratio's own deviation from its condition's (geometric) mean against that difference.
    index = [*keys, "run"]
    other = cells.pivot_table(index=index, columns="arm", values=OTHER, dropna=False)
    rate = cells.pivot_table(index=index, columns="arm", values="ok_per_s", dropna=False)
    if {"rest", "grpc"} <= set(other.columns) & set(rate.columns):
        pair = pd.DataFrame(
            {
                "gap": other["grpc"] - other["rest"],
                "log": (rate["grpc"] / rate["rest"]).map(math.log),
            }
        ).replace([math.inf, -math.inf], math.nan)
        pair = pair.dropna()
        if len(pair) >= 3:
            pair["dev"] = pair["log"] - pair.groupby(level=keys, dropna=False)["log"].transform(
                "mean"
            )
            fit = pair["gap"].corr(pair["dev"]) if pair["dev"].std() > 0 else math.nan
            lines.append(
                f"a condition's REST and gRPC cells in one run saw other work differ by a median "
                f"{pair['gap'].abs().median():.2f} core (max {pair['gap'].abs().max():.2f}); the "
                f"run's gRPC/REST calls/s ratio against its condition's mean, by that difference: "
                f"r = {fit:.2f} over {len(pair)} pairs"
            )
    return lines


def write(
    out: Path, folders: Sequence[Path], t: pd.DataFrame, notes: list[str]
) -> tuple[Path, Path]:
    """repeatability.csv and repeatability.html in ``out``; returns both paths."""
    out.mkdir(parents=True, exist_ok=True)
    csv, page = out / CSV, out / HTML
    t.to_csv(csv, index=False)
    runs = "".join(f"<li>{html.escape(str(f))}</li>" for f in folders)
    items = "".join(f"<li>{html.escape(line)}</li>" for line in [*summary(t), *notes])
    page.write_text(
        "<!doctype html><meta charset='utf-8'><title>wirelab repeatability</title>"
        f"<h1>wirelab: repeatability over {len(folders)} runs</h1><ol>{runs}</ol>"
        "<p>Per condition, figure and arm: each run's figure (the mean of its repetitions), their "
        "mean with its 95 % Student's t interval and their coefficient of variation (standard "
        "deviation over mean). The grpc/rest rows are each run's own ratio, its two protocols "
        "measured side by side: their geometric mean, with the interval on their logarithms.</p>"
        f"<h2>Summary</h2><ul>{items}</ul><h2>Every figure</h2>"
        + t.to_html(index=False, float_format=lambda x: f"{x:.4g}", na_rep="")
    )
    return csv, page


def across_runs(run_dir: Path, rows: pd.DataFrame, figure: str) -> Ratio | None:
    """The gRPC/REST ratio of ``rows``' condition (its kind, generator, load and payload) over
    the runs of the repeatability table in ``run_dir``, when there is one and it holds that
    condition once; None otherwise."""
    path = run_dir / CSV
    if not path.is_file() or rows.empty:
        return None
    t = pd.read_csv(path)
    first = rows.iloc[0]
    match = (t["arm"] == RATIO) & (t["figure"] == figure)
    for key in ("kind", "generator", "load"):
        if key in t.columns:
            match &= t[key].astype(str) == str(first.get(key, cmp.KEY_DEFAULTS.get(key, "")))
    if "payload_bytes" in t.columns:
        match &= t["payload_bytes"].astype(float) == float(first.get("payload_bytes", 0))
    found = t[match]
    if len(found) != 1 or int(found["runs"].iloc[0]) < 2:
        return None
    r = found.iloc[0]
    basis = f"across {int(r['runs'])} runs of this scenario ({CSV})"
    return Ratio(float(r["mean"]), float(r["low"]), float(r["high"]), basis)


def differences(folders: Sequence[Path], manifests: Sequence[dict[str, Any]]) -> list[str]:
    """What makes the runs not repeats of one another: another scenario, or a difference
    `wirelab compare` refuses (host, images, the runner's knobs, servers, topology, network,
    scenario shape), each against the first run."""
    out = []
    first = manifests[0]
    for folder, manifest in zip(folders[1:], manifests[1:], strict=True):
        if manifest.get("scenario") != first.get("scenario"):
            out.append(f"{folder}: scenario {manifest.get('scenario')!r}, "
                       f"not {first.get('scenario')!r}")  # fmt: skip
        out += [f"{folder}: {d}" for d in cmp.manifest_differences(first, manifest)[0]]
    return out

"""`wirelab compare`: two runs' cells matched, B/A ratios with 95 % intervals, changes flagged."""

from __future__ import annotations

import html
import json
import math
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from scipy import stats

from wirelab_bench.network import DIRECT
from wirelab_bench.results import MANIFEST, TIDY_CSV
from wirelab_bench.topology import ONE_HOP

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_REFUSED = 2  # also usage errors: a folder without manifest.json or tidy.csv

# Cells match on these; a column an older folder lacks takes the value its runs had then.
KEY_DEFAULTS: dict[str, Any] = {
    "topology": ONE_HOP, "network": DIRECT, "runtime": "python", "generator": "locust",
}  # fmt: skip
KEYS = (
    "topology", "network", "hop_network", "runtime", "generator", "arrivals", "rest_http",
    "protocol", "kind", "load", "users", "payload_bytes",
)  # fmt: skip
# figure -> +1 when more is better, -1 when less is better
FIGURES = {
    "requests_per_s": 1,
    "client_p50_ms": -1,
    "client_p99_ms": -1,
    "client_mean_ms": -1,
    "cpu_s_per_request": -1,
    "wire_bytes_per_request": -1,
}
REGRESSION, IMPROVEMENT, SAME = "regression", "improvement", "no significant change"
ONE_REP, NO_DATA = "one repetition: point ratio only", "no data"
COLUMNS = (
    "figure", "n_a", "mean_a", "low_a", "high_a", "n_b", "mean_b", "low_b", "high_b",
    "ratio", "ratio_low", "ratio_high", "verdict",
)  # fmt: skip

# Scenario keys that change what a cell measures; kinds, loads, sizes and repetitions only
# change which cells exist (matching handles that), gates and description change no figure.
SHAPE_KEYS = (
    "topology", "warmup_s", "duration_s", "cooldown_s", "failure_threshold_ms",
    "stream_count", "stream_interval_ms", "work_ms", "network", "hop_network",
)  # fmt: skip
KNOB_KEYS = ("locust_args", "network")  # the runner's knobs that change what is measured
HOST_KEYS = ("hostname", "cpu_count", "cpu_model", "memory_bytes", "kernel", "python")


def ci(values: Sequence[float]) -> tuple[float, float, float, int]:
    """Mean, 95 % Student's t interval and n of the non-NaN values (as notebooks/report.py)."""
    v = [float(x) for x in values if not math.isnan(float(x))]
    if not v:
        return math.nan, math.nan, math.nan, 0
    mean = sum(v) / len(v)
    sd = float(pd.Series(v).std(ddof=1)) if len(v) > 1 else 0.0
    if sd == 0:
        return mean, mean, mean, len(v)
    half = float(stats.t.ppf(0.975, len(v) - 1)) * sd / math.sqrt(len(v))
    return mean, mean - half, mean + half, len(v)


def keys_of(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """The match keys present in either table (``runtime`` only once some run has it)."""
    return [k for k in KEYS if k in a.columns or k in b.columns]


def keyed(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    out = frame.copy()
    for k in keys:
        if k == "hop_network" and k not in out.columns:
            # Before hop links had a profile of their own, a topology's hops carried the edge's.
            hops = out["network"] if "network" in out.columns else pd.Series(DIRECT, out.index)
            topology = out["topology"] if "topology" in out.columns else ONE_HOP
            out[k] = hops.where(topology != ONE_HOP, "")
        elif k == "rest_http" and k not in out.columns:
            # Before REST had an HTTP/2 arm, every REST cell spoke HTTP/1.1.
            out[k] = (out["protocol"] == "rest").map({True: "1.1", False: ""})
        elif k == "arrivals" and k not in out.columns:
            # Before arrivals were a group setting, wirelab-loadgen's open loops were evenly spaced.
            paced = out.get("target_rate", pd.Series(math.nan, out.index)).notna()
            open_loop = paced & (out.get("generator", pd.Series("locust", out.index)) == "loadgen")
            out[k] = open_loop.map({True: "constant", False: ""})
        elif k not in out.columns:
            out[k] = KEY_DEFAULTS[k]
    # An empty cell reads back as NaN, and NaN never equals itself as a dictionary key. A column
    # of them reads as float64, which pandas 3 warns of filling with text: as objects, it does not.
    out[keys] = out[keys].astype(object).fillna("")
    return out


def verdict(
    a: tuple[float, float, float, int], b: tuple[float, float, float, int], sign: int
) -> str:
    """Regression or improvement when the two intervals do not overlap; one repetition: none."""
    if a[3] == 0 or b[3] == 0:
        return NO_DATA
    if a[3] < 2 or b[3] < 2:
        return ONE_REP
    if b[1] <= a[2] and a[1] <= b[2]:
        return SAME
    return IMPROVEMENT if (b[0] > a[0]) == (sign > 0) else REGRESSION


def compare(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per condition present in both runs and figure: each run's mean, interval and n,
    the B/A ratio and its range, and the verdict.

    The range is B's interval over A's, far end to far end (low_b/high_a .. high_b/low_a): it
    holds 1 exactly when the two intervals overlap, so a flagged change is one whose range
    excludes 1."""
    keys = keys_of(a, b)
    a, b = keyed(a, keys), keyed(b, keys)
    groups_b = {k: part for k, part in b.groupby(keys, dropna=False)}
    rows: list[dict[str, Any]] = []
    for cond, part_a in a.groupby(keys, dropna=False):
        if (part_b := groups_b.get(cond)) is None:
            continue
        for figure, sign in FIGURES.items():
            if figure not in part_a.columns or figure not in part_b.columns:
                continue
            ca, cb = ci(part_a[figure].tolist()), ci(part_b[figure].tolist())
            ratio = cb[0] / ca[0] if ca[0] else math.nan
            both = ca[3] > 1 and cb[3] > 1
            low = cb[1] / ca[2] if both and ca[2] > 0 else math.nan
            high = (cb[2] / ca[1] if ca[1] > 0 else math.inf) if both else math.nan
            rows.append(
                dict(zip(keys, cond, strict=True))
                | {"figure": figure, "n_a": ca[3], "mean_a": ca[0], "low_a": ca[1]}
                | {"high_a": ca[2], "n_b": cb[3], "mean_b": cb[0], "low_b": cb[1]}
                | {"high_b": cb[2], "ratio": ratio, "ratio_low": low, "ratio_high": high}
                | {"verdict": verdict(ca, cb, sign)}
            )
    return pd.DataFrame(rows, columns=[*keys, *COLUMNS])


def unmatched(a: pd.DataFrame, b: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Conditions only in A and only in B, as 'key=value ...' lines."""
    keys = keys_of(a, b)
    seen = [set(keyed(f, keys)[keys].itertuples(index=False, name=None)) for f in (a, b)]

    return sorted(_cond(keys, c) for c in seen[0] - seen[1]), sorted(
        _cond(keys, c) for c in seen[1] - seen[0]
    )


def _cond(keys: Sequence[str], values: Sequence[Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))


def exit_code(table: pd.DataFrame) -> int:
    return EXIT_REGRESSION if (table["verdict"] == REGRESSION).any() else EXIT_OK


def _shape(manifest: dict[str, Any]) -> dict[str, Any]:
    try:
        data = tomllib.loads(manifest.get("scenario_text") or "")
    except tomllib.TOMLDecodeError:
        return {"scenario_text": manifest.get("scenario_text")}
    out = {f"scenario.{k}": data.get(k) for k in SHAPE_KEYS}
    for i, group in enumerate(data.get("groups") or []):
        out |= {f"scenario.groups[{i}].{k}": group.get(k) for k in SHAPE_KEYS if k in group}
    return out


def _images(manifest: dict[str, Any], part: str) -> dict[str, Any]:
    images = (manifest.get("docker") or {}).get("images") or {}
    return {f"docker.images.{svc}.{part}": (v or {}).get(part) for svc, v in images.items()}


def _fields(manifest: dict[str, Any], same_commit: bool) -> dict[str, Any]:
    """The manifest fields that must be equal for two runs' figures to be comparable."""
    knobs, host = manifest.get("knobs") or {}, manifest.get("host") or {}
    topology = manifest.get("topology") or {}
    out = {f"knobs.{k}": knobs.get(k) for k in KNOB_KEYS}
    out |= {f"host.{k}": host.get(k) for k in HOST_KEYS}
    out |= {"servers": manifest.get("servers"), "network": manifest.get("network")}
    out |= {"clients": manifest.get("clients")}
    out |= {"topology.name": topology.get("name"), "topology.peers": topology.get("peers")}
    out |= _shape(manifest) | _images(manifest, "image")
    # A new commit rebuilds the lab's images, so new ids are what a regression check compares;
    # the same clean commit on other image ids means the environment moved under the code.
    return out | (_images(manifest, "id") if same_commit else {})


def _informational(manifest: dict[str, Any]) -> dict[str, Any]:
    git, docker = manifest.get("git") or {}, manifest.get("docker") or {}
    return {
        "git.sha": git.get("sha"),
        "git.dirty": git.get("dirty"),
        "packages.lock_sha256": (manifest.get("packages") or {}).get("lock_sha256"),
        "docker.version": docker.get("version"),
        "status": manifest.get("status"),
        "traces": _traces(manifest),
    } | _images(manifest, "id")


def _traces(manifest: dict[str, Any]) -> str | None:
    """Whether the lab traced the run's calls, and at which ratio (docs/traces.md: at ratio 1 a
    saturated service kept 0.55-0.67 of its calls per CPU-second); None where the run could not
    tell or predates the record."""
    traced = manifest.get("traces") or {}
    if traced.get("on") is None:
        return None
    return f"on, ratio {traced.get('ratio')}" if traced["on"] else "off"


def _diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [
        f"{k}: {a.get(k)!r} (A) vs {b.get(k)!r} (B)" for k in sorted(a | b) if a.get(k) != b.get(k)
    ]


def manifest_differences(a: dict[str, Any], b: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(fields whose difference invalidates the comparison, fields that differ and are shown)."""
    git_a, git_b = a.get("git") or {}, b.get("git") or {}
    # A dirty tree's sha does not name its code: its images may differ for a reason.
    clean = not git_a.get("dirty") and not git_b.get("dirty")
    same_commit = clean and git_a.get("sha") == git_b.get("sha")
    blocking = _diff(_fields(a, same_commit), _fields(b, same_commit))
    # Tracing refuses only when both runs know it: older runs, and runs inside the lab (no
    # docker CLI to read the edges' environment), show the difference instead.
    if None not in (_traces(a), _traces(b)):
        blocking += _diff({"traces": _traces(a)}, {"traces": _traces(b)})
    shown = [d for d in _diff(_informational(a), _informational(b)) if d not in blocking]
    return blocking, shown


def load_run(folder: Path) -> tuple[dict[str, Any], pd.DataFrame]:
    """A results folder's manifest and tidy table; FileNotFoundError names what is missing."""
    for name in (MANIFEST, TIDY_CSV):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder} has no {name}")
    manifest: dict[str, Any] = json.loads((folder / MANIFEST).read_text())
    return manifest, pd.read_csv(folder / TIDY_CSV)


def _list(title: str, items: list[str]) -> str:
    if not items:
        return ""
    lines = "".join(f"<li>{html.escape(i)}</li>" for i in items)
    return f"<h2>{html.escape(title)}</h2><ul>{lines}</ul>"


def write_report(
    out: Path, run_a: Path, run_b: Path, table: pd.DataFrame, notes: dict[str, list[str]]
) -> tuple[Path, Path]:
    """compare_<A>.csv (the matched rows) and compare_<A>.html in ``out``; returns both paths.

    A plain pandas table, not a notebook like `wirelab report`: the exit code and the page must
    come from one computation, and a CI gate should not wait seconds for a kernel to start."""
    out.mkdir(parents=True, exist_ok=True)
    csv, page = out / f"compare_{run_a.name}.csv", out / f"compare_{run_a.name}.html"
    table.to_csv(csv, index=False)
    sections = [
        f"<h1>wirelab compare: B / A</h1><p>A: {html.escape(str(run_a))}<br>"
        f"B: {html.escape(str(run_b))}</p>",
        "<p>Per condition and figure: each run's mean and 95 % Student's t interval over its "
        "repetitions, the ratio of means B/A and its range (B's interval over A's, far end to "
        "far end; it excludes 1 exactly when the intervals do not overlap). A change is flagged "
        "when the intervals do not overlap; with one repetition only the point ratio is shown "
        "and nothing is flagged.</p>",
        _list("Summary", summary(table)),
        *(_list(title, items) for title, items in notes.items()),
        "<h2>Matched cells</h2>",
        table.to_html(index=False, float_format=lambda x: f"{x:.4g}", na_rep=""),
    ]
    page.write_text("<!doctype html><meta charset='utf-8'><title>wirelab compare</title>"
                    + "\n".join(sections))  # fmt: skip
    return csv, page


def _line(row: pd.Series) -> str:
    """One flagged row as a sentence, for the page and the terminal."""
    cond = _cond([k for k in KEYS if k in row.index], [row[k] for k in KEYS if k in row.index])
    return (
        f"{row['verdict']}: {cond} {row['figure']} B/A {row['ratio']:.3f} "
        f"[{row['ratio_low']:.3f}, {row['ratio_high']:.3f}] "
        f"(A {row['mean_a']:.4g}, n={row['n_a']}; B {row['mean_b']:.4g}, n={row['n_b']})"
    )


def summary(table: pd.DataFrame) -> list[str]:
    """What the terminal shows: the counts, then each flagged change."""
    cells = len(table.drop_duplicates([c for c in table.columns if c in KEYS]))
    counts = table["verdict"].value_counts()
    lines = [f"{cells} matched cells, {len(table)} figures: "
             + ", ".join(f"{n} {v}" for v, n in counts.items())]  # fmt: skip
    flagged = table[table["verdict"].isin([REGRESSION, IMPROVEMENT])]
    return lines + [_line(r) for _, r in flagged.iterrows()]

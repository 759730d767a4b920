"""Generator independence: per kind, whether the gRPC/REST ratio depends on the load generator."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from wirelab.contract import KINDS_BY_PROTOCOL
from wirelab.contract.table import value

from wirelab_bench.medians import decides, median_interval

FILE = "crosscheck.json"
# The kinds both protocols offer that a reference tool drives on both sides, and why not the
# others: upload_json and download_json are REST's alone (no ratio to check).
KINDS = ("unary", "server_stream", "upload", "upload_chunked", "download", "download_chunked")
NO_REFERENCE = {
    "bidi": "its REST side is a WebSocket (/v1/pingpong), which none of wrk, vegeta or h2load "
    "speaks (ghz drives gRPC's PingPong, but a ratio needs both sides)",
}
# A reference pairs a compiled tool on each side; the lab's generators are checked against them.
REFERENCES = ("ghz+wrk", "ghz+vegeta")
NAMES = {
    "ghz+wrk": "ghz / wrk",
    "ghz+vegeta": "ghz / vegeta",
    "loadgen": "wirelab-loadgen",
    "locust": "Locust",
    "bare": "bare Locust",
}
FIGURES = {"ok_per_s": "successful calls/s", "p50_ms": "median latency"}
# Two ratios this close are the same answer however tight their intervals: a 10 % difference
# in a gRPC/REST ratio changes no sentence of the report.
TOLERANCE = 0.10


@dataclass(frozen=True)
class Measured:
    """One run of one generator on one protocol for one kind, in one round."""

    kind: str
    generator: str
    protocol: str
    round: int
    ok_per_s: float
    p50_ms: float
    failed: int = 0


@dataclass(frozen=True)
class Spread:
    """The median of the rounds' gRPC/REST ratios and its distribution-free interval;
    ``coverage`` is the interval's confidence (under 0.95 when the rounds are too few, the
    interval then being their whole range)."""

    value: float
    low: float
    high: float
    rounds: int

    @property
    def coverage(self) -> float:
        return 0.95 if decides(self.rounds) else 1 - 2 / 2**self.rounds

    def text(self) -> str:
        return f"{self.value:.2f} [{self.low:.2f}-{self.high:.2f}]"


def round_ratios(rows: Iterable[Measured], kind: str, generator: str, figure: str) -> list[float]:
    """Each round's gRPC/REST ratio of ``figure``: the two protocols ran back to back in it."""
    by = {
        (r.round, r.protocol): getattr(r, figure)
        for r in rows
        if r.kind == kind and r.generator == generator
    }
    out = []
    for rnd in sorted({r for r, _ in by}):
        rest, grpc = by.get((rnd, "rest")), by.get((rnd, "grpc"))
        if rest and grpc and math.isfinite(grpc / rest):
            out.append(grpc / rest)
    return out


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    low, high = median_interval(list(values))
    return Spread(statistics.median(values), low, high, len(values))


def spreads(rows: Sequence[Measured]) -> dict[tuple[str, str, str], Spread]:
    """(kind, generator, figure) -> the spread of its gRPC/REST ratio, where both sides ran."""
    out = {}
    for kind, generator in dict.fromkeys((r.kind, r.generator) for r in rows):
        for figure in FIGURES:
            found = spread(round_ratios(rows, kind, generator, figure))
            if found is not None:
                out[kind, generator, figure] = found
    return out


def agrees(lab: Spread, references: Sequence[Spread]) -> bool:
    """A generator's ratio agrees with the reference tools' when its interval meets theirs, or
    when it lies within TOLERANCE of one of theirs."""
    low, high = min(r.low for r in references), max(r.high for r in references)
    if lab.low <= high and lab.high >= low:
        return True
    closest = min(abs(math.log(lab.value / r.value)) for r in references)
    return math.exp(closest) - 1 <= TOLERANCE


@dataclass(frozen=True)
class Verdict:
    kind: str
    references: dict[str, dict[str, Spread]]  # generator -> figure -> spread
    others: dict[str, dict[str, Spread]]
    differs: list[tuple[str, str]]  # (generator, figure) whose ratio is not the references'

    @property
    def depends(self) -> bool:
        return bool(self.differs)


def verdicts(rows: Sequence[Measured]) -> dict[str, Verdict]:
    """Per kind the cross-check measured with a reference on both sides: each generator's
    ratios and which of them differ from the reference tools'."""
    found = spreads(rows)
    out = {}
    for kind in dict.fromkeys(k for k, _, _ in found):
        by: dict[str, dict[str, Spread]] = {}
        for (k, generator, figure), s in found.items():
            if k == kind:
                by.setdefault(generator, {})[figure] = s
        refs = {g: f for g, f in by.items() if g in REFERENCES}
        if not refs:
            continue
        others = {g: f for g, f in by.items() if g not in REFERENCES}
        differs = [
            (g, figure)
            for g, figures in others.items()
            for figure, s in figures.items()
            if not agrees(s, [r[figure] for r in refs.values() if figure in r])
        ]
        # Two reference pairs that disagree say the REST tool alone moves the ratio.
        differs += [
            ("references", figure)
            for figure in FIGURES
            if any(
                not agrees(a[figure], [b[figure]])
                for a in refs.values()
                for b in refs.values()
                if figure in a and figure in b and a is not b
            )
        ]
        out[kind] = Verdict(kind, refs, others, differs)
    return out


def _ratios(by: dict[str, dict[str, Spread]]) -> str:
    return "; ".join(
        f"{NAMES.get(g, g)} " + ", ".join(f"{FIGURES[f]} {s.text()}" for f, s in figures.items())
        for g, figures in by.items()
    )


def sentence(verdict: Verdict) -> str:
    """What the report says of one kind the cross-check covered."""
    rounds = min(s.rounds for f in verdict.references.values() for s in f.values())
    coverage = min(s.coverage for f in verdict.references.values() for s in f.values())
    said = (
        f"**{verdict.kind}**: gRPC/REST [interval, {coverage * 100:.0f} % over {rounds} "
        f"rounds] by the reference tools: {_ratios(verdict.references)}"
    )
    if verdict.others:
        said += f"; by the lab's generators: {_ratios(verdict.others)}."
    else:
        said += ". No lab generator ran it in the cross-check."
    if verdict.depends:
        mine = [(g, f) for g, f in verdict.differs if g != "references"]
        which = [f"{NAMES.get(g, g)}'s ratio of {FIGURES[f]}" for g, f in mine]
        which += [
            f"the reference tools' ratios of {FIGURES[f]} among themselves"
            for g, f in verdict.differs
            if g == "references"
        ]
        return (
            f"{said} **The ratio depends on the generator**: {'; '.join(which)} differ (their "
            f"intervals apart and more than {TOLERANCE * 100:.0f} % between them), so this kind's "
            "comparison speaks for the generator that measured it, not for the protocols alone."
        )
    if not verdict.others:
        return f"{said} The reference tools agree with each other."
    return (
        f"{said} The ratio is not shown to depend on the generator: each lab generator's agrees "
        f"with the reference tools' (intervals meeting, or within {TOLERANCE * 100:.0f} %), as "
        "closely as the intervals' width allows."
    )


def uncovered(kind: str, generators: Iterable[str]) -> str:
    """What the report says of a kind of the run that no reference tool covered."""
    names = [NAMES.get(g, g) for g in sorted(set(generators))] or ["Locust"]
    why = NO_REFERENCE.get(kind, "the cross-check did not measure it")
    only = "is the only generator" if len(names) == 1 else "are the only generators"
    return (
        f"**{kind}**: {' and '.join(names)} {only} of this kind's ratio; no reference tool "
        f"drove it: {why}."
    )


def write(path: Path, meta: dict[str, Any], rows: Sequence[Measured]) -> None:
    path.write_text(json.dumps({"meta": meta, "runs": [asdict(r) for r in rows]}, indent=1))


def read(path: Path) -> tuple[dict[str, Any], list[Measured]]:
    data = json.loads(path.read_text())
    return dict(data["meta"]), [Measured(**r) for r in data["runs"]]


def table(rows: Sequence[Measured]) -> list[dict[str, Any]]:
    """One row per kind and generator: each figure's ratio with its interval, and whether it
    agrees with the reference tools'."""
    found = verdicts(rows)
    out = []
    for kind, v in found.items():
        for generator, figures in {**v.references, **v.others}.items():
            row: dict[str, Any] = {"kind": kind, "generator": NAMES.get(generator, generator)}
            for figure, s in figures.items():
                row[f"grpc/rest {FIGURES[figure]}"] = s.text()
            row["agrees"] = (
                "reference"
                if generator in v.references
                else "no"
                if any(g == generator for g, _ in v.differs)
                else "yes"
            )
            out.append(row)
    return out


def find(run_dir: Path, given: str = "") -> Path | None:
    """The cross-check file a report reads: the one given (the notebook's parameter, else
    WIRELAB_REPORT_CROSSCHECK, which `wirelab report --crosscheck` sets), else the results
    folder's own, if it has one."""
    chosen = given or value("WIRELAB_REPORT_CROSSCHECK")
    if chosen:
        return Path(chosen)
    return run_dir / FILE if (run_dir / FILE).is_file() else None


def conditions(meta: dict[str, Any]) -> str:
    """The cross-check's own load and calls, which are not the run's cells'."""
    rate = meta.get("rate") or 0
    load = f"{rate:g} calls/s" if rate > 0 else "closed loop"
    shape = meta.get("shape") or {}
    git = meta.get("git") or {}
    lavg = "-".join(f"{x:.1f}" for x in meta.get("load_average", []))
    return (
        f"`{meta.get('command')}`, {meta.get('started')}, git {git.get('sha')}"
        f"{' (dirty)' if git.get('dirty') else ''}, load average {lavg}: {load} over "
        f"{meta.get('connections')} connections, {meta.get('seconds')} s per run, "
        f"{meta.get('rounds')} rounds; blobs of {shape.get('payload_bytes')} B in chunks of "
        f"{shape.get('chunk_bytes')} B, streams of {shape.get('stream_count')} x "
        f"{shape.get('stream_size')} B"
    )


def report_lines(rows: Sequence[Measured], run_kinds: dict[str, set[str]]) -> list[str]:
    """One sentence per kind: each kind the cross-check covered, then each kind of the run
    (kind -> its generators) both protocols share that it did not."""
    found = verdicts(rows)
    lines = [sentence(v) for v in found.values()]
    shared = set(KINDS_BY_PROTOCOL["rest"]) & set(KINDS_BY_PROTOCOL["grpc"])
    for kind in sorted(run_kinds.keys() & shared - found.keys()):
        lines.append(uncovered(kind, run_kinds[kind]))
    return lines

"""The report's conclusions per kind: each gRPC/REST figure with the 95 % interval it rests on."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from wirelab_bench.intervals import (
    WITHIN_RUN,
    Ratio,
    across_repetitions,
    from_intervals,
    from_samples,
    median_interval,
    per_second_ok,
)
from wirelab_bench.repeatability import across_runs

# A condition is one generator's: Locust's and wirelab-loadgen's timings never mix.
CONDITION = ["generator", "load", "payload_bytes"]
PER_SECOND = f"from each window's per-second successful calls, {WITHIN_RUN}"
FROM_HISTOGRAMS = f"from each window's latency histogram, {WITHIN_RUN}"


def _label(key: tuple[Any, ...]) -> str:
    generator, load, size = key
    by = "" if generator == "locust" else f" ({generator})"
    return f"{load}{f' {int(size)} B' if size else ''}{by}"


def per_rep(frame: pd.DataFrame, column: str, how: str = "mean") -> dict[int, float]:
    """repetition -> ``column`` over the repetition's rows (their mean, or ``how``)."""
    return {int(r): float(v) for r, v in frame.groupby("repetition")[column].agg(how).items()}


def throughput_ratio(rest: pd.DataFrame, grpc: pd.DataFrame, run_dir: Path) -> Ratio | None:
    """gRPC/REST successful calls per second of one condition: across the runs of the
    scenario when the folder holds their repeatability table, else across its repetitions,
    else from the per-second rates Locust recorded in its one window on each protocol."""
    if (runs := across_runs(run_dir, rest, "ok_per_s")) is not None:
        return runs
    across = across_repetitions(per_rep(rest, "ok_per_s"), per_rep(grpc, "ok_per_s"))
    if across is not None or len(rest) != 1 or len(grpc) != 1 or "started_at" not in rest:
        return across
    samples = [
        per_second_ok(
            run_dir / "locust" / f"{row.cell_id}_stats_history.csv", row.started_at, row.window_s
        )
        for row in (rest.iloc[0], grpc.iloc[0])
    ]
    point = float(grpc.ok_per_s.iloc[0] / rest.ok_per_s.iloc[0]) if rest.ok_per_s.iloc[0] else None
    return from_samples(samples[0], samples[1], point, PER_SECOND) if point else None


def latency_ratio(
    rest: pd.DataFrame, grpc: pd.DataFrame, hist: pd.DataFrame, run_dir: Path | None = None
) -> Ratio | None:
    """gRPC/REST median client latency of one condition: across the runs of the scenario when
    ``run_dir`` holds their repeatability table, else across its repetitions, else from the
    two windows' client latency histograms."""
    if run_dir is not None and (runs := across_runs(run_dir, rest, "client_p50_ms")) is not None:
        return runs
    across = across_repetitions(per_rep(rest, "client_p50_ms"), per_rep(grpc, "client_p50_ms"))
    if across is not None or len(rest) != 1 or len(grpc) != 1 or hist.empty:
        return across
    medians = []
    for cell_id in (rest.cell_id.iloc[0], grpc.cell_id.iloc[0]):
        h = hist[(hist.cell_id == cell_id) & (hist.side == "client") & (hist.metric == "duration")]
        cumulative = sorted(zip(h["le"].astype(float), h["count"].astype(float), strict=True))
        medians.append(median_interval(cumulative))
    return from_intervals(medians[0], medians[1], FROM_HISTOGRAMS)


def _tally(found: Sequence[tuple[str, Ratio | None]], higher: str, lower: str, what: str) -> str:
    """The ratios of a kind's conditions, then in how many each protocol came out ahead."""
    shown = [f"{label} {r.text() if r else '(no interval, not compared)'}" for label, r in found]
    measured = [r for _, r in found if r is not None]
    up = sum(1 for r in measured if r.low > 1)
    down = sum(1 for r in measured if r.high < 1)
    bases = "; ".join(dict.fromkeys(r.basis for r in measured)) or "none computed"
    parts = [f"{what}, gRPC/REST [95 % interval]: {', '.join(shown)} (intervals {bases})."]
    if not measured:
        return parts[0] + " Without an interval no protocol is said to be ahead."
    even = len(measured) - up - down
    said = [f"{higher} in {up}"] if up else []
    said += [f"{lower} in {down}"] if down else []
    said += [f"not distinguishable (the interval spans 1) in {even}"] if even else []
    verdict = "; ".join(said)
    unsure = len(found) - len(measured)
    tail = f"; {unsure} without an interval, not compared" if unsure else ""
    return f"{parts[0]} Of {len(measured)} condition(s) with an interval: {verdict}{tail}."


def compare_kind(tidy: pd.DataFrame, kind: str, hist: pd.DataFrame, run_dir: Path) -> str:
    """The conclusions of one interaction kind: every gRPC/REST timing with its interval."""
    part = tidy[tidy.kind == kind]
    rest = part[part.protocol == "rest"].groupby(CONDITION)
    grpc = part[part.protocol == "grpc"].groupby(CONDITION)
    common = sorted(set(rest.groups) & set(grpc.groups))
    if not common:
        only = ", ".join(sorted(part.protocol.unique()))
        return f"**{kind}**: measured on {only} only; nothing to compare."
    pairs = [(_label(k), rest.get_group(k), grpc.get_group(k)) for k in common]
    lines = [f"**{kind}** ({len(common)} condition(s) on both protocols):"]
    # Successful calls only: a protocol answering errors fast must not win on throughput.
    thr = [
        (label, throughput_ratio(r, g, run_dir)) for label, r, g in pairs if _both(r, g, "ok_per_s")
    ]
    if thr:
        what = ("gRPC completed more", "REST completed more", "Successful calls per second")
        lines.append(_tally(thr, *what))
    else:
        lines.append("No condition had successful calls on both protocols.")
    lat = [
        (label, latency_ratio(r, g, hist, run_dir))
        for label, r, g in pairs
        if _both(r, g, "client_p50_ms")
    ]
    if lat:
        lines.append(_tally(lat, "REST's was lower", "gRPC's was lower", "Median client latency"))
    lines += _per_request(pairs)
    errors = part[part["error_pct"] > 0]
    for proto, e in errors.groupby("protocol"):
        reasons = e["gate_reasons"].dropna() if "gate_reasons" in e else pd.Series(dtype=str)
        lines.append(
            f"⚠ {proto} had errors in {len(e)} cell(s), up to {e['error_pct'].max():.1f} % "
            f"({reasons.iloc[0] if len(reasons) else ''})."
        )
    if part["generator_saturated"].any():
        lines.append("Some cells saturated the load generator: treat their throughput as a floor.")
    return " ".join(lines)


def _both(rest: pd.DataFrame, grpc: pd.DataFrame, column: str) -> bool:
    return bool(rest[column].mean() > 0 and grpc[column].mean() > 0)


def _per_request(pairs: list[tuple[str, pd.DataFrame, pd.DataFrame]]) -> list[str]:
    """Server CPU per request (compared across repetitions only: a window gives one figure)
    and body bytes per request (counted, not timed: no interval to compute)."""
    out = []
    cpu = [
        (
            label,
            across_repetitions(per_rep(r, "cpu_s_per_request"), per_rep(g, "cpu_s_per_request")),
        )
        for label, r, g in pairs
        if _both(r, g, "cpu_s_per_request")
    ]
    if any(ratio for _, ratio in cpu):
        out.append(_tally(cpu, "gRPC's was higher", "REST's was higher", "Server CPU per request"))
    elif cpu:
        out.append("Server CPU per request: one figure per window and one repetition, so no "
                   "interval and no comparison (the table above has the figures).")  # fmt: skip
    sizes = [
        float(g.wire_bytes_per_request.mean() / r.wire_bytes_per_request.mean())
        for _, r, g in pairs
        if _both(r, g, "wire_bytes_per_request")
    ]
    if sizes:
        out.append(f"Body bytes per request (counted, not timed), gRPC/REST = "
                   f"{statistics.median(sizes):.2f}.")  # fmt: skip
    return out

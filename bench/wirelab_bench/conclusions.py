"""The report's sentences comparing the protocols, each with the 95 % interval it rests on."""

from __future__ import annotations

import math
import statistics
import tomllib
from collections.abc import Mapping, Sequence
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
    t_interval,
)
from wirelab_bench.scenario import COMPARISON, PIPELINE_CHECK

# A condition is one generator's: Locust's and wirelab-loadgen's timings never mix.
CONDITION = ["generator", "load", "payload_bytes"]
PER_SECOND = f"from each window's per-second successful calls, {WITHIN_RUN}"
# The arms of the HTTP/2 split, in the order its ratios chain: 1.1 -> h2c -> gRPC.
HTTP2_ARMS = ("rest", "rest-h2c", "grpc")
FROM_HISTOGRAMS = f"from each window's latency histogram, {WITHIN_RUN}"


def purpose(manifest: dict[str, Any]) -> str:
    """The run's scenario's declared purpose (scenario key ``purpose``), from the scenario text
    the manifest keeps; a text that no longer parses is taken as a comparison."""
    try:
        found = tomllib.loads(manifest.get("scenario_text") or "").get("purpose", COMPARISON)
    except tomllib.TOMLDecodeError:
        return COMPARISON
    return found if found in (COMPARISON, PIPELINE_CHECK) else COMPARISON


def pipeline_verdict(manifest: dict[str, Any], measured: int) -> str:
    """A pipeline check's one sentence: whether every cell was measured within its gates."""
    planned = manifest.get("cells_planned")
    gates = manifest.get("gates") or {}
    if manifest.get("status") == "complete" and gates.get("passed", False):
        head = f"**Pipeline check passed**: {measured} of {planned} cells measured, all within"
        head += " their gates."
    else:
        failed = gates.get("failed_cells") or []
        why = manifest.get("interrupted") or (f"over a gate: {', '.join(failed)}" if failed else "")
        head = f"**Pipeline check failed**: {measured} of {planned} cells measured ({why})."
    return (
        f"{head} The scenario declares itself a pipeline check: its windows are too short to"
        " compare the protocols, so this report states no comparison."
    )


def _label(key: tuple[Any, ...]) -> str:
    generator, load, size = key
    by = "" if generator == "locust" else f" ({generator})"
    return f"{load}{f' {int(size)} B' if size else ''}{by}"


def _per_rep(frame: pd.DataFrame, column: str) -> dict[int, float]:
    return {int(r): float(v) for r, v in frame.groupby("repetition")[column].mean().items()}


def throughput_ratio(rest: pd.DataFrame, grpc: pd.DataFrame, run_dir: Path) -> Ratio | None:
    """gRPC/REST successful calls per second of one condition: across its repetitions, else
    from the per-second rates Locust recorded in its one window on each protocol."""
    across = across_repetitions(_per_rep(rest, "ok_per_s"), _per_rep(grpc, "ok_per_s"))
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


def latency_ratio(rest: pd.DataFrame, grpc: pd.DataFrame, hist: pd.DataFrame) -> Ratio | None:
    """gRPC/REST median client latency of one condition: across its repetitions, else from
    the two windows' client latency histograms."""
    across = across_repetitions(_per_rep(rest, "client_p50_ms"), _per_rep(grpc, "client_p50_ms"))
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
        (label, latency_ratio(r, g, hist)) for label, r, g in pairs if _both(r, g, "client_p50_ms")
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
            across_repetitions(_per_rep(r, "cpu_s_per_request"), _per_rep(g, "cpu_s_per_request")),
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


def verdict(ratio: Ratio | None, holds_above_one: bool) -> str:
    """How a published claim about gRPC/REST fares in this run, by the ratio's interval."""
    if ratio is None:
        return "cannot be checked (no interval could be computed)"
    if ratio.spans_one:
        return "is not distinguishable (the interval spans 1)"
    return "holds" if (ratio.low > 1) == holds_above_one else "does not hold"


def stated(ratio: Ratio | None) -> str:
    """The ratio with its interval and basis, or why there is none."""
    if ratio is None:
        return "no interval: one repetition and no within-run samples"
    return f"gRPC/REST {ratio.text()}, 95 % interval {ratio.basis}"


def confirmed_orders(high: pd.DataFrame, run_dir: Path, study: float, study_amqp: float) -> str:
    """The order-chain study's claim, gRPC confirming ``study`` x REST's orders (and
    ``study_amqp`` x the AMQP arm's) at high load, against the rows of this run's highest load:
    each ratio with its interval. Confirmed = the orders Locust counted ok: answered, and within
    the failure threshold."""
    users = int(high.users.max())
    ok = (high.requests - high.errors).groupby(high.protocol).mean()
    grpc = high[high.protocol == "grpc"]

    def lead(arm: str, name: str) -> str:
        if ok[arm] <= 0:
            return f"{name} confirmed none, so there is no finite ratio"
        ratio = throughput_ratio(high[high.protocol == arm], grpc, run_dir)
        return (
            f"that gRPC confirms more {verdict(ratio, True)}: "
            f"{stated(ratio).replace('gRPC/REST', f'gRPC/{name}')}"
        )

    text = (
        f"*gRPC confirmed {study}x REST's orders at high load* (order-chain study): here, at "
        f"{users} users, {lead('rest', 'REST')} — gRPC {ok['grpc']:.0f}, REST {ok['rest']:.0f} "
        "orders confirmed per window (answered within the threshold)."
    )
    if "amqp" in ok:
        text += (
            f" *And {study_amqp}x the AMQP arm's*: here {lead('amqp', 'AMQP')} — AMQP "
            f"{ok['amqp']:.0f} orders confirmed per window."
        )
    return text


def http2_split(unary: pd.DataFrame, names: Mapping[str, str]) -> list[str]:
    """Per generator and load where REST over 1.1, REST over h2c and gRPC all ran, the mean
    latency's three ratios with their intervals across repetitions, and which of HTTP/2 alone
    (h2c / 1.1) and protobuf with gRPC's stack (gRPC / h2c) moves it more: the larger change in
    either direction, by a t interval on the repetitions' |log h2c/1.1| - |log gRPC/h2c|."""
    out = []
    for (generator, load), part in unary.groupby(["generator", "load"]):
        arms = [_per_rep(part[part.protocol == p], "client_mean_ms") for p in HTTP2_ARMS]
        if not all(arms):
            continue
        rest, h2c, grpc = arms
        who = f"{names.get(str(generator), generator)}, load {load}"
        alone, stack = across_repetitions(rest, h2c), across_repetitions(h2c, grpc)
        whole = across_repetitions(rest, grpc)
        reps = sorted(set(rest) & set(h2c) & set(grpc))
        if alone is None or stack is None or whole is None:
            why = "one repetition" if len(reps) < 2 else "figures missing in some repetitions"
            out.append(f"{who}: {why}, so no interval and no split of the mean latency is "
                       "stated (the table above has the point ratios).")  # fmt: skip
            continue
        gap = [abs(math.log(h2c[r] / rest[r])) - abs(math.log(grpc[r] / h2c[r])) for r in reps]
        mean, half = t_interval(gap)
        bigger = (
            "HTTP/2 itself moves it more" if mean - half > 0
            else "protobuf with gRPC's stack moves it more" if mean + half < 0
            else "neither moves it distinguishably more"
        )  # fmt: skip
        out.append(
            f"{who}: mean latency times {alone.text()} from HTTP/2 alone, times {stack.text()} "
            f"from protobuf and gRPC's stack (times {whole.text()} in all; 95 % intervals "
            f"{alone.basis}): {bigger}."
        )
    return out

"""How the report weighs published claims, the HTTP/2 split and a pipeline check's run."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from wirelab_bench.conclusions import per_rep, throughput_ratio
from wirelab_bench.intervals import Ratio, across_repetitions, t_interval
from wirelab_bench.scenario import COMPARISON, PURPOSES

# The arms of the HTTP/2 split, in the order its ratios chain: 1.1 -> h2c -> gRPC.
HTTP2_ARMS = ("rest", "rest-h2c", "grpc")


def purpose(manifest: dict[str, Any]) -> str:
    """The run's scenario's declared purpose (scenario key ``purpose``), from the scenario text
    the manifest keeps; a text that no longer parses is taken as a comparison."""
    try:
        found = tomllib.loads(manifest.get("scenario_text") or "").get("purpose", COMPARISON)
    except tomllib.TOMLDecodeError:
        return COMPARISON
    return found if found in PURPOSES else COMPARISON


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
        arms = [per_rep(part[part.protocol == p], "client_mean_ms") for p in HTTP2_ARMS]
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

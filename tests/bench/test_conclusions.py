"""The report's comparison sentences carry the interval they rest on; a pipeline check has none."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from wirelab_bench.claims import (
    confirmed_orders,
    http2_split,
    pipeline_verdict,
    purpose,
    stated,
    verdict,
)
from wirelab_bench.conclusions import compare_kind, throughput_ratio
from wirelab_bench.intervals import (
    across_repetitions,
    from_intervals,
    from_samples,
    median_interval,
    per_second_ok,
)
from wirelab_bench.knobs import REPO
from wirelab_bench.scenario_file import ScenarioError, load_scenario

START = 1_800_000_000.0
WINDOW_S = 30.0


def cell(protocol: str, ok_per_s: float, rep: int = 0, **extra: Any) -> dict[str, Any]:
    """A tidy row as far as the conclusions read it (a unary cell of one load)."""
    return {
        "cell_id": f"{rep:03d}_{protocol}_unary_u10_0b_r{rep}",
        "kind": "unary",
        "protocol": protocol,
        "generator": "locust",
        "load": "u10",
        "users": 10,
        "payload_bytes": 0,
        "repetition": rep,
        "started_at": START + 100 * rep + (50 if protocol == "grpc" else 0),
        "window_s": WINDOW_S,
        "ok_per_s": ok_per_s,
        "client_p50_ms": 10.0,
        "cpu_s_per_request": math.nan,
        "wire_bytes_per_request": 200.0 if protocol == "rest" else 120.0,
        "error_pct": 0.0,
        "generator_saturated": False,
        "gate_reasons": "",
        **extra,
    }


def history(run: Path, row: dict[str, Any], per_second: list[float]) -> None:
    """Locust's stats history of ``row``'s cell: one cumulative Aggregated row a second, from
    5 s before its window (the warm-up) to its end, with a named row beside each."""
    rows, total = [], 0.0
    t0 = int(row["started_at"]) - 5
    warmup = [per_second[0]] * 5
    for i, count in enumerate([*warmup, *per_second]):
        total += count
        for name in ("Order", "Aggregated"):
            rows.append({"Timestamp": t0 + i + 1, "User Count": 10, "Type": "", "Name": name,
                         "Total Request Count": total, "Total Failure Count": 0})  # fmt: skip
    (run / "locust").mkdir(exist_ok=True)
    pd.DataFrame(rows).to_csv(run / "locust" / f"{row['cell_id']}_stats_history.csv", index=False)


def noisy(mean: float, sd: float, n: int = int(WINDOW_S), seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [max(0.0, rng.gauss(mean, sd)) for _ in range(n)]


def histogram(cell_id: str, counts: dict[float, float]) -> list[dict[str, Any]]:
    """A cell's cumulative client latency buckets (upper bounds in seconds)."""
    rows, total = [], 0.0
    for le in sorted(counts):
        total += counts[le]
        rows.append({"cell_id": cell_id, "side": "client", "metric": "duration", "le": le,
                     "count": total})  # fmt: skip
    return rows


NO_HIST = pd.DataFrame(columns=["cell_id", "side", "metric", "le", "count"])


def test_one_repetition_states_the_ratio_with_its_within_run_interval(tmp_path: Path) -> None:
    # Guards against: "REST completed more successful calls per second — 4.37x" from one run
    # of short windows, with nothing to say how sure it was.
    rest, grpc = cell("rest", 400.0), cell("grpc", 92.0)
    history(tmp_path, rest, noisy(400, 20))
    history(tmp_path, grpc, noisy(92, 10, seed=2))
    text = compare_kind(pd.DataFrame([rest, grpc]), "unary", NO_HIST, tmp_path)
    assert "Successful calls per second, gRPC/REST [95 % interval]: u10 0.23 [0.2" in text
    assert "Of 1 condition(s) with an interval: REST completed more in 1." in text
    assert "from each window's per-second successful calls" in text
    assert "the spread from run to run is not in it" in text
    assert "4.3" not in text and "x in the median" not in text


def test_an_interval_spanning_one_says_not_distinguishable(tmp_path: Path) -> None:
    rest, grpc = cell("rest", 100.0), cell("grpc", 104.0)
    history(tmp_path, rest, noisy(100, 30))
    history(tmp_path, grpc, noisy(104, 30, seed=3))
    text = compare_kind(pd.DataFrame([rest, grpc]), "unary", NO_HIST, tmp_path)
    assert "with an interval: not distinguishable (the interval spans 1) in 1." in text
    assert "completed more in" not in text


def test_without_samples_or_repetitions_no_protocol_is_said_to_be_ahead(tmp_path: Path) -> None:
    # Windows too short for two per-second samples (smoke's 1.5 s), one repetition.
    rest, grpc = cell("rest", 400.0), cell("grpc", 92.0)
    text = compare_kind(pd.DataFrame([rest, grpc]), "unary", NO_HIST, tmp_path)
    assert "u10 (no interval, not compared)" in text
    assert "Without an interval no protocol is said to be ahead." in text
    assert "completed more" not in text and "lower in" not in text


def test_repetitions_give_the_interval_of_their_paired_ratios(tmp_path: Path) -> None:
    rows = [cell(p, v, rep) for rep, (r, g) in enumerate([(100, 150), (110, 160), (90, 140)])
            for p, v in (("rest", r), ("grpc", g))]  # fmt: skip
    text = compare_kind(pd.DataFrame(rows), "unary", NO_HIST, tmp_path)
    assert "across 3 repetitions" in text
    assert "with an interval: gRPC completed more in 1." in text


def test_median_latency_from_one_windows_histograms(tmp_path: Path) -> None:
    rest, grpc = cell("rest", 100.0, client_p50_ms=4.0), cell("grpc", 100.0, client_p50_ms=8.0)
    hist = pd.DataFrame(
        histogram(rest["cell_id"], {0.002: 100, 0.005: 800, 0.01: 100, math.inf: 0})
        + histogram(grpc["cell_id"], {0.005: 100, 0.01: 800, 0.02: 100, math.inf: 0})
    )
    text = compare_kind(pd.DataFrame([rest, grpc]), "unary", hist, tmp_path)
    assert "Median client latency, gRPC/REST [95 % interval]: u10 " in text
    assert "with an interval: REST's was lower in 1." in text
    assert "from each window's latency histogram" in text


def test_cpu_per_request_is_not_compared_from_one_figure_a_window(tmp_path: Path) -> None:
    rows = [
        cell("rest", 100.0, cpu_s_per_request=0.002),
        cell("grpc", 100.0, cpu_s_per_request=0.001),
    ]
    text = compare_kind(pd.DataFrame(rows), "unary", NO_HIST, tmp_path)
    assert "Server CPU per request: one figure per window and one repetition" in text
    assert "Server CPU per request, gRPC/REST = " not in text


def test_across_repetitions_is_a_t_interval_on_log_ratios() -> None:
    r = across_repetitions({0: 100, 1: 100, 2: 100}, {0: 150, 1: 200, 2: 250})
    assert r is not None
    logs = [math.log(x) for x in (1.5, 2.0, 2.5)]
    assert r.value == pytest.approx(math.exp(sum(logs) / 3))
    assert r.low < 1.5 and r.high > 2.5 and r.basis == "across 3 repetitions"
    assert across_repetitions({0: 100}, {0: 150}) is None
    # A repetition in which one side answered nothing has no ratio: it is left out.
    assert across_repetitions({0: 0, 1: 100}, {0: 5, 1: 150}) is None


def test_from_samples_narrows_as_samples_grow() -> None:
    wide = from_samples(noisy(100, 20, 10), noisy(200, 20, 10, seed=2))
    narrow = from_samples(noisy(100, 20, 1000), noisy(200, 20, 1000, seed=2))
    assert wide is not None and narrow is not None
    assert narrow.high - narrow.low < (wide.high - wide.low) / 5
    assert narrow.low < 2.0 < narrow.high
    assert from_samples([100.0], [200.0, 210.0]) is None


def test_median_interval_holds_the_median_and_shrinks_with_calls() -> None:
    few = median_interval([(0.01, 5.0), (0.02, 10.0)])
    many = median_interval([(0.01, 5000.0), (0.02, 10000.0)])
    assert few[1] <= few[0] <= few[2] and many[1] <= many[0] <= many[2]
    assert many[2] - many[1] < few[2] - few[1]
    ratio = from_intervals(few, many, "b")
    assert ratio is not None and ratio.low < 1 < ratio.high


def test_per_second_ok_reads_the_window_only(tmp_path: Path) -> None:
    row = cell("rest", 10.0)
    history(tmp_path, row, [float(i) for i in range(10, 40)])
    path = tmp_path / "locust" / f"{row['cell_id']}_stats_history.csv"
    got = per_second_ok(path, row["started_at"], row["window_s"])
    assert got == [float(i) for i in range(11, 40)]  # the warm-up's seconds left out
    assert per_second_ok(tmp_path / "missing.csv", 0, 1) == []


def test_throughput_ratio_takes_the_tidy_figure_as_its_point(tmp_path: Path) -> None:
    rest, grpc = cell("rest", 50.0), cell("grpc", 100.0)
    history(tmp_path, rest, noisy(40, 4))  # Locust counts calls its own way: only the spread
    history(tmp_path, grpc, noisy(90, 9, seed=2))
    ratio = throughput_ratio(pd.DataFrame([rest]), pd.DataFrame([grpc]), tmp_path)
    assert ratio is not None and ratio.value == pytest.approx(2.0) and ratio.low > 1


def test_claim_verdicts_follow_the_interval() -> None:
    high = across_repetitions({0: 1, 1: 1}, {0: 2, 1: 2.1})
    even = across_repetitions({0: 1, 1: 1}, {0: 0.5, 1: 2.0})
    assert verdict(high, True) == "holds" and verdict(high, False) == "does not hold"
    assert verdict(even, True).startswith("is not distinguishable")
    assert verdict(None, True).startswith("cannot be checked")
    assert "95 % interval across 2 repetitions" in stated(high)


def test_smoke_declares_itself_a_pipeline_check() -> None:
    smoke = REPO / "scenarios" / "smoke.toml"
    assert load_scenario(smoke).purpose == "pipeline-check"
    assert load_scenario(REPO / "scenarios" / "quick.toml").purpose == "comparison"
    assert purpose({"scenario_text": smoke.read_text()}) == "pipeline-check"
    assert purpose({"scenario_text": "kinds = ["}) == "comparison"  # unreadable: a comparison


def test_an_unknown_purpose_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('purpose = "demo"\nkinds = ["unary"]\nloads = [{users = 1}]\n')
    with pytest.raises(ScenarioError, match="unknown purpose 'demo'"):
        load_scenario(path)


def test_the_pipeline_verdict_says_passed_or_what_failed() -> None:
    ok = {"status": "complete", "cells_planned": 16, "gates": {"passed": True}}
    assert pipeline_verdict(ok, 16).startswith("**Pipeline check passed**: 16 of 16 cells")
    assert "states no comparison" in pipeline_verdict(ok, 16)
    over = {**ok, "gates": {"passed": False, "failed_cells": ["003_rest_bidi"]}}
    assert "**Pipeline check failed**" in pipeline_verdict(over, 16)
    assert "003_rest_bidi" in pipeline_verdict(over, 16)
    cut = {"status": "incomplete", "cells_planned": 16, "interrupted": {"reason": "SIGTERM"}}
    assert "SIGTERM" in pipeline_verdict(cut, 3)


def chain(protocol: str, rep: int, confirmed: float) -> dict[str, Any]:
    """An order-chain cell at 300 users: Locust counted ``confirmed`` orders ok in its window."""
    row = cell(protocol, confirmed / WINDOW_S, rep, users=300, load="u300")
    return row | {"requests": confirmed + 10, "errors": 10}


def test_the_order_chain_claim_carries_its_interval_across_repetitions(tmp_path: Path) -> None:
    # Guards against: "gRPC confirmed 4.8x REST's orders at high load (order-chain study):
    # here infx at 300 users", a point figure beside the study's.
    rows = [chain("grpc", 0, 2880), chain("rest", 0, 600), chain("grpc", 1, 3000),
            chain("rest", 1, 660)]  # fmt: skip
    text = confirmed_orders(pd.DataFrame(rows), tmp_path, 4.8, 2.02)
    assert text.startswith("*gRPC confirmed 4.8x REST's orders at high load* (order-chain study)")
    assert "at 300 users, that gRPC confirms more holds: gRPC/REST 4.67 [3.30-6.60]" in text
    assert "95 % interval across 2 repetitions" in text
    assert "gRPC 2940, REST 630 orders confirmed per window" in text


def test_an_arm_that_confirmed_nothing_gets_no_ratio(tmp_path: Path) -> None:
    rows = [chain("grpc", 0, 2880), chain("rest", 0, 0), chain("amqp", 0, 7)]
    text = confirmed_orders(pd.DataFrame(rows), tmp_path, 4.8, 2.02)
    assert "REST confirmed none, so there is no finite ratio" in text and "inf" not in text
    # One repetition, no per-second history: the AMQP arm's lead is not stated either.
    assert "*And 2.02x the AMQP arm's*: here that gRPC confirms more cannot be checked" in text


def http2_cells(means: list[tuple[float, float, float]]) -> pd.DataFrame:
    """Unary cells of REST over 1.1, REST over h2c and gRPC at one load, a repetition a tuple."""
    rows = []
    for rep, arms in enumerate(means):
        for protocol, mean in zip(("rest", "rest-h2c", "grpc"), arms, strict=True):
            rows.append(cell(protocol, 100.0, rep, generator="loadgen", client_mean_ms=mean))
    return pd.DataFrame(rows)


def test_the_http2_split_names_the_larger_effect_only_with_an_interval() -> None:
    names = {"loadgen": "wirelab-loadgen (precise)"}
    # h2c halves the latency every time; gRPC's stack takes off a tenth: HTTP/2 is the larger.
    clear = http2_split(http2_cells([(2.0, 1.0, 0.9), (2.1, 1.0, 0.91), (1.9, 1.0, 0.89)]), names)
    assert clear[0].startswith("wirelab-loadgen (precise), load u10: mean latency times 0.50 [")
    assert "95 % intervals across 3 repetitions): HTTP/2 itself moves it more." in clear[0]
    # Which is larger changes from repetition to repetition: neither is said to be.
    mixed = http2_split(http2_cells([(2.0, 1.0, 0.5), (1.2, 1.0, 0.9), (2.0, 1.0, 0.6)]), names)
    assert mixed[0].endswith("neither moves it distinguishably more.")
    one = http2_split(http2_cells([(2.0, 1.0, 0.9)]), names)
    assert one == [
        "wirelab-loadgen (precise), load u10: one repetition, so no interval and no split of the"
        " mean latency is stated (the table above has the point ratios)."
    ]

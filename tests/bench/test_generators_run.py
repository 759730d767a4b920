"""The runner driving both generators over real service processes: wirelab-loadgen's cells have
the same columns as Locust's, its client counts agree with the server's, and the report leads
small-call latency with its figures."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from wirelab_bench.report import render

from tests.bench.lab import Services, bench, require_loadgen

pytestmark = pytest.mark.integration

BOTH = """
description = "integration test: the small call under each generator"
warmup_s = 0.5
duration_s = 2
cooldown_s = 0
kinds = ["unary"]
loads = [{ label = "two", users = 2 }, { label = "paced", users = 4, rate = 100 }]

[[groups]]
name = "precise"
generator = "loadgen"
# One worker cannot start 3,000 calls a second: the open loop drops what finds it busy.
loads = [
  { label = "two", users = 2 },
  { label = "paced", users = 4, rate = 100 },
  { label = "over", users = 1, rate = 3000 },
]

[[groups]]
name = "locust"
"""


@pytest.fixture(scope="module")
def finished(services: Services, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    require_loadgen()
    return bench(services, tmp_path_factory.mktemp("generators"), "both", BOTH)


def test_loadgen_cells_have_locusts_columns_and_agree_with_the_server(
    finished: tuple[int, Path],
) -> None:
    code, run = finished
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == 0 and manifest["status"] == "complete", manifest.get("gates")
    tidy = pd.read_csv(run / "tidy.csv")
    assert sorted(tidy.generator.unique()) == ["loadgen", "locust"] and len(tidy) == 10
    precise = tidy[(tidy.generator == "loadgen") & (tidy.load != "over")]
    assert set(precise.client_source) == {"scrape"} and (precise.error_pct == 0).all()
    assert precise.client_p50_ms.notna().all() and precise.client_p99_ms.notna().all()
    # Both ends count the same calls over the window, give or take those in flight at its ends.
    ratio = precise.requests / (precise.server_requests_per_s * precise.window_s)
    assert ratio.between(0.9, 1.1).all(), ratio
    # A paced cell answers what its schedule started in the window: the offered rate less what a
    # loaded machine made it drop (keeping time is a benchmark's question, not this test's).
    paced = precise[precise.load == "paced"]
    started = (paced.scheduled - paced.dropped) / paced.window_s
    assert (paced.requests_per_s / started).between(0.8, 1.2).all(), (paced.requests_per_s, started)
    assert (precise.request_bytes_per_request > 0).all()
    assert precise.generator_cpu_ratio.between(0, 1, inclusive="neither").all()
    for cell in precise.cell_id:
        assert cell.endswith(("_loadgen_r0",)), cell
        summary = json.loads((run / "locust" / f"{cell}.summary.json").read_text())
        assert summary["answered"] > 0 and summary["failed"] == 0


def test_open_loop_cells_account_for_their_schedule(finished: tuple[int, Path]) -> None:
    _, run = finished
    tidy = pd.read_csv(run / "tidy.csv")
    open_loop = tidy[(tidy.generator == "loadgen") & tidy.target_rate.notna()]
    assert set(open_loop.arrivals) == {"constant"} and len(open_loop) == 4
    for row in open_loop.itertuples():
        summary = json.loads((run / "locust" / f"{row.cell_id}.summary.json").read_text())
        # The row's counts are the measured window's (2 s after a 0.5 s warm-up), not the run's.
        window = summary["window"]
        assert (window["from_s"], window["to_s"]) == (0.5, 2.5)
        assert window["scheduled"] == 2 * row.target_rate < summary["scheduled"]
        assert (row.scheduled, row.dropped) == (window["scheduled"], window["dropped"])
        assert window["dropped"] <= summary["dropped"]
        assert row.dropped_pct == pytest.approx(100 * row.dropped / row.scheduled)
        assert row.start_lag_p99_ms == window["start_lag_ms"]["p99"] >= 0
    # Paced or past the service, the schedule says what it dropped; only the overload must drop
    # (a paced cell drops nothing on an idle machine, some on a loaded one: not asserted).
    over = open_loop[open_loop.load == "over"]
    assert (over.dropped > 0).all() and not over.on_time.astype(bool).any()
    # Closed loops keep no schedule: their schedule columns are empty, not zero.
    closed = tidy[tidy.target_rate.isna() | (tidy.generator == "locust")]
    assert closed.scheduled.isna().all() and closed.on_time.isna().all()


def test_the_report_leads_small_call_latency_with_the_precise_generator(
    finished: tuple[int, Path],
) -> None:
    _, run = finished
    text = render(run).read_text()
    assert "gRPC/REST median latency, per generator" in text
    assert "timed by wirelab-loadgen (precise)" in text and "Locust timed REST" in text
    assert "Knee, rest:" in text and "Knee, grpc:" in text
    assert (run / "openloop_knee.png").stat().st_size > 10_000
    nb = json.loads((run / "report.ipynb").read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors

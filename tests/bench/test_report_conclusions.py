"""The report notebook on synthetic results folders: a pipeline check states no comparison, a
comparison run states each ratio with its interval."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from wirelab_bench import independence
from wirelab_bench.cell import histogram_rows
from wirelab_bench.cli import main
from wirelab_bench.histo import Snapshot
from wirelab_bench.independence import Measured
from wirelab_bench.knobs import REPO
from wirelab_bench.promql import aggregate
from wirelab_bench.report import render
from wirelab_bench.results import write_tables
from wirelab_bench.scenario_file import load_scenario
from wirelab_bench.tidy import Window, build_row

pytestmark = pytest.mark.integration  # the notebook runs in a kernel process

START = 1_800_000_000.0
BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, float("inf"))


def client_snapshot(protocol: str, kind: str, calls: float, median_s: float) -> Snapshot:
    """What the runner reads from the generator's exporter over a window, as test_tidy builds it."""
    labels = {"job": "locust", "protocol": protocol, "kind": kind, "outcome": "ok"}
    samples = [
        ("wirelab_client_requests_total", labels, calls),
        ("wirelab_client_request_duration_seconds_sum", labels, calls * median_s),
    ]
    for le in BOUNDS:
        share = 1.0 if le >= 2 * median_s else 0.5 if le >= median_s else 0.0
        bucket = {**labels, "le": "+Inf" if le == float("inf") else str(le)}
        samples.append(("wirelab_client_request_duration_seconds_bucket", bucket, share * calls))
    return aggregate(samples)


def server_snapshot(protocol: str, kind: str, calls: float) -> Snapshot:
    """The service's own counts over the window: its calls and their bodies (JSON larger)."""
    labels = {"job": protocol, "protocol": protocol, "kind": kind}
    size = 200.0 if protocol == "rest" else 120.0
    return aggregate(
        [
            ("wirelab_server_requests_total", {**labels, "outcome": "ok"}, calls),
            ("wirelab_server_request_bytes_sum", labels, size * calls),
            ("wirelab_server_request_bytes_count", labels, calls),
            ("wirelab_server_response_bytes_sum", labels, size * calls),
            ("wirelab_server_response_bytes_count", labels, calls),
        ]
    )


def folder(root: Path, scenario: Path, window_s: float, rate: dict[str, float]) -> Path:
    """A complete run of ``scenario``'s cells, each a window of ``window_s`` at the protocol's
    ``rate`` with Locust's per-second history beside it."""
    run = root / f"20261128T000000Z_{scenario.stem}"
    (run / "locust").mkdir(parents=True)
    rows, hist = [], []
    rng = random.Random(7)
    parsed = load_scenario(scenario)
    for i, cell in enumerate(parsed.cells()):
        started = START + 100 * i
        calls = rate[cell.protocol] * window_s
        client = client_snapshot(cell.protocol, cell.kind, calls, 0.004)
        server = server_snapshot(cell.protocol, cell.kind, calls)
        sources = {"client": "scrape", "server": "scrape"}
        window = Window(cell, started, window_s, server=server, client=client, sources=sources)
        rows.append(build_row(window, parsed.gates, parsed.topology))
        hist += histogram_rows(window)
        total, history = 0.0, []
        for t in range(int(started) - 2, int(started + window_s) + 1):
            total += max(0.0, rng.gauss(rate[cell.protocol], 0.05 * rate[cell.protocol]))
            history.append({"Timestamp": t, "Name": "Aggregated", "Total Request Count": total,
                            "Total Failure Count": 0})  # fmt: skip
        pd.DataFrame(history).to_csv(run / "locust" / f"{cell.cell_id}_stats_history.csv")
    write_tables(run, rows, hist)
    manifest: dict[str, Any] = {
        "scenario": scenario.stem,
        "scenario_file": str(scenario),
        "scenario_text": scenario.read_text(),
        "status": "complete",
        "cells_planned": len(rows),
        "cells_done": [r["cell_id"] for r in rows],
        "gates": {"passed": True, "failed_cells": []},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def said(run: Path) -> str:
    nb = json.loads((run / "report.ipynb").read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, errors
    return "\n".join(
        "".join(o.get("data", {}).get("text/markdown", ""))
        for c in nb["cells"]
        for o in c.get("outputs", [])
    )


def test_a_smoke_report_says_pipeline_check_passed_and_compares_nothing(tmp_path: Path) -> None:
    # Guards against: smoke's report said "upload_chunked: REST completed more successful calls
    # per second — 4.37x" from 1.5 s windows.
    run = folder(tmp_path, REPO / "scenarios" / "smoke.toml", 1.5, {"rest": 400, "grpc": 92})
    render(run)
    text = said(run)
    assert "**Pipeline check passed**: 16 of 16 cells measured" in text
    assert "completed more" not in text and "gRPC/REST" not in text and " bytes vs " not in text
    assert "Published claims" not in text


def test_a_comparison_report_gives_each_ratio_its_interval(tmp_path: Path) -> None:
    scenario = tmp_path / "one.toml"
    scenario.write_text(
        'kinds = ["unary", "download"]\nloads = [{users = 10}]\npayload_sizes = [1024]\n'
        "warmup_s = 1\nduration_s = 20\ncooldown_s = 0\n"
    )
    run = folder(tmp_path, scenario, 20.0, {"rest": 400, "grpc": 92})
    render(run)
    text = said(run)
    assert "Pipeline check" not in text
    assert "Successful calls per second, gRPC/REST [95 % interval]: u10 0.23 [" in text
    assert "Of 1 condition(s) with an interval: REST completed more in 1." in text
    assert "the spread from run to run is not in it" in text
    assert "*gRPC has higher throughput* (IIT, order-chain studies): does not hold" in text
    assert "No cross-check file: whether a kind's gRPC/REST ratio depends on the generator" in text


def test_a_report_with_a_cross_check_says_per_kind_whether_the_generator_decides(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "one.toml"
    scenario.write_text(
        'kinds = ["unary", "bidi"]\nloads = [{users = 10}]\n'
        "warmup_s = 1\nduration_s = 5\ncooldown_s = 0\n"
    )
    run = folder(tmp_path, scenario, 5.0, {"rest": 400, "grpc": 92})
    rows = [
        Measured("unary", generator, protocol, rnd, ok, 1.0)
        for rnd in range(3)
        for generator, grpc in (("ghz+wrk", 0.5), ("locust", 0.9))
        for protocol, ok in (("rest", 1000.0), ("grpc", 1000.0 * grpc))
    ]
    cross = tmp_path / "elsewhere.json"
    independence.write(cross, {"command": "wirelab perf crosscheck", "rounds": 3}, rows)
    assert main(["report", str(run), "--crosscheck", str(cross)]) == 0
    text = said(run)
    assert "Cross-check `elsewhere.json`: `wirelab perf crosscheck`" in text
    assert "**unary**: gRPC/REST [interval, 75 % over 3 rounds] by the reference tools" in text
    assert "**The ratio depends on the generator**: Locust's ratio of successful calls/s" in text
    assert "**bidi**: Locust is the only generator of this kind's ratio" in text


def test_a_report_beside_a_repeatability_table_states_the_spread_over_runs(tmp_path: Path) -> None:
    scenario = tmp_path / "one.toml"
    scenario.write_text(
        'kinds = ["unary"]\nloads = [{users = 10}]\npayload_sizes = [1024]\n'
        "warmup_s = 1\nduration_s = 5\ncooldown_s = 0\n"
    )
    rates = [(400, 92), (420, 100), (380, 90)]
    runs = [folder(tmp_path / f"{i}", scenario, 5.0, {"rest": r, "grpc": g})
            for i, (r, g) in enumerate(rates)]  # fmt: skip
    assert main(["repeatability", *map(str, runs)]) == 0
    render(runs[-1])
    text = said(runs[-1])
    assert "Run to run (repeatability.html):" in text
    assert "- unary u10: successful calls/s gRPC/REST 0.235 [0.224-0.246], CV 1.9 % over 3" in text
    assert "u10 0.23 [0.22-0.25] (intervals across 3 runs of this scenario" in text

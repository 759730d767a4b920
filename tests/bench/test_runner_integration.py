"""The runner against real service processes with a tiny scenario, then the report on its output."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from wirelab_bench.report import render

from tests.bench.lab import Services, bench

pytestmark = pytest.mark.integration

# Labelled like the IIT workloads so the notebook's two IIT tables are built from real numbers.
TINY = """
description = "integration test: seconds per cell"
warmup_s = 0.5
duration_s = 1.2
cooldown_s = 0
loads = [{ label = "light", users = 1 }, { label = "medium", users = 2 }]
payload_sizes = [4096]
stream_count = 3

[gates]
max_error_ratio = 0.0

[[groups]]
name = "request_response"
kinds = ["unary"]

[[groups]]
name = "large_payload"
kinds = ["download"]
loads = [{ label = "light", users = 1 }]

[[groups]]
name = "streaming"
kinds = ["server_stream"]
loads = [{ label = "light", users = 1 }]
"""
LONG = TINY.replace("duration_s = 1.2", "duration_s = 3")


@pytest.fixture(scope="module")
def finished(services: Services, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    return bench(services, tmp_path_factory.mktemp("bench"), "tiny", TINY)


def test_folder_layout_and_manifest(finished: tuple[int, Path]) -> None:
    code, run = finished
    assert run.name.endswith("_tiny")
    for name in ("manifest.json", "tidy.csv", "tidy.parquet", "histograms.csv"):
        assert (run / name).is_file(), name
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["cells_done"] and len(manifest["cells_done"]) == manifest["cells_planned"] == 8
    assert len(manifest["git"]["sha"]) == 40 and isinstance(manifest["git"]["dirty"], bool)
    assert manifest["host"]["cpu_count"] >= 1 and manifest["host"]["kernel"]
    assert len(manifest["packages"]["lock_sha256"]) == 64
    assert manifest["packages"]["installed"]["locust"] == "2.47.0"
    assert "docker" in manifest and "version" in manifest["docker"]
    assert manifest["knobs"]["prometheus_url"] == ""
    assert "containers" in manifest["missing"]  # no Prometheus: the reason is recorded
    assert manifest["parity"] == ["unary", "upload", "download", "server_stream"]
    assert code == manifest["exit_code"] == 0, manifest.get("gates")
    for cell in manifest["cells_done"]:
        assert (run / "locust" / f"{cell}_stats.csv").is_file()


def test_tidy_table_has_sane_values(finished: tuple[int, Path]) -> None:
    _, run = finished
    tidy = pd.read_csv(run / "tidy.csv")
    assert pd.read_parquet(run / "tidy.parquet").shape == tidy.shape == (8, tidy.shape[1])
    assert set(tidy.protocol) == {"rest", "grpc"}
    assert (tidy.requests > 0).all()
    assert (tidy.error_pct == 0).all()
    for side in ("client", "server"):
        p = tidy[[f"{side}_p50_ms", f"{side}_p99_ms", f"{side}_p999_ms"]]
        assert (p.notna().all(axis=1)).all(), side
        assert (p[f"{side}_p50_ms"] <= p[f"{side}_p99_ms"]).all()
        assert (p[f"{side}_p99_ms"] <= p[f"{side}_p999_ms"]).all()
    # The client sees the whole call, the server only its part of it.
    assert (tidy.client_p50_ms >= tidy.server_p50_ms * 0.5).all()
    assert (tidy.cpu_s_per_request > 0).all() and (tidy.peak_rss_bytes > 1e6).all()
    assert (tidy.server_cpu_pct > 0).all() and (tidy.server_cpu_peak_pct >= 0).all()
    down = tidy[tidy.kind == "download"]
    assert (down.response_bytes_per_request >= 4096).all()
    assert (down.payload_bytes_per_s > 0).all()
    stream = tidy[tidy.kind == "server_stream"]
    assert (stream.messages_per_s > 0).all() and stream.client_ttfm_p50_ms.notna().all()
    unary = tidy[tidy.kind == "unary"]
    assert unary.payload_bytes_per_s.map(math.isnan).all()
    assert tidy.container_cpu_s_per_request.isna().all()  # no cAdvisor without Prometheus
    # One user runs its calls back to back, so on a loaded machine a Locust process can reach
    # 90 % of a core (CI saw it once, on a stream cell): the run must then mark the cell, not
    # hide it. Whether it does on a quiet machine is not this test's business.
    assert tidy.generator_cpu_ratio.between(0, 2, inclusive="neither").all(), (
        tidy.generator_cpu_ratio
    )
    assert tidy.generator_saturated[tidy.generator_cpu_ratio >= 0.9].all()
    # The runner reads two pages a second: a small share of a core, never nothing.
    assert tidy.runner_cpu_ratio.between(0, 0.5, inclusive="neither").all(), tidy.runner_cpu_ratio
    assert set(tidy.client_source) == {"scrape"} and set(tidy.server_source) == {"scrape"}
    hist = pd.read_csv(run / "histograms.csv")
    assert set(hist.side) == {"client", "server"} and (hist["count"] >= 0).all()


def test_notebook_renders_tables_plots_and_html(finished: tuple[int, Path], tmp_path: Path) -> None:
    _, run = finished
    html = render(run)
    assert html == run / "report.html" and html.stat().st_size > 10_000
    pngs = {p.stem for p in run.glob("*.png")}
    assert {"latency_vs_load", "latency_cdf", "throughput_max", "payload_throughput"} <= pngs
    assert {"cpu_and_bytes_per_request", "stream_ttfm"} <= pngs
    text = html.read_text()
    assert "Table 6.1 (wirelab)" in text and "Table 6.2 (wirelab)" in text
    assert "Published claims against this run" in text
    nb = json.loads((run / "report.ipynb").read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors
    # The services ran as processes here, without a CPU limit: nothing was held back.
    assert _said(run, "CPU limit:") == []


def _said(run: Path, words: str) -> list[str]:
    """The lines of the rendered report's Markdown outputs that hold ``words``."""
    return [
        line
        for cell in json.loads((run / "report.ipynb").read_text())["cells"]
        for output in cell.get("outputs", [])
        for line in "".join(output.get("data", {}).get("text/markdown", "")).splitlines()
        if words in line
    ]


def test_the_report_flags_cells_their_cpu_limit_held_back(
    finished: tuple[int, Path], tmp_path: Path
) -> None:
    """A copy of the run whose first cell its service's limit throttled in 25 % of the periods
    (as a lab container under its quota can be) and its second in 5 %: only the first is named."""
    _, run = finished
    held = tmp_path / run.name
    shutil.copytree(run, held)
    tidy = pd.read_csv(held / "tidy.csv")
    tidy["container_throttled_pct"] = [25.0, 5.0, *[float("nan")] * (len(tidy) - 2)]
    tidy.to_csv(held / "tidy.csv", index=False)
    render(held)
    said = _said(held, "CPU limit:")
    assert said == [f"⚠ 1 cell(s) ran into the service's CPU limit: {tidy.cell_id[0]} (25 %)"]


def test_interrupted_run_is_marked_incomplete_and_leaves_earlier_runs(
    services: Services, finished: tuple[int, Path], tmp_path: Path
) -> None:
    _, earlier = finished
    before = {
        p: hashlib.sha256(p.read_bytes()).hexdigest() for p in earlier.rglob("*") if p.is_file()
    }
    scenario = tmp_path / "long.toml"
    scenario.write_text(LONG)
    results = earlier.parent
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wirelab_bench.cli",
            "bench",
            str(scenario),
            *services.args(results),
            "--progress",
            "off",
        ],
    )
    try:
        deadline = time.monotonic() + 60
        run = None
        while time.monotonic() < deadline:
            runs = [p for p in results.iterdir() if p.name.endswith("_long")]
            if runs and (runs[0] / "manifest.json").exists():
                run = runs[0]
                if json.loads((run / "manifest.json").read_text())["cells_done"]:
                    break
            time.sleep(0.2)
        else:
            pytest.fail("the runner measured no cell within 60 s")
        time.sleep(1)  # inside the next cell's window
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 4
    finally:
        if proc.poll() is None:
            proc.kill()
    assert run is not None
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "incomplete"
    assert "SIGTERM" in manifest["interrupted"]["reason"]
    done = manifest["cells_done"]
    assert 1 <= len(done) < manifest["cells_planned"]
    assert list(pd.read_csv(run / "tidy.csv").cell_id) == done
    after = {
        p: hashlib.sha256(p.read_bytes()).hexdigest() for p in earlier.rglob("*") if p.is_file()
    }
    assert {p: h for p, h in after.items() if p in before} == before


def _hashes(folder: Path) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}

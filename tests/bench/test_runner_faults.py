"""A service crashing mid-run, and the Prometheus path: server columns from range exports."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pandas as pd
import pytest
from wirelab_bench.cli import main

from tests.bench.lab import Services, prometheus_binary, running_prometheus, running_services

pytestmark = pytest.mark.integration

SCENARIO = """
warmup_s = 0.5
duration_s = {duration}
cooldown_s = 0
kinds = {kinds}
loads = [{{ users = 2 }}]
payload_sizes = [2048]
"""


def test_crashed_service_marks_the_run_incomplete(tmp_path: Path) -> None:
    scenario = tmp_path / "crash.toml"
    scenario.write_text(SCENARIO.format(duration=2, kinds='["unary", "download"]'))
    results = tmp_path / "results"
    with running_services(tmp_path) as lab:
        args = [*lab.args(results), "--health-timeout-s", "3", "--progress", "off"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "wirelab_bench.cli", "bench", str(scenario), *args]
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                manifests = list(results.glob("*/manifest.json"))
                if manifests and json.loads(manifests[0].read_text())["cells_done"]:
                    break
                time.sleep(0.2)
            else:
                pytest.fail("no cell measured within 60 s")
            lab.procs["wirelab.rest"].send_signal(signal.SIGKILL)
            assert proc.wait(60) == 4
        finally:
            if proc.poll() is None:
                proc.kill()
    manifest = json.loads(manifests[0].read_text())
    assert manifest["status"] == "incomplete"
    assert "lab failed mid-run" in manifest["interrupted"]["reason"]
    tidy = pd.read_csv(manifests[0].parent / "tidy.csv")
    assert list(tidy.cell_id) == manifest["cells_done"]
    assert (tidy.requests > 0).all()


def test_server_columns_from_prometheus_when_no_direct_scrape(
    services: Services, tmp_path: Path
) -> None:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("no Prometheus binary ($PROMETHEUS, PATH, or .cache from tests/config)")
    scenario = tmp_path / "prom.toml"
    scenario.write_text(SCENARIO.format(duration=4, kinds='["download"]'))
    results = tmp_path / "results"
    lab = services
    with running_prometheus(binary, lab, tmp_path) as url:
        deadline = time.monotonic() + 30
        while len(httpx.get(f"{url}/api/v1/query", params={"query": "up == 1"}).json()
                  .get("data", {}).get("result", [])) < 2:  # fmt: skip
            assert time.monotonic() < deadline, "Prometheus never scraped both services"
            time.sleep(0.5)
        args = lab.args(results, prometheus=url)
        args[args.index("--rest-metrics-url") + 1] = ""
        args[args.index("--grpc-metrics-url") + 1] = ""
        assert main(["bench", str(scenario), *args, "--progress", "off"]) == 0
    (run,) = results.iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert "server_rest_scrape" in manifest["missing"]
    assert set(manifest["servers"]) == {"rest", "grpc"}
    tidy = pd.read_csv(run / "tidy.csv")
    assert set(tidy.server_source) == {"prometheus"}
    assert (tidy.server_requests_per_s > 0).all() and tidy.server_p50_ms.notna().all()
    assert (tidy.cpu_s_per_request > 0).all()
    for cell in manifest["cells_done"]:
        export = json.loads((run / "prometheus" / f"{cell}.json").read_text())
        assert export["server_duration_bucket"]["data"]["result"], cell

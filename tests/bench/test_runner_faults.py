"""A service crashing mid-run, and the Prometheus path: server columns from range exports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from wirelab_bench import runner
from wirelab_bench.cli import main
from wirelab_bench.parity import check_parity

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


def _run_until_a_cell_then_kill_rest(
    tmp_path: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """A two-cell run whose REST service is killed once a cell is measured; its manifest."""
    scenario = tmp_path / "crash.toml"
    scenario.write_text(SCENARIO.format(duration=2, kinds='["unary", "download"]'))
    results = tmp_path / "results"
    with running_services(tmp_path) as lab:
        args = [*lab.args(results), "--health-timeout-s", "3", "--progress", "off"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "wirelab_bench.cli", "bench", str(scenario), *args],
            env=env,
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
    manifest: dict[str, Any] = json.loads(manifests[0].read_text())
    tidy = pd.read_csv(manifests[0].parent / "tidy.csv")
    assert list(tidy.cell_id) == manifest["cells_done"]
    assert (tidy.requests > 0).all()
    return manifest


def test_crashed_service_marks_the_run_incomplete(tmp_path: Path) -> None:
    manifest = _run_until_a_cell_then_kill_rest(tmp_path)
    assert manifest["status"] == "incomplete"
    assert "lab failed mid-run" in manifest["interrupted"]["reason"]
    assert "load path died" not in manifest["interrupted"]["reason"]


def _docker_says_healthy(tmp_path: Path) -> str:
    """A PATH whose `docker ps` reports every container healthy, as Docker does when the
    services answer inside the compose network but not through a published port."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text(
        "#!/usr/bin/env bash\n"
        '[[ "$1 ${*: -1}" == "ps {{.Status}}" ]] && echo "Up 2 minutes (healthy)"\n'
        "exit 0\n"
    )
    (fake / "docker").chmod(0o755)
    return f"{fake}:{os.environ['PATH']}"


DEAD_PATH = "lab failed mid-run: the load path died: REST http://127.0.0.1:"
DOCKER_HEALTHY = "while Docker reports rest, grpc healthy inside the compose network"


def test_a_dead_load_path_is_named_within_the_cell(tmp_path: Path) -> None:
    """REST unreachable from where the load comes from while Docker reports it healthy, as
    when the userland proxy publishing 127.0.0.1:8000 died under 5,000 Locust users: the run
    stops with one sentence naming the path, not the service, and keeps the cells measured."""
    env = {**os.environ, "PATH": _docker_says_healthy(tmp_path)}
    manifest = _run_until_a_cell_then_kill_rest(tmp_path, env)
    assert manifest["status"] == "incomplete"
    reason = manifest["interrupted"]["reason"]
    assert DEAD_PATH in reason, reason
    assert DOCKER_HEALTHY in reason
    # Named in the last cell done (its health after) or the next (its health or parity check).
    done = int(manifest["cells_done"][-1].split("_")[0])
    assert int(manifest["interrupted"]["phase"].split("_")[0]) in {done, done + 1}


def test_a_path_dead_by_the_parity_check_is_named_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REST gone between the second cell's health check and its parity check (a CI run killed
    it there): the parity call's failure is said as the health check says it, not as a bare
    ConnectError."""
    monkeypatch.setenv("PATH", _docker_says_healthy(tmp_path))
    scenario = tmp_path / "crash.toml"
    scenario.write_text(SCENARIO.format(duration=1, kinds='["unary", "download"]'))
    results = tmp_path / "results"
    with running_services(tmp_path) as lab:
        checks = []

        def killing_at_the_second(*args: Any, **kwargs: Any) -> list[str]:
            checks.append(args)
            if len(checks) == 2:
                lab.procs["wirelab.rest"].send_signal(signal.SIGKILL)
                lab.procs["wirelab.rest"].wait(10)
            return check_parity(*args, **kwargs)

        monkeypatch.setattr(runner, "check_parity", killing_at_the_second)
        args = [*lab.args(results), "--health-timeout-s", "3", "--progress", "off"]
        assert main(["bench", str(scenario), *args]) == 4
    (run,) = results.iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["interrupted"]["phase"].endswith(": parity"), manifest["interrupted"]
    assert DEAD_PATH in manifest["interrupted"]["reason"], manifest["interrupted"]
    assert DOCKER_HEALTHY in manifest["interrupted"]["reason"]
    assert len(manifest["cells_done"]) == 1


def test_server_columns_from_prometheus_when_no_direct_scrape(
    services: Services, tmp_path: Path
) -> None:
    binary = prometheus_binary()
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

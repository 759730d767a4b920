"""The real compose lab, booted, loaded and checked the way a user would look at it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from wirelab.contract import EDGE_PROTOCOLS, KINDS_BY_PROTOCOL

from tests.config.queries import REPO, all_queries
from tests.e2e.bench_run import FAULT_LOCUST_ARGS, bench_command, host_env, make, new_run
from tests.e2e.lab import Lab, wait_for
from tests.e2e.load import MIXED_USERS, Load
from tests.e2e.prom import Prometheus

pytestmark = pytest.mark.e2e


def test_every_target_is_up(load: Load, prometheus: Prometheus) -> None:
    def all_up() -> list[str] | None:
        targets = prometheus.targets()
        down = [f"{t['labels']['job']}: {t['lastError']}" for t in targets if t["health"] != "up"]
        return None if down or not targets else [t["labels"]["job"] for t in targets]

    jobs = wait_for("every scrape target up", all_up, timeout=60)
    assert set(jobs) >= {"rest", "grpc", "locust", "cadvisor", "node-exporter", "prometheus"}


def test_every_query_returns_data(load: Load, prometheus: Prometheus) -> None:
    """Dashboards, recording/alert rules and the runner's exports, as Grafana would send them.
    Recording rules need an evaluation after two scrapes in their window: re-checked for 70 s
    while the mixed load runs."""
    wanted = [q for q in all_queries() if q.expect_data and not q.needs]
    assert wanted, "tests/config/queries.py lists no queries"
    missing: list[str] = []

    def all_have_data() -> bool:
        missing[:] = [f"{q.source}: {q.expr}" for q in wanted if not prometheus.query(q.expr)]
        return not missing

    try:
        wait_for("every query to return data", all_have_data, timeout=70, every=5)
    except AssertionError:
        health = [
            f"{t['labels']['job']}: {t['health']} {t['lastError']}" for t in prometheus.targets()
        ]
        pytest.fail("queries without data:\n" + "\n".join([*missing, "targets:", *health]))


def test_cadvisor_reports_each_service_container(
    lab: Lab, load: Load, prometheus: Prometheus
) -> None:
    service = "container_label_com_docker_compose_service"
    labels = f'container_label_com_docker_compose_project="{lab.project}"'
    for metric in (
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
        "container_network_receive_bytes_total",
        "container_network_transmit_bytes_total",
    ):
        seen = prometheus.values(f"sum by ({service}) ({metric}{{{labels}}})", by=service)
        absent = set(lab.services) - set(seen)
        assert not absent, f"{metric}: no series for {absent}"
    busy = prometheus.values(
        f"sum by ({service}) (rate(container_cpu_usage_seconds_total"
        f'{{{labels},{service}=~"rest|grpc"}}[30s]))',
        by=service,
    )
    assert all(busy.get(s, 0) > 0 for s in ("rest", "grpc")), f"services under load idle: {busy}"


def test_client_and_server_counts_agree(load: Load, prometheus: Prometheus) -> None:
    """Over the mixed phase (the 64 MiB runs are standalone, so only the servers saw them)."""
    # Each user picks its kinds at random and some calls take seconds on a busy 2-core machine:
    # let the mix run until the client has made a call of every kind (bounded), then compare.
    every = [(p, k) for p in EDGE_PROTOCOLS for k in KINDS_BY_PROTOCOL[p]]

    def all_called() -> bool:
        client = prometheus.request_totals()["client"]
        return all(client.get(key, 0.0) > load.baseline["client"].get(key, 0.0) for key in every)

    with contextlib.suppress(AssertionError):  # the assertion below names the kind with none
        wait_for("a client call of every kind", all_called, timeout=60, every=2)
    load.master.stop()
    now = prometheus.settled_request_totals()
    for protocol in EDGE_PROTOCOLS:
        for kind in KINDS_BY_PROTOCOL[protocol]:
            key = (protocol, kind)
            c, s = (now[side].get(key, 0.0) - load.baseline[side].get(key, 0.0)
                    for side in ("client", "server"))  # fmt: skip
            assert c > 0, f"{protocol}/{kind}: the client made no calls"
            # Calls cut off by the stop may be counted on one side only: at most one per user.
            assert abs(c - s) <= max(MIXED_USERS, 0.02 * s), (
                f"{protocol}/{kind}: client {c} vs server {s}"
            )


def test_bench_smoke_from_the_host_then_the_report_as_the_readme_says(
    lab: Lab, tmp_path: Path
) -> None:
    """README: `make bench SCENARIO=smoke`, then `make report` (the host's wirelab)."""
    env = host_env(lab) | {"WIRELAB_REPORT_OUTPUT": str(tmp_path)}
    before = set(lab.results.iterdir())
    done = make("bench", env, 900, "SCENARIO=smoke")
    print(done.stderr[-2000:])  # the run's wall time, for the README figure (pytest -s)
    assert done.returncode == 0, (
        f"make bench SCENARIO=smoke exited {done.returncode}:\n{done.stderr}"
    )
    run_dir, manifest = new_run(lab.results, before)
    assert manifest["status"] == "complete", manifest.get("interrupted")
    # Published metrics ports: no "not measured" for either server from the host.
    assert not {"server_rest_scrape", "server_grpc_scrape"} & set(manifest["missing"]), manifest
    tidy = pd.read_csv(run_dir / "tidy.csv")
    assert len(tidy) == manifest["cells_planned"] == len(manifest["cells_done"])
    assert (tidy["errors"] == 0).all(), tidy[tidy["errors"] > 0].to_string()
    assert (tidy["server_source"] == "scrape").all(), tidy["server_source"].to_string()
    # docs/bench.md: `wirelab report` (here `make report`) executes notebooks/report.py on the
    # newest results folder.
    report = make("report", env, 600)
    assert report.returncode == 0, f"make report failed:\n{report.stderr[-4000:]}"
    notebook = json.loads((tmp_path / "report.ipynb").read_text())
    errors = [o for c in notebook["cells"] for o in c.get("outputs", [])
              if o.get("output_type") == "error"]  # fmt: skip
    assert not errors, errors
    assert (tmp_path / "report.html").stat().st_size > 0


def _restarts(container: str) -> int:
    out = subprocess.run(
        ["docker", "inspect", "-f", "{{.RestartCount}} {{.State.Health.Status}}", container],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.split()  # fmt: skip
    return int(out[0]) if out[1] == "healthy" else -1


def test_fault_grpc_hangs_then_crashes_and_its_restart_policy_brings_it_back(
    lab: Lab, prometheus: Prometheus, tmp_path: Path
) -> None:
    """Hang the gRPC service (docker pause) until its target-down alert fires, then crash it
    (SIGTERM to its main process: a `docker stop`/`kill` would switch the restart policy off)
    while the runner measures it; the runner reports the errors, Prometheus the gap, and the
    service comes back on its own under `restart: unless-stopped`."""
    grpc = lab.container("grpc")
    restarts = _restarts(grpc)
    assert restarts >= 0, "gRPC service not healthy before the fault"
    before = set(lab.results.iterdir())
    mount = f"{Path(__file__).with_name('fault.toml')}:/fault.toml:ro"
    extra = ("-v", mount, "-e", f"WIRELAB_BENCH_LOCUST_ARGS={FAULT_LOCUST_ARGS}")
    # The bench image first, so the fault lands in the window: built by `run` below, its first
    # build (wirelab-loadgen's Go build included) took 45 s, and the fault hit before the runner
    # started (a fresh machine's CI, 28 Nov).
    lab.compose("--profile", "bench", "build", "bench", timeout=900)
    bench = subprocess.Popen(
        bench_command(lab, "/fault.toml", *extra), cwd=REPO, env=lab.env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        time.sleep(15)  # the measurement window is open by now (health, Locust start, warm-up)
        subprocess.run(["docker", "pause", grpc], check=True, timeout=30)
        try:
            wait_for(
                "WirelabTargetDown for job grpc",
                lambda: any(a.get("job") == "grpc" for a in prometheus.firing("WirelabTargetDown")),
                timeout=60,
            )
        finally:
            subprocess.run(["docker", "unpause", grpc], check=True, timeout=30)
        crash = "import os, signal; os.kill(1, signal.SIGTERM)"
        subprocess.run(["docker", "exec", grpc, "python", "-c", crash], check=True, timeout=30)
        wait_for("gRPC restarted and healthy", lambda: _restarts(grpc) > restarts, timeout=90)
        output, _ = bench.communicate(timeout=240)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait(timeout=30)
    assert bench.returncode in (1, 4), f"the runner did not report the fault:\n{output}"
    run_dir, manifest = new_run(lab.results, before)
    assert manifest["status"] in ("complete", "incomplete"), manifest
    # Results written before and during the fault are intact and say what happened.
    tidy = pd.read_csv(run_dir / "tidy.csv")
    assert len(tidy) == len(manifest["cells_done"]) >= 1
    assert tidy["errors"].sum() > 0, tidy.to_string()
    gap = prometheus.query('min_over_time(up{job="grpc"}[5m]) == 0')
    assert gap, "Prometheus shows no gap in the gRPC target"
    wait_for("gRPC target up again", lambda: prometheus.query('up{job="grpc"} == 1'), timeout=30)

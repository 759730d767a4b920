"""Distributed Locust: a master with workers (separate processes or --processes) counts each
request exactly once in /metrics, the same as in its own stats."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.locust.conftest import LOCUSTFILE, LocustRun, Services, free_port, total, wait_for
from tests.locust.test_headless import assert_metrics_match_locust

pytestmark = pytest.mark.integration


def worker_report_interval() -> float:
    """Locust's periodic worker report interval, read in a child process: importing Locust
    monkey-patches the importing process with gevent, and pytest's must stay unpatched (grpc
    tests in the same run hang on a patched process)."""
    code = "from locust.runners import WORKER_REPORT_INTERVAL as i; print(i)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


# The test stops the swarm itself once it has seen it running; the run time only bounds it.
SWARM = ("-u", "8", "-r", "8", "-t", "60s", "--mix", "unary=4,server_stream=1,upload=1")


def calls(run: LocustRun, protocol: str, kind: str) -> float:
    return total(run.metrics(), "wirelab_client_requests_total", protocol=protocol, kind=kind)


def check_run(run: LocustRun, workers: int) -> None:
    # A busy host can start the workers late or slowly: wait for the swarm rather than assume it
    # is still running at some moment of a fixed run time.
    wait_for("users on workers", lambda: run.metrics()[("wirelab_client_users", ())] == 8, 40)
    samples = run.metrics()
    assert samples[("wirelab_client_workers", ())] == workers
    instances = {
        dict(ls)["instance_name"] for n, ls in samples if n == "wirelab_client_cpu_usage_ratio"
    }
    assert "master" in instances and len(instances) == workers + 1, instances
    wait_for(
        "calls reported",
        lambda: calls(run, "rest", "unary") * calls(run, "grpc", "server_stream") > 0,
        30,
    )
    run.stop_swarm()
    run.wait_stopped(workers)
    stopped = time.monotonic()
    counts = assert_metrics_match_locust(run)
    assert counts[("rest", "unary")] > 0 and counts[("grpc", "server_stream")] > 0
    assert all(int(r["Failure Count"]) == 0 for r in run.stats_rows())
    # Prometheus scrapes only the master; the workers serve no /metrics of their own.
    requests = total(run.metrics(), "wirelab_client_requests_total")
    assert requests == sum(counts.values())
    # "stopped" is final: had a worker held calls back, its next periodic report would have
    # brought them by now.
    time.sleep(max(0.0, stopped + worker_report_interval() + 1 - time.monotonic()))
    assert total(run.metrics(), "wirelab_client_requests_total") == requests


def test_master_and_two_workers(services: Services, locust_run: LocustRun) -> None:
    master_port = free_port()
    run = locust_run.start(
        services,
        *("--master", "--expect-workers", "2", "--master-bind-host", "127.0.0.1"),
        *("--master-bind-port", str(master_port), *SWARM),
    )
    for _ in range(2):
        # A worker takes the locustfile and --metrics-port from its own command line, as on
        # another machine; the master's port must stay free for the master alone.
        run.spawn(
            "worker",
            *("-f", str(LOCUSTFILE)),
            *("--worker", "--master-host", "127.0.0.1", "--master-port", str(master_port)),
            *("--metrics-port", str(run.metrics_port)),
        )
    check_run(run, workers=2)


def test_processes_two(services: Services, locust_run: LocustRun) -> None:
    run = locust_run.start(services, "--processes", "2", *SWARM)
    check_run(run, workers=2)

"""Distributed Locust: a master with workers (separate processes or --processes) counts each
request exactly once in /metrics, the same as in its own stats."""

from __future__ import annotations

import pytest

from tests.locust.conftest import LOCUSTFILE, LocustRun, Services, free_port, total, wait_for
from tests.locust.test_headless import assert_metrics_match_locust

pytestmark = pytest.mark.integration
SWARM = ("-u", "8", "-r", "8", "-t", "4s", "--mix", "unary=4,server_stream=1,upload=1")


def check_run(run: LocustRun, workers: int) -> None:
    wait_for("users on workers", lambda: run.metrics()[("wirelab_client_users", ())] == 8, 20)
    samples = run.metrics()
    assert samples[("wirelab_client_workers", ())] == workers
    instances = {
        dict(ls)["instance_name"] for n, ls in samples if n == "wirelab_client_cpu_usage_ratio"
    }
    assert "master" in instances and len(instances) == workers + 1, instances
    run.wait_stopped()
    counts = assert_metrics_match_locust(run)
    assert counts[("rest", "unary")] > 0 and counts[("grpc", "server_stream")] > 0
    assert all(int(r["Failure Count"]) == 0 for r in run.stats_rows())
    # Prometheus scrapes only the master; the workers serve no /metrics of their own.
    requests = total(run.metrics(), "wirelab_client_requests_total")
    assert requests == sum(counts.values())


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

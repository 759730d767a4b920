"""Real REST and gRPC service processes on free loopback ports for the integration tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from wirelab_bench.health import grpc_healthy, rest_healthy

from tests.bench.lab import Services, free_ports


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    rest, grpc_port, rest_m, grpc_m = free_ports(4)
    logs = tmp_path_factory.mktemp("service-logs")
    base = {**os.environ, "WIRELAB_HOST": "127.0.0.1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", module],
            env={**base, **env},
            stdout=(logs / f"{module}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        for module, env in (
            ("wirelab.rest", {"WIRELAB_REST_PORT": str(rest), "WIRELAB_METRICS_PORT": str(rest_m)}),
            (
                "wirelab.rpc",
                {"WIRELAB_GRPC_PORT": str(grpc_port), "WIRELAB_METRICS_PORT": str(grpc_m)},
            ),
        )
    ]
    found = Services(
        f"http://127.0.0.1:{rest}",
        f"127.0.0.1:{grpc_port}",
        f"http://127.0.0.1:{rest_m}/metrics",
        f"http://127.0.0.1:{grpc_m}/metrics",
    )
    try:
        deadline = time.monotonic() + 30
        while rest_healthy(found.rest_url) or grpc_healthy(found.grpc_target):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail(f"services did not start; logs in {logs}")
            time.sleep(0.2)
        yield found
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()

"""The benchmark runner from the host (the README's make targets) and inside the lab (compose
profile "bench"), and what it leaves behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

from tests.config.queries import REPO
from tests.e2e.lab import COMPOSE, Lab

# Calls into a hung service must fail in seconds, not after the default 60 s.
FAULT_LOCUST_ARGS = "--call-timeout 3"


def bench_command(lab: Lab, scenario: str, *extra: str) -> list[str]:
    """`docker compose run` of the bench service with `scenario` (a name or a path inside it)."""
    compose = [str(COMPOSE), "-p", lab.project]
    return [*compose, "--profile", "bench", "run", "--rm", "-T", *extra, "bench", scenario]


def host_env(lab: Lab) -> dict[str, str]:
    """The README's host commands (`make bench`, `make report`) pointed at this lab's published
    ports and results folder instead of the default ones."""
    return {
        **lab.env,
        "WIRELAB_BENCH_REST_URL": lab.url("rest", 8000),
        "WIRELAB_BENCH_GRPC_TARGET": lab.url("grpc", 50051).removeprefix("http://"),
        "WIRELAB_BENCH_PROMETHEUS_URL": lab.url("prometheus", 9090),
        "WIRELAB_BENCH_REST_METRICS_URL": lab.url("rest", 9100) + "/metrics",
        "WIRELAB_BENCH_GRPC_METRICS_URL": lab.url("grpc", 9100) + "/metrics",
        "WIRELAB_BENCH_RESULTS_DIR": str(lab.results),
        "WIRELAB_BENCH_COMPOSE_PROJECT": lab.project,
    }


def make(target: str, env: dict[str, str], timeout: float, *args: str) -> CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", target, *args], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=timeout,
    )  # fmt: skip


def new_run(results: Path, before: set[Path]) -> tuple[Path, dict[str, Any]]:
    """The one results folder that appeared since `before`, with its manifest."""
    fresh = sorted(set(results.iterdir()) - before)
    assert len(fresh) == 1, f"expected one new results folder, found {fresh}"
    manifest: dict[str, Any] = json.loads((fresh[0] / "manifest.json").read_text())
    return fresh[0], manifest

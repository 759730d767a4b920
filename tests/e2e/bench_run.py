"""The benchmark runner inside the lab (compose profile "bench") and what it leaves behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.config.queries import REPO
from tests.e2e.lab import COMPOSE, Lab

# Calls into a hung service must fail in seconds, not after the default 60 s.
FAULT_LOCUST_ARGS = "--call-timeout 3"


def bench_command(lab: Lab, scenario: str, *extra: str) -> list[str]:
    """`docker compose run` of the bench service with `scenario` (a name or a path inside it)."""
    compose = [str(COMPOSE), "-p", lab.project]
    return [*compose, "--profile", "bench", "run", "--rm", "-T", *extra, "bench", scenario]


def run_bench(lab: Lab, scenario: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        bench_command(lab, scenario), cwd=REPO, env=lab.env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def new_run(results: Path, before: set[Path]) -> tuple[Path, dict[str, Any]]:
    """The one results folder that appeared since `before`, with its manifest."""
    fresh = sorted(set(results.iterdir()) - before)
    assert len(fresh) == 1, f"expected one new results folder, found {fresh}"
    manifest: dict[str, Any] = json.loads((fresh[0] / "manifest.json").read_text())
    return fresh[0], manifest

"""The benchmark runner from the host (the README's make targets) and inside the lab (compose
profile "bench"), and what it leaves behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pandas as pd

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
    return bench_env(
        lab,
        rest_url=lab.url("rest", 8000),
        grpc_target=lab.url("grpc", 50051).removeprefix("http://"),
        prometheus_url=lab.url("prometheus", 9090),
        rest_metrics_url=lab.url("rest", 9100) + "/metrics",
        grpc_metrics_url=lab.url("grpc", 9100) + "/metrics",
    )


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


def bench_env(lab: Lab, output: Path | None = None, **knobs: str) -> dict[str, str]:
    """The environment of `make bench` / `make report` from the host against this lab: its
    results folder and compose project, the report into ``output`` (else the default), and
    runner knobs by name (``rest_url="..."`` sets WIRELAB_BENCH_REST_URL)."""
    report = {"WIRELAB_REPORT_OUTPUT": str(output)} if output is not None else {}
    return {
        **lab.env,
        "WIRELAB_BENCH_RESULTS_DIR": str(lab.results),
        "WIRELAB_BENCH_COMPOSE_PROJECT": lab.project,
        **report,
        **{f"WIRELAB_BENCH_{name.upper()}": value for name, value in knobs.items()},
    }


def bench(
    lab: Lab, env: dict[str, str], scenario: Path
) -> tuple[Path, dict[str, Any], pd.DataFrame]:
    """`make bench SCENARIO=<scenario>`: it exits 0 and leaves one complete run; that run's
    folder, manifest and tidy table."""
    before = set(lab.results.iterdir())
    done = make("bench", env, 600, f"SCENARIO={scenario}")
    assert done.returncode == 0, f"make bench exited {done.returncode}:\n{done.stderr[-4000:]}"
    run_dir, manifest = new_run(lab.results, before)
    assert manifest["status"] == "complete", manifest
    return run_dir, manifest, pd.read_csv(run_dir / "tidy.csv")


def report(env: dict[str, str], run_dir: Path) -> None:
    """`make report` on ``run_dir`` exits 0 and no cell of the executed notebook raised."""
    done = make("report", env, 600, f"RUN={run_dir}")
    assert done.returncode == 0, f"make report failed:\n{done.stderr[-4000:]}"
    notebook = json.loads((Path(env["WIRELAB_REPORT_OUTPUT"]) / "report.ipynb").read_text())
    errors = [o for c in notebook["cells"] for o in c.get("outputs", [])
              if o.get("output_type") == "error"]  # fmt: skip
    assert not errors, errors

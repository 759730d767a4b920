"""Service processes (and optionally Prometheus) on free loopback ports for the runner's tests."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest
from wirelab_bench.cli import main
from wirelab_bench.health import grpc_healthy, rest_healthy
from wirelab_bench.knobs import LOADGEN_BINARY

from tests.gobuild import go_build


@dataclass
class Services:
    rest_url: str
    grpc_target: str
    rest_metrics: str
    grpc_metrics: str
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def args(self, results: Path, prometheus: str = "") -> list[str]:
        return [
            "--rest-url", self.rest_url,
            "--grpc-target", self.grpc_target,
            "--rest-metrics-url", self.rest_metrics,
            "--grpc-metrics-url", self.grpc_metrics,
            "--prometheus-url", prometheus,
            "--results-dir", str(results),
            "--health-timeout-s", "20",
        ]  # fmt: skip


def bench(services: Services, root: Path, name: str, text: str) -> tuple[int, Path]:
    """`wirelab bench` of the scenario ``text`` (saved as ``<root>/<name>.toml``) against
    ``services``: its exit code and the one results folder it wrote under ``root``."""
    scenario = root / f"{name}.toml"
    scenario.write_text(text)
    code = main(["bench", str(scenario), *services.args(root / "results"), "--progress", "off"])
    (run,) = (root / "results").iterdir()
    return code, run


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _holds(proc: subprocess.Popen[bytes], ports: list[int]) -> bool:
    """Whether ``proc`` listens on every one of ``ports``: a health check alone can be answered
    by another test's process that took a port between its choosing and the service's bind."""
    try:
        listening = {
            c.laddr.port
            for c in psutil.Process(proc.pid).net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr
        }
    except psutil.Error:
        return False
    return set(ports) <= listening


def _start(logs: Path, extra: Mapping[str, Mapping[str, str]] | None) -> Services | None:
    """Both services on free ports, healthy and listening on their own ports; None when one of
    them could not bind its port (taken meanwhile by another process: choose again)."""
    rest, grpc_port, rest_m, grpc_m = free_ports(4)
    found = Services(
        f"http://127.0.0.1:{rest}",
        f"127.0.0.1:{grpc_port}",
        f"http://127.0.0.1:{rest_m}/metrics",
        f"http://127.0.0.1:{grpc_m}/metrics",
    )
    base = {**os.environ, "WIRELAB_HOST": "127.0.0.1"}
    ports = {
        "wirelab.rest": {"WIRELAB_REST_PORT": f"{rest}", "WIRELAB_METRICS_PORT": f"{rest_m}"},
        "wirelab.rpc": {"WIRELAB_GRPC_PORT": f"{grpc_port}", "WIRELAB_METRICS_PORT": f"{grpc_m}"},
    }
    for module, env in ports.items():
        found.procs[module] = subprocess.Popen(
            [sys.executable, "-m", module],
            env={**base, **env, **(extra or {}).get(module, {})},
            stdout=(logs / f"{module}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
    owned = {"wirelab.rest": [rest, rest_m], "wirelab.rpc": [grpc_port, grpc_m]}
    deadline = time.monotonic() + 30
    while True:
        if any(p.poll() is not None for p in found.procs.values()):
            _stop(list(found.procs.values()))
            return None
        if (
            not rest_healthy(found.rest_url)
            and not grpc_healthy(found.grpc_target)
            and all(_holds(found.procs[m], owned[m]) for m in owned)
        ):
            return found
        if time.monotonic() > deadline:
            _stop(list(found.procs.values()))
            raise RuntimeError(f"services did not start; logs in {logs}")
        time.sleep(0.2)


@contextmanager
def running_services(
    logs: Path, extra: Mapping[str, Mapping[str, str]] | None = None
) -> Iterator[Services]:
    """`python -m wirelab.rest` and `python -m wirelab.rpc`, healthy, stopped on exit; ``extra``
    adds variables per module (e.g. a topology's WIRELAB_DOWNSTREAM). A service that exits while
    starting (its port taken by a parallel test's process) is started again on other ports, up
    to three times."""
    for _ in range(3):
        found = _start(logs, extra)
        if found is not None:
            break
    else:
        raise RuntimeError(f"services exited while starting, three times; logs in {logs}")
    try:
        yield found
    finally:
        _stop(list(found.procs.values()))


def prometheus_binary() -> str:
    """A Prometheus server binary: $PROMETHEUS, else the pinned release the lab runs, built once
    from the Go module proxy (offline/go-build)."""
    given = os.environ.get("PROMETHEUS", "")
    if given and os.access(given, os.X_OK):
        return given
    return str(go_build("prometheus") / "prometheus")


@contextmanager
def running_prometheus(
    binary: str, services: Services, folder: Path, hops: Services | None = None
) -> Iterator[str]:
    """A Prometheus scraping both services every second as jobs rest and grpc, and ``hops``
    (a topology's downstreams) as job hops labelled service rest-b and grpc-b, as the lab's
    prometheus.yml labels them; yields its URL."""
    (port,) = free_ports(1)
    targets = {
        "rest": [(services.rest_metrics.split("/")[2], "rest")],
        "grpc": [(services.grpc_metrics.split("/")[2], "grpc")],
    }
    if hops is not None:
        targets["hops"] = [
            (hops.rest_metrics.split("/")[2], "rest-b"),
            (hops.grpc_metrics.split("/")[2], "grpc-b"),
        ]
    config = folder / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\nscrape_configs:\n"
        + "".join(
            f"  - job_name: {job}\n    static_configs:\n"
            + "".join(f'      - {{targets: ["{t}"], labels: {{service: {s}}}}}\n' for t, s in ts)
            for job, ts in targets.items()
        )
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--enable-feature=exemplar-storage",  # as compose starts the lab's
        ],
        stdout=(folder / "prometheus.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not _answers(f"{url}/-/ready"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Prometheus did not start; log in {folder}")
            time.sleep(0.2)
        yield url
    finally:
        _stop([proc])


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def direct_then(network: str) -> str:
    """A scenario of two groups, unary on both protocols, 3 s windows: direct, then through
    ``network`` (a profile name); only the network differs between them."""
    return f"""
kinds = ["unary"]
loads = [{{ users = 1 }}]
warmup_s = 0.5
duration_s = 3
cooldown_s = 0

[[groups]]
name = "direct"

[[groups]]
name = "{network}"
network = "{network}"
"""


def require_loadgen() -> None:
    """Skip without wirelab-loadgen (tests/run builds it: offline/go-tools loadgen); CI must
    have it, so there the test fails instead."""
    if shutil.which(LOADGEN_BINARY) is None:
        why = f"no {LOADGEN_BINARY}: offline/go-tools loadgen"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)

"""Real processes on 127.0.0.1: both services, and Locust runs driven through their own ports."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.bench.lab import running_services

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "locust" / "locustfile.py"
LOCUST_CONF = REPO / "locust" / "locust.conf"
ALL_KINDS = (
    "unary=3,server_stream=1,bidi=1,upload=1,upload_chunked=1,upload_json=1,"
    "download=1,download_chunked=1,download_json=1"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{what} not ready after {timeout} s")


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return bytes(response.read())


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


# Scraped samples: (name, sorted label pairs) -> value.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@dataclass(frozen=True)
class Services:
    rest: str
    grpc: str


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    """Both services on free ports, healthy and listening on their own ones (a port found free
    can be taken before a service binds it: the runner's tests' launcher starts them again)."""
    with running_services(tmp_path_factory.mktemp("services")) as found:
        yield Services(found.rest_url, found.grpc_target)


@dataclass
class LocustRun:
    """One Locust master/standalone with its web UI, CSV and /metrics on free loopback ports."""

    workdir: Path
    web_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, services: Services, *args: str, autostart: bool = True) -> LocustRun:
        command = [
            *("-f", str(LOCUSTFILE), "--config", str(LOCUST_CONF)),
            *("--rest-host", services.rest, "--grpc-target", services.grpc, "-H", services.rest),
            *("--web-host", "127.0.0.1", "--web-port", str(self.web_port)),
            *("--metrics-bind", "127.0.0.1", "--metrics-port", str(self.metrics_port)),
            *("--csv", str(self.workdir / "run")),
        ]
        if autostart:
            command += ["--autostart", "--autoquit", "60"]
        self.spawn("locust", *command, *args)
        wait_for("Locust web UI", lambda: get(self.url("/")) != b"", 40)
        return self

    def spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.workdir / f"{name}-{len(self.processes)}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "locust", *args],
            cwd=self.workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.processes.append(process)
        return process

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.web_port}{path}"

    def ui_stats(self) -> dict[str, Any]:
        return dict(json.loads(get(self.url("/stats/requests"))))

    def stop_swarm(self) -> None:
        """Stop the swarm as the web UI's Stop button does (the master waits for its workers)."""
        with urllib.request.urlopen(
            urllib.request.Request(self.url("/stop"), method="POST"), timeout=60
        ):
            pass

    def wait_stopped(self, workers: int = 0, timeout: float = 40.0) -> None:
        # Each worker sends its final report before telling the master it stopped, then says it
        # is ready again (wirelab_locust.plugin.report_now): "stopped" with every worker ready
        # means no report is still on its way, even from a worker once marked missing.
        def over() -> bool:
            stats = self.ui_stats()
            ready = [w for w in stats.get("workers", []) if w["state"] == "ready"]
            return stats["state"] == "stopped" and len(ready) == workers

        wait_for("end of the run", over, timeout)
        # The CSV is rewritten every second but flushed only every 5 s: wait until it holds the
        # final total that the web UI already shows.
        final = self.ui_stats()["stats"][-1]["num_requests"]
        wait_for("final CSV", lambda: self.csv_total() == final, 12)

    def csv_total(self) -> int:
        with (self.workdir / "run_stats.csv").open() as f:
            rows = [row for row in csv.DictReader(f) if row["Name"] == "Aggregated"]
        return int(rows[0]["Request Count"]) if rows else -1

    def metrics(self) -> Samples:
        text = get(f"http://127.0.0.1:{self.metrics_port}/metrics").decode()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def stats_rows(self) -> list[dict[str, str]]:
        with (self.workdir / "run_stats.csv").open() as f:
            return [row for row in csv.DictReader(f) if row["Name"] != "Aggregated"]

    def log(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.workdir.glob("*.log")))

    def close(self) -> None:
        for process in reversed(self.processes):
            stop(process)


@pytest.fixture
def locust_run(tmp_path: Path) -> Iterator[LocustRun]:
    run = LocustRun(tmp_path)
    try:
        yield run
    finally:
        run.close()


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))

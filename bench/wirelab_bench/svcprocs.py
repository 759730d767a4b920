"""Start a wirelab service as a real process, pinned to a CPU, and read its CPU time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

from wirelab_bench.cell import free_port
from wirelab_bench.health import wait_healthy

# The machine has two cores: services get one, the load tool the other.
SERVER_CPU, CLIENT_CPU = 0, 1


def pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


@dataclass(frozen=True)
class Service:
    protocol: str
    address: str  # http://127.0.0.1:port for REST, 127.0.0.1:port for gRPC
    process: psutil.Process
    metrics_url: str  # the service's /metrics, on its own port

    def cpu_seconds(self) -> float:
        """User + system CPU of the whole process (all threads) so far."""
        times = self.process.cpu_times()
        return float(times.user + times.system)


@contextmanager
def service(protocol: str, cpu: int, extra: Sequence[str] = ()) -> Iterator[Service]:
    """``python -m wirelab.rest|rpc`` on free loopback ports, pinned to ``cpu``, healthy."""
    port = free_port()
    module, flag = (
        ("wirelab.rest", "--rest-port") if protocol == "rest" else ("wirelab.rpc", "--grpc-port")
    )
    cmd = [sys.executable, "-m", module, "--host", "127.0.0.1", flag, str(port)]
    metrics_port = free_port()
    cmd += ["--metrics-port", str(metrics_port), *extra]
    proc = subprocess.Popen(
        cmd, preexec_fn=lambda: pin(cpu), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    address = f"http://127.0.0.1:{port}" if protocol == "rest" else f"127.0.0.1:{port}"
    try:
        wait_healthy(address, address, (protocol,), timeout=30)
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        yield Service(protocol, address, psutil.Process(proc.pid), metrics_url)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        if proc.returncode:
            print(
                f"{' '.join(cmd)} exited {proc.returncode}: {err.decode()[-1000:]}", file=sys.stderr
            )

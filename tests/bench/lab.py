"""Addresses of the service processes the runner's integration tests start."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Services:
    rest_url: str
    grpc_target: str
    rest_metrics: str
    grpc_metrics: str

    def args(self, results: Path) -> list[str]:
        return [
            "--rest-url", self.rest_url,
            "--grpc-target", self.grpc_target,
            "--rest-metrics-url", self.rest_metrics,
            "--grpc-metrics-url", self.grpc_metrics,
            "--prometheus-url", "",
            "--results-dir", str(results),
            "--health-timeout-s", "20",
        ]  # fmt: skip


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports

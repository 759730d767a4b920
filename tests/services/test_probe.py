"""The containers' healthcheck (wirelab.probe): each check's answer against a live server, the
knobs it reads as the services read them, and what it imports (its CPU counts in the checked
container's figure, so it must stay lean)."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from wirelab import probe
from wirelab.contract.knobs import DEFAULTS


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[tuple[int, list[tuple[int, bytes]]]]:
    """A server answering GET /healthz with the (status, body) in the list it yields."""
    answer = [(200, b"ok")]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = answer[0] if self.path == "/healthz" else (404, b"no")
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], answer
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def grpc_health() -> Iterator[tuple[int, health.HealthServicer]]:
    servicer = health.HealthServicer()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield port, servicer
    finally:
        server.stop(None)


def test_knobs_are_read_as_the_services_read_them() -> None:
    for name in ("host", "rest_port", "grpc_port", "metrics_port"):
        assert probe.knob(name, {}) == str(DEFAULTS[name])
    assert probe.knob("rest_port", {"WIRELAB_REST_PORT": "8123"}) == "8123"


@pytest.mark.parametrize(
    ("bound", "reached"),
    [("0.0.0.0", "127.0.0.1"), ("::", "127.0.0.1"), ("", "127.0.0.1"), ("::1", "::1")],
)
def test_the_check_reaches_the_address_the_server_binds(bound: str, reached: str) -> None:
    assert probe.local_host(bound) == reached


def test_http_check_passes_on_200_and_says_why_otherwise(
    http_server: tuple[int, list[tuple[int, bytes]]],
) -> None:
    port, answer = http_server
    assert probe.http_ok("127.0.0.1", port) is None
    answer[0] = (503, b"not connected to the broker yet")
    assert probe.http_ok("127.0.0.1", port) == "503 not connected to the broker yet"
    assert "refused" in str(probe.http_ok("127.0.0.1", _closed_port()))


def test_grpc_check_passes_when_serving_and_names_the_status_otherwise(
    grpc_health: tuple[int, health.HealthServicer],
) -> None:
    port, servicer = grpc_health
    assert probe.grpc_serving("127.0.0.1", port) is None
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert probe.grpc_serving("127.0.0.1", port) == "not serving: NOT_SERVING"
    assert probe.grpc_serving("127.0.0.1", _closed_port()) == "UNAVAILABLE"


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-X", "importtime", "-m", "wirelab.probe", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def _imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime``'s lines (``import time: self | cumulative | name``)."""
    rows = (line.split("|") for line in stderr.splitlines() if line.startswith("import time:"))
    return {row[2].strip() for row in rows if len(row) == 3}


def test_a_check_imports_only_what_it_needs(
    http_server: tuple[int, list[tuple[int, bytes]]],
    grpc_health: tuple[int, health.HealthServicer],
) -> None:
    """No knob parser (wirelab.settings, and the core it imports), no server code; grpc only for
    the gRPC check. The old checks that imported them cost 0.33 s (REST) and 1.03 s (gRPC) of CPU
    each, every 10 s (docs/observability.md)."""
    http_port, _ = http_server
    grpc_port, _ = grpc_health
    base = {"PATH": "/usr/bin:/bin", "WIRELAB_HOST": "127.0.0.1"}
    heavy = {"wirelab.settings", "wirelab.serving", "wirelab.core", "wirelab.metrics"}
    rest = _run("rest", env={**base, "WIRELAB_REST_PORT": str(http_port)})
    assert (rest.returncode, rest.stdout) == (0, "serving\n"), rest.stderr[-2000:]
    rest_modules = _imported(rest.stderr)
    assert "wirelab" in rest_modules  # the package; the module itself runs as __main__
    assert not rest_modules & (heavy | {"grpc", "prometheus_client"})
    rpc = _run("grpc", env={**base, "WIRELAB_GRPC_PORT": str(grpc_port)})
    assert (rpc.returncode, rpc.stdout) == (0, "serving\n"), rpc.stderr[-2000:]
    rpc_modules = _imported(rpc.stderr)
    assert "grpc" in rpc_modules
    assert not rpc_modules & (heavy | {"wirelab.rpc", "prometheus_client"})


def test_a_failed_check_exits_1_with_the_address_and_a_wrong_call_2() -> None:
    port = _closed_port()
    env = {"PATH": "/usr/bin:/bin", "WIRELAB_METRICS_PORT": str(port)}
    failed = _run("amqp", env=env)
    assert failed.returncode == 1
    assert f"unhealthy: 127.0.0.1:{port}: " in failed.stderr
    for wrong in ([], ["soap"], ["rest", "grpc"]):
        done = subprocess.run(
            [sys.executable, "-m", "wirelab.probe", *wrong], capture_output=True, text=True
        )
        assert done.returncode == 2
        assert "usage: python -m wirelab.probe rest|grpc|amqp" in done.stderr

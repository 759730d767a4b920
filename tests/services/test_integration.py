"""Real processes (`python -m wirelab.rest` / `wirelab.rpc`) on free loopback ports."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from wirelab import core
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Service:
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log: Path

    def metric(self, line_start: str) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).text
        found = [ln for ln in text.splitlines() if ln.startswith(line_start)]
        return float(found[0].rsplit(" ", 1)[1]) if found else 0.0

    def wait_for(self, line_start: str, expected: float) -> float:
        """The metric once it reaches ``expected`` (or after 5 s): servers record asynchronously."""
        deadline = time.monotonic() + 5
        while (got := self.metric(line_start)) < expected and time.monotonic() < deadline:
            time.sleep(0.1)
        return got

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=15)


def launch(
    command: list[str],
    protocol: str,
    tmp: Path,
    healthy: Callable[[dict[str, str], int], bool],
    env: dict[str, str] | None = None,
) -> Service:
    """``command`` (a service of ``protocol``, configured by WIRELAB_* variables) on free loopback
    ports, returned once ``healthy(environment, port)``; its output goes to a log in ``tmp``. A
    port found free can be taken before the service binds it (by the other test worker, or as an
    outgoing connection's ephemeral port: seen in CI); the service then says it cannot listen and
    is started again on new ports, twice at most."""
    for _ in range(2):
        try:
            return _launch(command, protocol, tmp, healthy, env)
        except _PortTaken:
            pass
    return _launch(command, protocol, tmp, healthy, env)


class _PortTaken(AssertionError):
    """The service could not listen on a port found free a moment before."""


def _launch(
    command: list[str],
    protocol: str,
    tmp: Path,
    healthy: Callable[[dict[str, str], int], bool],
    env: dict[str, str] | None,
) -> Service:
    port = free_port()
    metrics_port = free_port()
    knob = "WIRELAB_REST_PORT" if protocol == "rest" else "WIRELAB_GRPC_PORT"
    environ = {
        **os.environ,
        "WIRELAB_HOST": "127.0.0.1",
        knob: str(port),
        "WIRELAB_METRICS_PORT": str(metrics_port),
        "WIRELAB_GRACE_SECONDS": "5",
        **(env or {}),
    }
    log = tmp / f"{Path(command[-1]).name}-{port}-{metrics_port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=environ, stdout=out, stderr=out)
    service = Service(proc, port, metrics_port, log)
    deadline = time.monotonic() + 20
    try:
        while not healthy(environ, port):
            if proc.poll() is not None:
                said = log.read_text()
                taken = "cannot listen for" in said and "in use" in said
                raise (_PortTaken if taken else AssertionError)(said)
            assert time.monotonic() < deadline, f"{command} not healthy: {log.read_text()}"
            time.sleep(0.2)
    except BaseException:
        # Not left running: a service too slow to come up on a loaded machine outlived its
        # test run (found serving 20 minutes on).
        proc.kill()
        proc.wait()
        raise
    return service


def start(module: str, tmp: Path, env: dict[str, str] | None = None) -> Service:
    """``python -m <module>``, healthy when its own healthcheck says so."""
    protocol = "rest" if module.endswith("rest") else "grpc"
    check = [sys.executable, "-m", "wirelab.probe", protocol]

    def healthy(environ: dict[str, str], _: int) -> bool:
        return subprocess.run(check, env=environ, capture_output=True).returncode == 0

    return launch([sys.executable, "-m", module], protocol, tmp, healthy, env)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("services")


@pytest.fixture(scope="module")
def rest(tmp: Path) -> Iterator[Service]:
    service = start("wirelab.rest", tmp)
    yield service
    assert service.stop() == 0


@pytest.fixture(scope="module")
def rpc(tmp: Path) -> Iterator[Service]:
    service = start("wirelab.rpc", tmp)
    yield service
    assert service.stop() == 0


def test_rest_process_answers_and_exports(rest: Service) -> None:
    base = f"http://127.0.0.1:{rest.port}"
    assert (
        httpx.post(f"{base}/v1/orders", json={"order": {"order_id": "x"}}).json()["order_id"] == "x"
    )
    pieces = [core.payload(64 * 1024)] * 8
    digest = httpx.post(f"{base}/v1/blobs/stream", content=iter(pieces), timeout=10).json()
    assert digest["size"] == 8 * 64 * 1024
    labels = 'kind="upload_chunked",outcome="ok",protocol="rest"'
    assert rest.metric(f'wirelab_server_requests_total{{code="200",{labels}}}') == 1
    # A body streamed in pieces arrives as several ASGI messages, each counted.
    received = 'wirelab_server_messages_received_total{kind="upload_chunked",protocol="rest"}'
    assert rest.metric(received) > 1
    assert rest.metric("process_resident_memory_bytes") > 0
    info = 'wirelab_server_info{client="none",concurrency="async",fanout="none",protocol="rest"}'
    assert rest.metric(info) == 1


def test_rest_client_disconnect_mid_stream_is_cancelled(rest: Service) -> None:
    url = f"http://127.0.0.1:{rest.port}/v1/stream"
    with httpx.stream("GET", url, params={"count": 100, "size": 10, "interval_ms": 20}) as r:
        next(r.iter_lines())
    cancelled = (
        'wirelab_server_requests_total{code="499",kind="server_stream",'
        'outcome="cancelled",protocol="rest"}'
    )
    assert rest.wait_for(cancelled, 1) == 1
    assert "Traceback" not in rest.log.read_text()


def test_grpc_process_answers_and_exports(rpc: Service) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{rpc.port}") as channel:
        stub = pb_grpc.WireLabStub(channel)
        assert stub.ProcessOrder(pb.OrderRequest(order=pb.Order(order_id="x"))).order_id == "x"
        call = stub.StreamMessages(pb.StreamRequest(count=100, size=10, interval_ms=20))
        for _ in call:
            break
        call.cancel()
    ok = 'wirelab_server_requests_total{code="OK",kind="unary",outcome="ok",protocol="grpc"}'
    assert rpc.metric(ok) == 1
    cancelled = (
        'wirelab_server_requests_total{code="CANCELLED",kind="server_stream",'
        'outcome="cancelled",protocol="grpc"}'
    )
    assert rpc.wait_for(cancelled, 1) == 1
    assert "Traceback" not in rpc.log.read_text()


def test_pages_carry_no_created_series(rest: Service, rpc: Service) -> None:
    """A ``_created`` sample per series is one more series Prometheus ingests (text 0.0.4 has no
    place for it but a series of its own) that no query reads."""
    for service in (rest, rpc):
        text = httpx.get(f"http://127.0.0.1:{service.metrics_port}/metrics", timeout=5).text
        assert "wirelab_server_requests_total{" in text
        assert "_created" not in text


@pytest.mark.parametrize("module", ["wirelab.rest", "wirelab.rpc"])
def test_port_in_use_fails_loudly(module: str, tmp: Path) -> None:
    first = start(module, tmp)
    try:
        knob = "WIRELAB_REST_PORT" if module.endswith("rest") else "WIRELAB_GRPC_PORT"
        env = {
            **os.environ,
            "WIRELAB_HOST": "127.0.0.1",
            knob: str(first.port),
            "WIRELAB_METRICS_PORT": str(free_port()),
        }
        second = subprocess.run(
            [sys.executable, "-m", module], env=env, capture_output=True, timeout=20
        )
        assert second.returncode != 0
        assert b"cannot listen" in second.stderr and str(first.port).encode() in second.stderr
    finally:
        assert first.stop() == 0


def test_a_port_taken_before_the_service_binds_it_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tests' own launcher: a port found free and taken before the service binds it (seen
    in CI) starts the service again on new ports, rather than failing the test."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        unused = free_port
        ports = iter([port])
        monkeypatch.setattr(sys.modules[__name__], "free_port", lambda: next(ports, 0) or unused())
        service = start("wirelab.rest", tmp_path)
    try:
        assert service.port != port
        refused, serving = sorted(tmp_path.glob("*.log"), key=lambda p: p.stat().st_mtime)
        assert "cannot listen for" in refused.read_text()
        assert f"-{service.port}-" in serving.name
    finally:
        assert service.stop() == 0


def _read_rest_stream(port: int, out: list[int]) -> None:
    url = f"http://127.0.0.1:{port}/v1/stream"
    with httpx.stream(
        "GET", url, params={"count": 10, "size": 10, "interval_ms": 100}, timeout=10
    ) as r:
        out.extend(1 for _ in r.iter_lines() if _)


def _read_grpc_stream(port: int, out: list[int]) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = pb_grpc.WireLabStub(channel).StreamMessages(
            pb.StreamRequest(count=10, size=10, interval_ms=100), timeout=10
        )
        out.extend(1 for _ in call)


@pytest.mark.parametrize(
    ("module", "reader", "env"),
    [
        ("wirelab.rest", _read_rest_stream, {}),
        ("wirelab.rpc", _read_grpc_stream, {}),
        ("wirelab.rpc", _read_grpc_stream, {"WIRELAB_GRPC_SERVER": "sync"}),
    ],
)
def test_sigterm_drains_in_flight_stream(
    module: str, reader: object, env: dict[str, str], tmp: Path
) -> None:
    service = start(module, tmp, env)
    received: list[int] = []
    client = threading.Thread(target=reader, args=(service.port, received))  # type: ignore[arg-type]
    client.start()
    time.sleep(0.35)  # the stream is under way (about 1 s long)
    started = time.monotonic()
    assert service.stop() == 0
    client.join(timeout=10)
    assert len(received) == 10, service.log.read_text()
    assert time.monotonic() - started < 5

"""Every case of cases.py against every runtime of its protocol, each service a real process on
free loopback ports: the status the case states, exactly the wirelab_server_requests_total
increments it states (no other series moves), and the process still running afterwards."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from wirelab.rpc.kinds import METHOD_KINDS, SERVICE

from tests.conformance.cases import CASES, ENV, RUNTIMES, Case, Counts, Grpc, Rest
from tests.node.conftest import node_binary
from tests.node.test_conformance import start_node
from tests.services.test_integration import Service, start

pytestmark = pytest.mark.integration


def _raw(data: bytes) -> bytes:
    return data


SERVER_STREAMS = {"StreamMessages", "DownloadStream"}
CLIENT_STREAMS = {"UploadStream", "PingPong"}


class Services:
    """One service per (runtime, protocol), started when a case first needs it."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.running: dict[tuple[str, str], Service] = {}

    def get(self, runtime: str, protocol: str) -> Service:
        key = (runtime, protocol)
        # A case that ended its service has failed; the cases after it get a fresh one.
        if key not in self.running or self.running[key].proc.poll() is not None:
            if runtime == "python":
                module = "wirelab.rest" if protocol == "rest" else "wirelab.rpc"
                self.running[key] = start(module, self.tmp, ENV)
            else:
                self.running[key] = start_node(node_binary(), protocol, self.tmp, ENV)
        return self.running[key]


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    running = Services(tmp_path_factory.mktemp("conformance-suite"))
    yield running
    stopped = {key: (s.stop(), s.log) for key, s in running.running.items()}
    assert {key: code for key, (code, _) in stopped.items() if code != 0} == {}, [
        log.read_text() for code, log in stopped.values() if code != 0
    ]


def samples(service: Service, name: str) -> Iterator[tuple[dict[str, str], float]]:
    """Labels and value of every sample ``name`` on the service's page (label order is each
    runtime's own)."""
    text = httpx.get(f"http://127.0.0.1:{service.metrics_port}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                yield s.labels, s.value


def requests_total(service: Service) -> Counts:
    return {
        (labels["kind"], labels["outcome"], labels["code"]): int(value)
        for labels, value in samples(service, "wirelab_server_requests_total")
        if value
    }


def wait_in_flight(service: Service, kind: str) -> None:
    """Until a call of ``kind`` is in flight (at most 5 s)."""
    deadline = time.monotonic() + 5
    name = "wirelab_server_requests_in_flight"
    while time.monotonic() < deadline:
        if any(labels["kind"] == kind and value for labels, value in samples(service, name)):
            return
        time.sleep(0.05)


def moved(before: Counts, after: Counts) -> Counts:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def send_rest(service: Service, request: Rest) -> int | None:
    """The status the server answered with, None if it closed the connection without one."""
    received = b""
    with socket.create_connection(("127.0.0.1", service.port), timeout=request.timeout) as conn:
        conn.sendall(request.data)
        if request.leave:
            wait_in_flight(service, request.leave)
            return None
        try:
            while piece := conn.recv(65536):
                received += piece
        except (TimeoutError, ConnectionResetError):
            pass
    if not received.startswith(b"HTTP/1.1 "):
        return None
    return int(received[9:12])


def send_grpc(service: Service, request: Grpc) -> str:
    """The status code's name the call ended with."""
    path = request.method if request.method.startswith("/") else f"/{SERVICE}/{request.method}"
    metadata = request.metadata or None
    with grpc.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        try:
            if request.method in CLIENT_STREAMS:
                return _client_stream(service, channel, path, request)
            if request.method in SERVER_STREAMS:
                call = channel.unary_stream(path, _raw, _raw)
                for _ in call(request.messages[0], timeout=request.timeout, metadata=metadata):
                    pass
            else:
                channel.unary_unary(path, _raw, _raw)(
                    request.messages[0], timeout=request.timeout, metadata=metadata
                )
        except grpc.RpcError as exc:
            return str(exc.code().name)
    return "OK"


def _client_stream(service: Service, channel: grpc.Channel, path: str, request: Grpc) -> str:
    sent = threading.Event()
    stop = threading.Event()

    def messages() -> Iterator[bytes]:
        yield from request.messages
        sent.set()
        if request.cancel:
            stop.wait(request.timeout)

    metadata = request.metadata or None
    call: Any  # a stream's rendezvous or a future: both cancel, each finishes its own way
    if request.method == "PingPong":
        call = channel.stream_stream(path, _raw, _raw)(
            messages(), timeout=request.timeout, metadata=metadata
        )
    else:
        call = channel.stream_unary(path, _raw, _raw).future(
            messages(), timeout=request.timeout, metadata=metadata
        )
    if request.cancel:
        # Cancelled once the server has the call and the client has sent every message (the
        # stream carries them before the cancel): a cancel mid-stream, not before it.
        sent.wait(request.timeout)
        wait_in_flight(service, METHOD_KINDS[path])
        call.cancel()
        stop.set()
        return "CANCELLED"
    try:
        if request.method == "PingPong":
            for _ in call:
                pass
        else:
            call.result()
    except grpc.RpcError as exc:
        return str(exc.code().name)
    return "OK"


def params() -> list[Any]:
    """Every case on every runtime; one a case leaves out is skipped, saying why."""
    found = []
    for case in CASES:
        assert case.why or case.runtimes == RUNTIMES, f"{case.name} leaves a runtime out: why?"
        for runtime in RUNTIMES:
            marks = [] if runtime in case.runtimes else [pytest.mark.skip(reason=case.why)]
            found.append(pytest.param(runtime, case, id=f"{runtime}-{case.name}", marks=marks))
    return found


@pytest.mark.parametrize(("runtime", "case"), params())
def test_case(runtime: str, case: Case, services: Services) -> None:
    service = services.get(runtime, case.protocol)
    before = requests_total(service)
    if isinstance(case.request, Rest):
        status: int | str | None = send_rest(service, case.request)
    else:
        status = send_grpc(service, case.request)
    assert service.proc.poll() is None, f"the request ended the process: {service.log.read_text()}"
    assert status == case.status
    # Servers record a call as it ends, which may be a moment after the client has its answer.
    deadline = time.monotonic() + 5
    while (counts := moved(before, requests_total(service))) != case.counts:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert counts == case.counts

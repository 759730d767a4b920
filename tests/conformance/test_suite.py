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

from tests.conformance.cases import CASES, ENV, Case, Counts, Grpc, Rest
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


def requests_total(service: Service) -> Counts:
    text = httpx.get(f"http://127.0.0.1:{service.metrics_port}/metrics", timeout=5).text
    found: Counts = {}
    for family in text_string_to_metric_families(text):
        if family.name == "wirelab_server_requests":
            for s in family.samples:
                if s.name.endswith("_total") and s.value:
                    key = (s.labels["kind"], s.labels["outcome"], s.labels["code"])
                    found[key] = int(s.value)
    return found


def moved(before: Counts, after: Counts) -> Counts:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def send_rest(service: Service, request: Rest) -> int | None:
    """The status the server answered with, None if it closed the connection without one."""
    received = b""
    with socket.create_connection(("127.0.0.1", service.port), timeout=request.timeout) as conn:
        conn.sendall(request.data)
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
    path = f"/{SERVICE}/{request.method}"
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

    kind = METHOD_KINDS[path]
    received = f'wirelab_server_messages_received_total{{kind="{kind}",protocol="grpc"}}'
    before = service.metric(received)
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
        sent.wait(request.timeout)
        # Cancelled once the server has every message: a cancel mid-stream, not before it.
        service.wait_for(received, before + len(request.messages))
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


@pytest.mark.parametrize(
    ("runtime", "case"),
    [pytest.param(r, c, id=f"{r}-{c.name}") for c in CASES for r in c.runtimes],
)
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

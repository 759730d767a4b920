"""REST clients that go away or misbehave, in-process at the ASGI level: counted, never a 500."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from starlette.types import Message, Scope
from starlette.websockets import WebSocketDisconnect
from wirelab.metrics import ServerMetrics
from wirelab.rest.app import create_app
from wirelab.rest.protobuf import PROTOBUF
from wirelab.rest.protocol import BODY_TIMED_OUT
from wirelab.v1 import wirelab_pb2 as pb

from tests.services.conftest import requests, settings


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize(
    ("timed_out", "outcome", "code"), [(False, "cancelled", "499"), (True, "timeout", "408")]
)
@pytest.mark.parametrize(
    ("path", "kind", "length"),
    [
        ("/v1/blobs", "upload", 4096),
        ("/v1/blobs", "upload", None),
        ("/v1/blobs/json", "upload_json", 4096),
        ("/v1/blobs/stream", "upload_chunked", None),
        ("/v1/orders", "unary", 4096),
        ("/v1/orders", "unary", None),
    ],
)
async def test_client_gone_mid_body_is_counted(
    mode: str, timed_out: bool, outcome: str, code: str, path: str, kind: str, length: int | None
) -> None:
    # A piece of the body, then the server learns the client is gone (closed, half-closed,
    # broken chunked framing, or cut off by the body read timeout: uvicorn reports each so, and
    # rest/protocol.py marks the scope of a call it cut off). Orders were counted 400: FastAPI
    # reads their body itself and answers any failure to read it so.
    headers = [(b"content-type", b"application/octet-stream")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    scope = _post(path, headers)
    if timed_out:
        scope[BODY_TIMED_OUT] = True
    registry = CollectorRegistry()
    sent = await _call(mode, registry, scope, b"{" * 1024, more_body=True)
    assert sent == []
    assert requests(registry, "rest", kind, outcome, code) == 1
    assert requests(registry, "rest", kind, "client_error", "400") == 0
    assert requests(registry, "rest", kind, "server_error", "500") == 0


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize(
    ("media", "body"),
    [
        ("application/json", b'{"order": {"order_id": "o"}, "work_ms": 500}'),
        (PROTOBUF, pb.OrderRequest(order=pb.Order(order_id="o"), work_ms=500).SerializeToString()),
    ],
)
async def test_an_order_stops_working_when_its_client_has_gone(
    mode: str, media: str, body: bytes
) -> None:
    # The whole order, then the client goes while the order works. Before, the work ran on to
    # its end (work_ms=20000 stayed in flight 19 s after the client left) and was counted 200.
    headers = [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]
    registry = CollectorRegistry()
    sent = await _call(mode, registry, _post("/v1/orders", headers), body, more_body=False)
    assert sent == []
    assert requests(registry, "rest", "unary", "cancelled", "499") == 1
    assert requests(registry, "rest", "unary", "ok", "200") == 0


def _post(path: str, headers: list[tuple[bytes, bytes]]) -> Scope:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test"), *headers],
        "server": ("test", 80),
        "client": ("test", 1),
    }


async def _call(
    mode: str, registry: CollectorRegistry, scope: Scope, body: bytes, more_body: bool
) -> list[Message]:
    """Call the app with ``body``, then tell it the client has gone; what the app sent."""
    app = create_app(settings(rest_handlers=mode), ServerMetrics("rest", registry, mode))
    incoming: list[Message] = [
        {"type": "http.request", "body": body, "more_body": more_body},
        {"type": "http.disconnect"},
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0) if len(incoming) > 1 else incoming[0]

    async def send(message: Message) -> None:
        sent.append(message)

    with TestClient(app):  # runs the lifespan (the sync pool's size)
        await app(scope, receive, send)
    return sent


def test_deeply_nested_ping_closes_1007(rest: TestClient, registry: CollectorRegistry) -> None:
    # json.loads recursed into 100,000 brackets until RecursionError: no close frame, a 500.
    with rest.websocket_connect("/v1/pingpong") as ws:
        ws.send_text("[" * 100_000)
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    assert closed.value.code == 1007
    assert closed.value.reason == "ping frame is nested too deeply"
    assert requests(registry, "rest", "bidi", "client_error", "400") == 1

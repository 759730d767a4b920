"""The REST metrics middleware at the ASGI level, with apps that misbehave in ways FastAPI's routes
never do: raising, answering nothing, odd statuses. Both the one-body path (``POST /v1/orders``
with a Content-Length) and the general path must record every call exactly once."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from starlette.types import Message, Receive, Scope, Send
from wirelab.core import Limits
from wirelab.metrics import ServerMetrics
from wirelab.rest.middleware import MetricsMiddleware
from wirelab.rest.orderlimit import OrderBodyLimit

from tests.services.conftest import requests, value

App = Callable[[Scope, Receive, Send], Awaitable[None]]
BODY = b'{"order": {}}'


def _scope(method: str, path: str, length: int | None) -> Scope:
    headers = [(b"host", b"test"), (b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http", "method": method, "path": path, "headers": headers}


async def _call(app: App, scope: Scope) -> list[Message]:
    sent: list[Message] = []
    chunks = [BODY[:5], BODY[5:]] if scope["method"] == "POST" else [b""]

    async def receive() -> Message:
        body = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": body, "more_body": bool(chunks)}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def _measured(inner: App) -> tuple[MetricsMiddleware, CollectorRegistry]:
    registry = CollectorRegistry()
    return MetricsMiddleware(inner, ServerMetrics("rest", registry, "async")), registry


async def _answer(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": body})


# (method, path, Content-Length): the one-body path, then the general path for the same route
# without a length and for another route.
PATHS = [
    pytest.param("POST", "/v1/orders", len(BODY), id="orders-with-length"),
    pytest.param("POST", "/v1/orders", None, id="orders-chunked"),
    pytest.param("POST", "/v1/blobs", len(BODY), id="upload"),
]
KIND = {"/v1/orders": "unary", "/v1/blobs": "upload"}


@pytest.mark.parametrize(("method", "path", "length"), PATHS)
async def test_an_answer_is_recorded_once_with_its_bytes(
    method: str, path: str, length: int | None
) -> None:
    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        while (await receive()).get("more_body"):
            pass
        await _answer(send, 201, b"created!")

    app, registry = _measured(inner)
    await _call(app, _scope(method, path, length))
    labels = {"protocol": "rest", "kind": KIND[path]}
    assert requests(registry, "rest", KIND[path], "ok", "201") == 1
    assert value(registry, "wirelab_server_request_bytes_sum", **labels) == len(BODY)
    assert value(registry, "wirelab_server_response_bytes_sum", **labels) == len(b"created!")
    assert value(registry, "wirelab_server_messages_sent_total", **labels) == 1
    assert value(registry, "wirelab_server_requests_in_flight", **labels) == 0


@pytest.mark.parametrize(("method", "path", "length"), PATHS)
async def test_an_app_that_raises_is_a_server_error(
    method: str, path: str, length: int | None
) -> None:
    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    app, registry = _measured(inner)
    with pytest.raises(RuntimeError, match="boom"):
        await _call(app, _scope(method, path, length))
    labels = {"protocol": "rest", "kind": KIND[path]}
    assert requests(registry, "rest", KIND[path], "server_error", "500") == 1
    assert value(registry, "wirelab_server_messages_sent_total", **labels) == 0
    assert value(registry, "wirelab_server_requests_in_flight", **labels) == 0


@pytest.mark.parametrize(("method", "path", "length"), PATHS)
async def test_no_answer_is_a_cancelled_call(method: str, path: str, length: int | None) -> None:
    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()

    app, registry = _measured(inner)
    await _call(app, _scope(method, path, length))
    labels = {"protocol": "rest", "kind": KIND[path]}
    assert requests(registry, "rest", KIND[path], "cancelled", "499") == 1
    assert value(registry, "wirelab_server_requests_in_flight", **labels) == 0


async def test_one_body_duration_covers_the_whole_call() -> None:
    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(0.03)
        await _answer(send, 200, b"{}")

    app, registry = _measured(inner)
    await _call(app, _scope("POST", "/v1/orders", len(BODY)))
    labels = {"protocol": "rest", "kind": "unary"}
    name = "wirelab_server_request_duration_seconds"
    assert value(registry, f"{name}_sum", **labels) >= 0.03
    assert value(registry, f"{name}_bucket", le="0.02", **labels) == 0


async def test_in_flight_while_the_app_runs() -> None:
    inside = asyncio.Event()
    release = asyncio.Event()

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        inside.set()
        await release.wait()
        await _answer(send, 200, b"{}")

    app, registry = _measured(inner)
    task = asyncio.create_task(_call(app, _scope("POST", "/v1/orders", len(BODY))))
    await inside.wait()
    labels: dict[str, Any] = {"protocol": "rest", "kind": "unary"}
    assert value(registry, "wirelab_server_requests_in_flight", **labels) == 1
    release.set()
    await task
    assert value(registry, "wirelab_server_requests_in_flight", **labels) == 0


async def test_queued_calls_give_the_garbage_collector_nothing_to_track() -> None:
    # Records wait in the queue until a scrape; a tracked object per call would drive young
    # collections and promotions (measured 0.65 us a call). Scalars in a flat queue are untracked.
    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        await _answer(send, 200, b"{}")

    app, registry = _measured(inner)
    scope = _scope("POST", "/v1/orders", len(BODY))
    await _call(app, dict(scope))
    gc.collect()
    tracked = len(gc.get_objects())
    for _ in range(2000):
        await _call(app, dict(scope))
    assert len(gc.get_objects()) - tracked < 100
    assert requests(registry, "rest", "unary", "ok", "200") == 2001


class _CountedLimit(OrderBodyLimit):
    """The order body limit, counting the calls that pass through its layer."""

    passed = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        type(self).passed += 1
        await super().__call__(scope, receive, send)


@pytest.mark.parametrize(
    ("length", "through_layer", "status"),
    [
        pytest.param(len(BODY), 0, 201, id="within-the-limit"),
        pytest.param(len(BODY) + 1, 1, 413, id="over-the-limit"),
        pytest.param(None, 1, 201, id="no-length"),
    ],
)
async def test_an_order_of_known_length_within_the_limit_skips_the_limits_layer(
    length: int | None, through_layer: int, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lean path makes the order body limit's comparison itself and calls the app inside
    that layer; an order over the limit, or of no stated length, passes through the layer, and
    each is recorded with the status the client got and the body bytes the service read."""
    monkeypatch.setattr(_CountedLimit, "passed", 0)

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        while (await receive()).get("more_body"):
            pass
        await _answer(send, 201, b"created!")

    app, registry = _measured(_CountedLimit(inner, Limits(max_order_bytes=len(BODY))))
    sent = await _call(app, _scope("POST", "/v1/orders", length))
    assert sent[0]["status"] == status
    assert _CountedLimit.passed == through_layer
    outcome = "ok" if status == 201 else "client_error"
    assert requests(registry, "rest", "unary", outcome, str(status)) == 1
    # The bytes the service read: none of an order refused by its stated length.
    read = value(registry, "wirelab_server_request_bytes_sum", protocol="rest", kind="unary")
    assert read == (0 if status == 413 else len(BODY))

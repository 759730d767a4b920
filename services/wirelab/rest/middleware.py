"""Pure ASGI metrics middleware: times each call to its last body byte and counts body bytes."""

from __future__ import annotations

import sys
from collections.abc import Awaitable
from dataclasses import dataclass, field
from time import perf_counter

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wirelab.contract import OTHER_KIND, STREAM_KINDS, http_outcome
from wirelab.metrics import FLUSH_MASK, ServerMetrics
from wirelab.rest.orderlimit import OrderBodyLimit
from wirelab.rest.protocol import BODY_TIMED_OUT

# (method, path) -> kind. Anything else that is not an operational endpoint counts as "other",
# so 404s and 405s still show up in the request counter.
KINDS = {
    ("POST", "/v1/orders"): "unary",
    ("GET", "/v1/stream"): "server_stream",
    ("POST", "/v1/blobs"): "upload",
    ("POST", "/v1/blobs/json"): "upload_json",
    ("POST", "/v1/blobs/stream"): "upload_chunked",
    ("GET", "/v1/blobs"): "download",
    ("GET", "/v1/blobs/json"): "download_json",
    ("GET", "/v1/blobs/stream"): "download_chunked",
}
WEBSOCKET_KINDS = {"/v1/pingpong": "bidi"}
UNMEASURED = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
# Close codes the server sends for bad ping frames, as the HTTP status they stand for.
_CLOSE_STATUS = {1000: 101, 1007: 400, 1008: 400, 1009: 413}
_CLEAN_CLIENT_CLOSE = frozenset({1000, 1001, 1005})
# What the client's going away is recorded as when it closed no handshake: 1006, "abnormal".
_DROPPED = 1006
# Every status h11 allows (100-999) as (outcome, code), and 0 for none sent (the app returned
# without answering: the client went away): one plain dict lookup on the hot paths.
_STATUS = {0: ("cancelled", "499"), **{s: (http_outcome(s), str(s)) for s in range(100, 1000)}}


def _gone(scope: Scope) -> tuple[str, str]:
    """How a call cut off mid-body is recorded: a timeout when the server's body read timeout
    cut it (rest/protocol.py answered 408), else a client that went away."""
    return ("timeout", "408") if scope.get(BODY_TIMED_OUT) else ("cancelled", "499")


def _frame_bytes(message: Message) -> int:
    """A WebSocket frame's payload bytes: a text frame's as UTF-8."""
    text = message.get("text")
    if text is None:
        return len(message.get("bytes") or b"")
    return len(text) if text.isascii() else len(text.encode())


class _Route:
    """One (method, path) resolved once: its instruments and how its bodies are counted."""

    __slots__ = ("bound", "first", "length_in", "messages_in", "messages_out", "wrap_receive")

    def __init__(self, metrics: ServerMetrics, method: str, kind: str) -> None:
        self.bound = metrics.bound(kind)
        # A streamed body counts each ASGI body message (None here); a plain one is one message.
        self.messages_in = None if kind == "upload_chunked" else 1
        self.messages_out = None if kind in ("server_stream", "download_chunked") else 1
        # Time to first message is a stream measurement; other kinds skip the clock read.
        self.first = kind in STREAM_KINDS
        # With a Content-Length, POST /v1/orders's body is exactly that many bytes (FastAPI reads
        # it whole before answering): receive needs no wrapper. GET and HEAD carry no body.
        self.length_in = kind == "unary"
        self.wrap_receive = method not in ("GET", "HEAD")


# A slotted object, not closures per request: docs/services.md#a-slotted-call-object
@dataclass(slots=True, eq=False)
class _HttpCall:
    """One HTTP call being measured, timed from its making: wraps send (and receive, for a
    method with a body), records once at the last byte."""

    metrics: ServerMetrics
    route: _Route
    _receive: Receive
    _send: Send
    started: float = field(default_factory=perf_counter)
    status: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    pieces_in: int = 0
    pieces_out: int = 0
    first: float | None = None
    done: bool = False

    def finish(self, outcome: str, code: str) -> None:
        self.done = True
        route = self.route
        # A whole body counts once as a message, and not at all when none was sent.
        self.metrics.enqueue(
            (route.bound, outcome, code, perf_counter() - self.started, self.first, self.bytes_in,
             self.bytes_out, route.messages_in or self.pieces_in,
             self.pieces_out if route.messages_out is None else min(1, self.pieces_out))
        )  # fmt: skip

    async def receive(self) -> Message:
        message = await self._receive()
        body = message.get("body")
        if body:
            self.bytes_in += len(body)
            self.pieces_in += 1
        return message

    async def send(self, message: Message) -> None:
        await self._send(message)
        if message["type"] == "http.response.start":
            self.status = message["status"]
            return
        body = message.get("body")
        if body:
            self.bytes_out += len(body)
            self.pieces_out += 1
            if self.first is None and self.route.first:
                self.first = perf_counter() - self.started
        if not message.get("more_body", False):
            # Whole-call duration ends here: the last body byte has been handed to the server.
            self.finish(*_STATUS[self.status])


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics
        self.enqueue = metrics.enqueue
        self.routes = {key: _Route(metrics, key[0], kind) for key, kind in KINDS.items()}
        # An order of known length within the order body limit skips that layer when it is next
        # (no concurrency cap between): docs/services.md#the-order-skips-the-limits-layer
        self.orders_app, self.max_order_bytes = app, sys.maxsize
        if isinstance(app, OrderBodyLimit):
            self.orders_app, self.max_order_bytes = app.app, app.limits.max_order_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /v1/orders`` with a Content-Length, one body each way, is measured here with the
        fewest Python calls (docs/services.md#lean-paths); the rest by :meth:`_measure`."""
        if scope["type"] == "http":
            route = self.routes.get((scope["method"], scope["path"]))
            if route is not None and route.length_in:
                length = -1
                for name, value in scope["headers"]:
                    if name == b"content-length":
                        length = int(value)
                        break
                if 0 <= length <= self.max_order_bytes:
                    started = perf_counter()
                    bound = route.bound
                    arrived = bound.arrived = bound.arrived + 1
                    status = sent = 0

                    def counting_send(message: Message) -> Awaitable[None]:
                        nonlocal status, sent
                        if message["type"] == "http.response.start":
                            status = message["status"]
                        else:
                            sent += len(message.get("body", b""))
                        return send(message)

                    try:
                        await self.orders_app(scope, receive, counting_send)
                    except ClientDisconnect:
                        # The client went away while sending the body: nothing to answer.
                        took = perf_counter() - started
                        outcome, code = _gone(scope)
                        self.enqueue((bound, outcome, code, took, None, length, sent, 1, 0))
                        return
                    except BaseException:
                        took = perf_counter() - started
                        record = (bound, "server_error", "500", took, None, length, sent, 1, 0)
                        self.enqueue(record)
                        raise
                    took = perf_counter() - started
                    outcome, code = _STATUS[status]
                    self.enqueue((bound, outcome, code, took, None, length, sent, 1, sent and 1))
                    if not arrived & FLUSH_MASK:  # bounds the queue between scrapes
                        self.metrics.flush()
                    return
        await self._measure(scope, receive, send)

    async def _measure(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope_type = scope["type"]
        if scope_type == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope_type != "http" or scope["path"] in UNMEASURED:
            await self.app(scope, receive, send)
            return
        method, path, metrics = scope["method"], scope["path"], self.metrics
        route = self.routes.get((method, path)) or _Route(metrics, method, OTHER_KIND)
        call = _HttpCall(metrics, route, receive, send)
        metrics.enter(route.bound)
        if route.wrap_receive:
            receive = call.receive
        try:
            await self.app(scope, receive, call.send)
        except ClientDisconnect:
            # The client went away mid-body (Starlette raises this from the body stream): not a
            # server fault, and nobody is left to answer, so it ends here, not in a traceback.
            if not call.done:
                call.finish(*_gone(scope))
            return
        except BaseException:
            if not call.done:
                call.finish("server_error", "500")
            raise
        if not call.done:
            # The response never completed: the client went away mid-response.
            call.finish("cancelled", "499")

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = self.metrics.start(WEBSOCKET_KINDS.get(scope["path"], OTHER_KIND))
        status = 403  # closed before the handshake was accepted
        client_code = 0

        async def counting_receive() -> Message:
            nonlocal client_code
            message = await receive()
            if message["type"] == "websocket.receive":
                call.received(_frame_bytes(message))
            elif message["type"] == "websocket.disconnect":
                client_code = message.get("code", 1005)
                # uvicorn reports a lost connection as 1005 too ("no status"), the code of a
                # close frame without one; only a close frame's disconnect carries a reason.
                if client_code == 1005 and "reason" not in message:
                    client_code = _DROPPED
            return message

        async def counting_send(message: Message) -> None:
            nonlocal status, client_code
            try:
                await send(message)
            except OSError:  # uvicorn's ClientDisconnected: the connection is gone
                client_code = client_code or _DROPPED
                raise
            mtype = message["type"]
            if mtype == "websocket.send":
                call.sent(_frame_bytes(message))
            elif mtype == "websocket.accept":
                status = 101
            elif mtype == "websocket.close" and status == 101:
                status = _CLOSE_STATUS.get(message.get("code", 1000), 500)

        try:
            await self.app(scope, counting_receive, counting_send)
        except BaseException:
            call.finish("server_error", "500")
            raise
        if client_code and client_code not in _CLEAN_CLIENT_CLOSE:
            call.finish("cancelled", "499")
        else:
            call.finish(*_STATUS[status])

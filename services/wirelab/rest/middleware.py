"""Pure ASGI metrics middleware: times each call to its last body byte and counts body bytes."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wirelab.metrics import Call, ServerMetrics, http_outcome

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
OTHER_KIND = "other"
UNMEASURED = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
# Kinds whose body is a stream of messages (each ASGI body message counts as one).
STREAMED_IN = frozenset({"upload_chunked"})
STREAMED_OUT = frozenset({"server_stream", "download_chunked"})
# Close codes the server sends for bad ping frames, as the HTTP status they stand for.
_CLOSE_STATUS = {1000: 101, 1007: 400, 1008: 400, 1009: 413}
_CLEAN_CLIENT_CLOSE = frozenset({1000, 1001, 1005})
_BODYLESS = frozenset({"GET", "HEAD"})
_CODE = {status: str(status) for status in (200, 400, 404, 405, 413, 422, 500)}


class _HttpCall:
    """One HTTP call being measured: wraps receive and send, records once at the last byte.
    A slotted object with two bound methods instead of per-request closures over a dozen cells:
    on this path every allocation shows in the observer-effect benchmark."""

    __slots__ = (
        "_receive",
        "_send",
        "bound",
        "bytes_in",
        "bytes_out",
        "done",
        "first",
        "kind",
        "metrics",
        "pieces_in",
        "pieces_out",
        "started",
        "status",
    )

    def __init__(self, metrics: ServerMetrics, kind: str, receive: Receive, send: Send) -> None:
        self.metrics = metrics
        self.kind = kind
        self.bound = metrics.begin(kind)
        self._receive = receive
        self._send = send
        self.started = time.perf_counter()
        self.status = self.bytes_in = self.bytes_out = self.pieces_in = self.pieces_out = 0
        self.first: float | None = None
        self.done = False

    def finish(self, outcome: str, code: str) -> None:
        self.done = True
        kind = self.kind
        # A plain body is one message whatever its size; a streamed body counts its pieces.
        self.metrics.record(
            self.bound,
            outcome,
            code,
            time.perf_counter() - self.started,
            self.first,
            self.bytes_in,
            self.bytes_out,
            self.pieces_in if kind in STREAMED_IN else 1,
            self.pieces_out if kind in STREAMED_OUT else 1,
        )

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
            if self.first is None:
                self.first = time.perf_counter() - self.started
        if not message.get("more_body", False):
            # Whole-call duration ends here: the last body byte has been handed to the server.
            status = self.status
            self.finish(http_outcome(status), _CODE.get(status) or str(status))


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope_type = scope["type"]
        if scope_type == "websocket":
            kind = WEBSOCKET_KINDS.get(scope["path"], OTHER_KIND)
            await self._websocket(self.metrics.start(kind), scope, receive, send)
            return
        if scope_type != "http" or scope["path"] in UNMEASURED:
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        kind = KINDS.get((method, scope["path"]), OTHER_KIND)
        call = _HttpCall(self.metrics, kind, receive, send)
        try:
            # GET and HEAD carry no body: their receive is left unwrapped.
            await self.app(scope, receive if method in _BODYLESS else call.receive, call.send)
        except BaseException:
            if not call.done:
                call.finish("server_error", "500")
            raise
        if not call.done:
            # The response never completed: the client went away mid-response.
            call.finish("cancelled", "499")

    async def _websocket(self, call: Call, scope: Scope, receive: Receive, send: Send) -> None:
        status = 403  # closed before the handshake was accepted
        client_code = 0

        async def counting_receive() -> Message:
            nonlocal client_code
            message = await receive()
            if message["type"] == "websocket.receive":
                text = message.get("text")
                if text is not None:
                    call.received(len(text) if text.isascii() else len(text.encode()))
                else:
                    call.received(len(message.get("bytes") or b""))
            elif message["type"] == "websocket.disconnect":
                client_code = message.get("code", 1005)
            return message

        async def counting_send(message: Message) -> None:
            nonlocal status
            await send(message)
            mtype = message["type"]
            if mtype == "websocket.send":
                text = message.get("text")
                if text is not None:
                    call.sent(len(text) if text.isascii() else len(text.encode()))
                else:
                    call.sent(len(message.get("bytes") or b""))
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
            call.finish(http_outcome(status), str(status))

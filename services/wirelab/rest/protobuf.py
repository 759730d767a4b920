"""Protobuf over REST: `POST /v1/orders` with an application/x-protobuf body, answered in kind."""

from __future__ import annotations

import anyio.to_thread
from fastapi.responses import JSONResponse, Response
from google.protobuf.message import DecodeError
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from wirelab import core
from wirelab.core import CoreError, Limits
from wirelab.rpc.replies import order_reply
from wirelab.v1 import wirelab_pb2 as pb

PROTOBUF = "application/x-protobuf"
_ACCEPTED = frozenset({PROTOBUF, "application/*", "*/*"})


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def accepts_protobuf(accept: str | None) -> bool:
    """Whether an Accept header lets the reply be protobuf: none, or one naming it or a wildcard
    over it with a weight above zero."""
    if accept is None:
        return True
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        weights = [p.split("=", 1)[1] for p in params if p.replace(" ", "").startswith("q=")]
        if media.lower() in _ACCEPTED and not (weights and float(weights[0] or 0) == 0):
            return True
    return False


def _problem(status: int, detail: str) -> Response:
    return JSONResponse({"detail": detail}, status_code=status)


class ProtobufOrders:
    """Answers orders whose Content-Type is ``application/x-protobuf``: the body is gRPC's
    ``OrderRequest``, the reply its ``OrderReply`` (the same messages and the same core call as
    ProcessOrder), errors the JSON ``{"detail": ...}`` of every other route with the statuses
    the JSON route gives (a body that does not parse: 400, as malformed input; over a limit:
    413). An Accept header that excludes protobuf: 406. JSON orders pass through untouched.

    A layer inside the order body limit (app.py), so an oversize protobuf order is refused as a
    JSON one is, and inside the metrics middleware, which counts its calls as any order."""

    def __init__(self, app: ASGIApp, limits: Limits, sync: bool) -> None:
        self.app = app
        self.limits = limits
        self.sync = sync

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] != "/v1/orders"
            or scope["method"] != "POST"
            or _media_type(_header(scope, b"content-type") or "") != PROTOBUF
        ):
            await self.app(scope, receive, send)
            return
        response = await self.answer(scope, receive)
        await response(scope, receive, send)

    async def answer(self, scope: Scope, receive: Receive) -> Response:
        if not accepts_protobuf(_header(scope, b"accept")):
            return _problem(406, f"a protobuf order is answered as {PROTOBUF} only")
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise ClientDisconnect  # recorded as the JSON route's: cancelled, 499
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        try:
            request = pb.OrderRequest.FromString(bytes(body))
        except DecodeError as exc:
            return _problem(400, f"body is not a protobuf wirelab.v1.OrderRequest: {exc}")
        o, limits = request.order, self.limits
        try:
            if self.sync:
                totals = await anyio.to_thread.run_sync(
                    core.process_order, o, request.work_ms, request.count_words, limits
                )
            else:
                totals = await core.process_order_async(
                    o, request.work_ms, request.count_words, limits
                )
        except CoreError as exc:
            return _problem(413 if exc.over_limit else 400, exc.message)
        return Response(order_reply(request, totals).SerializeToString(), media_type=PROTOBUF)

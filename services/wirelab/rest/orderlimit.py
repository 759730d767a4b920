"""The body limit of ``POST /v1/orders``: refused with 413 past ``max_order_bytes``."""

from __future__ import annotations

from collections import deque

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wirelab import core
from wirelab.core import CoreError, Limits


async def _read_ahead(receive: Receive, limits: Limits) -> Receive:
    """Receive an order sent without a length up to its limit (CoreError past it), then
    hand out the same messages again, and whatever follows from ``receive`` itself."""
    read: deque[Message] = deque()
    total = 0
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            break
        total += len(message.get("body", b""))
        if total > limits.max_order_bytes:
            raise core.order_too_large(limits)
        if not message.get("more_body", False):
            break

    async def replay() -> Message:
        return read.popleft() if read else await receive()

    return replay


class OrderBodyLimit:
    """Bounds the body of ``POST /v1/orders``, which FastAPI reads whole at any size (a 300 MiB
    order took the service to 1.25 GB RSS): a ``Content-Length`` over ``max_order_bytes`` is
    refused before a byte is read, a body without one is read up to the limit before the app
    sees it. Every other request passes straight through.

    A layer of its own rather than FastAPI's per-route ``max_body_size``: that one answers an
    oversize ``Content-Length`` with its own plain-text 413 in place of any response the app
    sends, so it could not carry the ``{"detail": ...}`` body every other error has."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/orders" and scope["method"] == "POST":
            length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
            try:
                if length is None:
                    receive = await _read_ahead(receive, self.limits)
                else:
                    core.check_order_size(int(length), self.limits)
            except CoreError as exc:
                await JSONResponse({"detail": exc.message}, status_code=413)(scope, receive, send)
                return
        await self.app(scope, receive, send)

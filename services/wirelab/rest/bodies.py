"""One-message bodies under the payload budget: uploads read whole, downloads sent until drained."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping

from fastapi import Request, Response
from starlette.types import Receive, Scope, Send

from wirelab.core import CoreError, PayloadBudget

# The last piece of a one-message response body is sent on its own (see DrainedResponse): the
# size of uvicorn's write-buffer high-water mark, so at most about this much is still in the
# process when the call ends.
TAIL_BYTES = 64 * 1024


def _declared_length(request: Request) -> int | None:
    declared = request.headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


def check_declared_length(request: Request, limit: int) -> None:
    """Refuse an announced oversize body before reading a byte of it."""
    declared = _declared_length(request)
    if declared is not None and declared > limit:
        raise CoreError(f"body of {declared} bytes is over the limit of {limit}", over_limit=True)


def body_reader(limit: int, budget: PayloadBudget) -> Callable[[Request], AsyncIterator[bytearray]]:
    """A dependency that reads a whole request body, refusing it once it passes ``limit`` and
    holding its bytes in ``budget`` until the response has been sent: the announced length
    before reading a byte (so an excess call is refused at once, body unread), or, without one,
    each piece as it arrives."""

    async def read_body(request: Request) -> AsyncIterator[bytearray]:
        check_declared_length(request, limit)
        declared = _declared_length(request)
        held = 0
        try:
            if declared is not None:
                budget.acquire(declared)
                held = declared
            # One growing buffer instead of a list of pieces joined at the end: the join held
            # the body twice at its peak.
            body = bytearray()
            async for part in request.stream():
                if len(body) + len(part) > limit:
                    raise CoreError(f"body is over the limit of {limit} bytes", over_limit=True)
                if len(body) + len(part) > held:
                    grow = len(body) + len(part) - held
                    budget.acquire(grow)
                    held += grow
                body += part
            yield body
        finally:
            budget.release(held)

    return read_body


class DrainedResponse(Response):
    """A one-message body whose call ends when the transport has taken nearly all of it.

    uvicorn's ``send`` writes a body into the transport's buffer and returns at once, so a 64 MiB
    download "ended" for the server (and its metrics span) while most of it was still buffered:
    75 ms of a 281 ms call as the client saw it. uvicorn waits for the buffer to drain before a
    write, not after, so the body goes out as two messages of one Content-Length body: all but
    the last TAIL_BYTES, then the tail once the buffer has drained below its low-water mark. The
    payload budget held for the body is released then, when the bytes have left the process.
    """

    def __init__(
        self,
        content: bytes,
        budget: PayloadBudget,
        held: int,
        media_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(content, media_type=media_type, headers=headers)
        self.budget = budget
        self.held = held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            body = memoryview(self.body)
            head = max(0, len(body) - TAIL_BYTES)
            if head:
                await send({"type": "http.response.body", "body": body[:head], "more_body": True})
            await send({"type": "http.response.body", "body": body[head:], "more_body": False})
        finally:
            self.budget.release(self.held)

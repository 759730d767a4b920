"""One-message bodies under the payload budget: uploads read whole, downloads sent until drained."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from fastapi import Request, Response
from starlette.types import Receive, Scope, Send

from wirelab.core import CoreError, PayloadBudget

# The last piece of a one-message response body is sent on its own (see DrainedResponse): the
# size of uvicorn's write-buffer high-water mark, so at most about this much is still in the
# process when the call ends.
TAIL_BYTES = 64 * 1024
# Peak memory of a JSON upload per body byte: a 64 MiB blob, 85 MiB of JSON, took the process
# 320 MiB over idle (tests/services/test_rest_memory.py): the body, the str pydantic makes of
# its base64, the bytes b64decode makes of that, and the blob.
JSON_UPLOAD_HOLDS = 4


def _declared_length(request: Request) -> int | None:
    declared = request.headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


def check_declared_length(request: Request, limit: int) -> None:
    """Refuse an announced oversize body before reading a byte of it."""
    declared = _declared_length(request)
    if declared is not None and declared > limit:
        raise CoreError(f"body of {declared} bytes is over the limit of {limit}", over_limit=True)


def body_reader(
    limit: int, budget: PayloadBudget, holds: int = 1
) -> Callable[[Request], AsyncIterator[bytearray]]:
    """A dependency that reads a whole request body, refusing it once it passes ``limit`` and
    holding ``holds`` times its bytes (what the handler keeps at its peak) in ``budget`` until
    the response has been sent: for the announced length before reading a byte (so an excess
    call is refused at once, body unread), or, without one, for each piece as it arrives."""

    async def read_body(request: Request) -> AsyncIterator[bytearray]:
        check_declared_length(request, limit)
        declared = _declared_length(request)
        held = 0
        try:
            if declared is not None:
                budget.acquire(declared * holds)
                held = declared * holds
            # One growing buffer instead of a list of pieces joined at the end: the join held
            # the body twice at its peak.
            body = bytearray()
            async for part in request.stream():
                if len(body) + len(part) > limit:
                    raise CoreError(f"body is over the limit of {limit} bytes", over_limit=True)
                if (len(body) + len(part)) * holds > held:
                    grow = (len(body) + len(part)) * holds - held
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
    write, not after, so the body goes out as several messages of one Content-Length body, the
    last TAIL_BYTES on their own once the buffer has drained below its low-water mark. The body
    may be given in parts (sent in turn, never joined into one more copy). The payload budget
    held for the call is released at the end, when the bytes have left the process.
    """

    def __init__(
        self,
        parts: Sequence[bytes],
        budget: PayloadBudget,
        held: int,
        media_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        length = {"content-length": str(sum(len(part) for part in parts))}
        super().__init__(None, media_type=media_type, headers={**(headers or {}), **length})
        self.parts = parts
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
            *first, last = [memoryview(part) for part in self.parts] or [memoryview(b"")]
            head = max(0, len(last) - TAIL_BYTES)
            for body in (*first, last[:head]):
                if body:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
            await send({"type": "http.response.body", "body": last[head:], "more_body": False})
        finally:
            self.budget.release(self.held)

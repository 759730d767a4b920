"""An order's work stops when its client has gone: the call then ends as a departure (499)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

T = TypeVar("T")


async def _departed(receive: Receive) -> None:
    # Once the body has been read, uvicorn's receive answers only when the connection is lost
    # (or the response is complete, which ends the call before this matters).
    while (await receive())["type"] != "http.disconnect":
        pass


async def until_gone(
    request: Request, work: Awaitable[T], gone: threading.Event | None = None
) -> T:
    """``work``'s result, or ClientDisconnect as soon as the client has gone, ``work`` then
    cancelled and ``gone`` set (a thread doing the work waits on it). Without this an order of
    ``work_ms=20000`` whose client left after 1 s worked 19 s more and was counted 200, where
    gRPC stops at once and counts the cancel."""
    job = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_departed(request.receive))
    try:
        done, _ = await asyncio.wait((job, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not job.done():
            job.cancel()
            if gone is not None:
                gone.set()
    if job not in done:
        raise ClientDisconnect
    return job.result()


async def departure(request: Request) -> AsyncIterator[threading.Event]:
    """A dependency for a plain ``def`` handler run in the thread pool: an event set when the
    client has gone, for the handler's blocking work to wait on instead of sleeping."""
    gone = threading.Event()

    async def watch() -> None:
        await _departed(request.receive)
        gone.set()

    task = asyncio.ensure_future(watch())
    try:
        yield gone
    finally:
        task.cancel()

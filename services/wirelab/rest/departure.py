"""An order's work stops when its client has gone: the call then ends as a departure (499)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import TypeVar

import anyio.from_thread
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

T = TypeVar("T")
# The departure watches of thread-pool handlers, until each ends.
_WATCHES: set[asyncio.Future[None]] = set()


async def _departed(receive: Receive) -> None:
    # Once the body has been read, uvicorn's receive answers only when the connection is lost
    # or the response is complete (which ends a watch whose call has ended).
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


def watched_from_thread(request: Request) -> threading.Event:
    """For a plain ``def`` handler in the thread pool: an event set once the client has gone,
    for its blocking work to wait on instead of sleeping. The watch runs on the event loop until
    the client goes or the response is complete (either ends uvicorn's receive)."""
    gone = threading.Event()
    anyio.from_thread.run_sync(_watch, request, gone)
    return gone


def _watch(request: Request, gone: threading.Event) -> None:
    async def watch() -> None:
        await _departed(request.receive)
        gone.set()

    # The loop keeps only a weak reference to a task.
    task = asyncio.ensure_future(watch())
    _WATCHES.add(task)
    task.add_done_callback(_WATCHES.discard)

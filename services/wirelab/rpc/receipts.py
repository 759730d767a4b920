"""One-message Uploads received a few at a time: what bounds the memory grpc's receipts take.

grpc receives a one-message request whole before handing it over, and only then can the payload
budget see its length: 6 and 12 concurrent 256 MiB Uploads took the service to 2,584 and 5,400
MiB of peak RSS, against the lab's 2 GiB container, though the budget admitted two of them. But
Upload's behaviour reads its message itself (measure.rebuild's streamed), and until it asks, grpc
takes no more of the message than the call's flow-control window. So each Upload waits its turn
here before it asks: at most ``limit`` messages in receipt at once, as many of the largest
message grpc accepts as the budget could hold, which adds at most half the budget (or one
message, when the budget holds less) to what the budget bounds, whatever the burst. The same
bursts now peak at 1,457 and 1,444 MiB (docs/services.md has the table and its command).

Waiting, not refusing: the length comes only with the message, so a refusal here would refuse a
1 KiB Upload behind a 256 MiB one, and many small concurrent Uploads (the IIT study's 1 MiB blobs
at up to 5,000 users) would be refused for the size they might have had. A wait is part of the
call's measured duration, which starts when the call arrives; the budget still refuses, counted,
what it cannot hold once the length is known.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import grpc.aio

from wirelab.rpc.intake import UPLOAD_HOLDS
from wirelab.rpc.measure import Handler, rebuild

UPLOAD = "Upload"
# How a call ends whose request message never arrived: its client went mid-message, or grpc
# refused the message (over its receive limit; grpc has answered RESOURCE_EXHAUSTED itself).
# The behaviour cannot tell which (aio hands over no message either way), so the call counts
# as the cancel grpc gives it out as; a client that sent none at all gets this status.
MISSING = "the request message never arrived"


def receipts_for(budget_bytes: int, message_limit: int) -> int:
    """Upload messages received at once: as many of the largest, charged at their peak, as the
    budget holds, at least one; 0 (no limit) when admission is off."""
    if budget_bytes == 0:
        return 0
    return max(1, budget_bytes // (UPLOAD_HOLDS * message_limit))


def receipt_options(budget_bytes: int) -> list[tuple[str, int]]:
    """The server's channel arguments that keep a waiting Upload to its flow-control window:
    grpc's bandwidth-delay probing off while admission is on. With probing, grpc widened the
    windows of a busy connection's streams past whole messages, so Uploads waiting their turn
    were received anyway (twelve 32 MiB Uploads read one at a time: +497 MiB of peak RSS with
    probing, +229 MiB without). A stream whose message is being read still opens its window to
    the message's length: on loopback a 64 MiB Upload was as fast without probing (55 against
    56 MB/s, medians of 8 on a busy machine) and a chunked one faster (537 against 315 MB/s).
    Where the round trip is long, a chunked upload without probing has about one chunk and the
    window (64 KiB) in flight per round trip (docs/services.md)."""
    return [] if budget_bytes == 0 else [("grpc.http2.bdp_probe", 0)]


class Receipts:
    """At most ``limit`` Upload messages in receipt at once (0: no limit), on either server."""

    def __init__(self, limit: int, aio: bool) -> None:
        self.limit = limit
        self.aio = aio
        # The aio semaphore binds to the event loop that first waits on it: the server's.
        self._turns = asyncio.Semaphore(limit) if aio and limit else None
        self._sync_turns = threading.Semaphore(limit) if not aio and limit else None

    async def read(self, context: Any) -> bytes:
        """The call's one message, read in its turn (aio); the call is cancelled when it never
        arrives (see MISSING)."""
        if self._turns is None:
            request = await context.read()
        else:
            async with self._turns:
                request = await context.read()
        if request is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.CANCELLED, MISSING)
        return request  # type: ignore[no-any-return]

    def read_sync(self, requests: Iterator[bytes], context: Any) -> bytes:
        """The call's one message, read in its turn (thread-pool server, whose worker thread
        waits): grpc.RpcError, or none at all, when it never arrives."""
        if self._sync_turns is None:
            request = next(requests, None)
        else:
            with self._sync_turns:
                request = next(requests, None)
        if request is None:
            context.abort(grpc.StatusCode.CANCELLED, MISSING)
        return request  # type: ignore[return-value]

    def handlers(self, handlers: dict[str, Handler]) -> dict[str, Handler]:
        """``handlers`` with Upload's message read here: for a server without metrics, whose
        handlers grpc would otherwise hand the message received whole."""
        upload = handlers[UPLOAD].unary_unary
        assert upload is not None
        read, read_sync = self.read, self.read_sync
        behavior: Any
        if self.aio:

            async def behavior(requests: Any, context: Any) -> Any:
                return await upload(await read(context), context)

        else:

            def behavior(requests: Any, context: Any) -> Any:
                return upload(read_sync(requests, context), context)

        return {**handlers, UPLOAD: rebuild(handlers[UPLOAD], behavior, streamed=True)}

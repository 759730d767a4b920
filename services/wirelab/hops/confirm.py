"""The AMQP arm's fire-and-forget shape: an order is accepted once every queue has it, and its
confirmation (every downstream's reply) is awaited and timed after the caller has its answer."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from prometheus_client import CollectorRegistry, Histogram

from wirelab import core
from wirelab.contract import CALLS
from wirelab.hops.outgoing import instrument
from wirelab.hops.relay import DownstreamError, Relay, Reply
from wirelab.hops.via_amqp import AmqpDownstream, Pending
from wirelab.v1 import wirelab_pb2 as pb

log = logging.getLogger("wirelab.hops")
FAMILY = "wirelab_client_confirmation_seconds"


def confirmation(registry: CollectorRegistry) -> Histogram:
    """The edge's confirmation-time histogram of orders (the contract's family), registered."""
    made = cast(Histogram, instrument(FAMILY, registry))
    return made.labels("amqp", "unary", CALLS["unary"])


@dataclass
class FireAndForget(Relay[pb.OrderRequest, pb.OrderReply]):
    """The relay of a fire-and-forget edge: this hop's work, then the order published to every
    queue at once; the caller's answer (this hop's own reply) comes once the broker has
    confirmed every publish, so an accepted order is on every queue. A publish the broker does
    not confirm fails the order (the queues that did take it still work it: their replies are
    awaited and counted like the others'). Each downstream call is measured, as in request/reply,
    from its publish to its reply; the order's confirmation, from its arrival here to the last
    reply, goes to ``confirmed`` (None: metrics off), orders with any failed reply not at all.
    """

    confirmed: Histogram | None = None
    waiting: set[asyncio.Task[None]] = field(default_factory=set)

    async def order(
        self, request: pb.OrderRequest, own: Reply, work_ms: int, deadline: float | None
    ) -> Reply | pb.OrderReply:
        """``deadline`` bounds the acceptance (the caller waits that long); the confirmation
        has the downstream budget, WIRELAB_DOWNSTREAM_TIMEOUT_SECONDS."""
        del deadline
        started = time.perf_counter()
        await core.work_async(work_ms)
        loop = asyncio.get_running_loop()
        accepted: asyncio.Future[None] = loop.create_future()
        # Publishing and confirming run on their own: a caller that goes away mid-publish
        # leaves an order that is still either refused or tracked to its confirmation.
        task = loop.create_task(self._send(request, started, accepted))
        self.waiting.add(task)
        task.add_done_callback(self.waiting.discard)
        await accepted
        return own

    async def _send(
        self, request: pb.OrderRequest, started: float, accepted: asyncio.Future[None]
    ) -> None:
        queues = cast(Sequence[AmqpDownstream], self.downstreams)
        sent = await asyncio.gather(
            *(d.send(request, self.timeout) for d in queues), return_exceptions=True
        )
        refused = [r for r in sent if isinstance(r, BaseException)]
        if not accepted.done():  # else the caller went away
            if refused:
                accepted.set_exception(refused[0])
            else:
                accepted.set_result(None)
        calls = [r for r in sent if isinstance(r, Pending)]
        try:
            done = await asyncio.gather(*(c.reply() for c in calls), return_exceptions=True)
        finally:
            for call in calls:  # closing: the calls whose wait never started end here
                call.abandon()
        failed = [r for r in done if isinstance(r, BaseException)]
        if not refused and not failed and self.confirmed is not None:
            self.confirmed.observe(time.perf_counter() - started)
        for error in failed:
            if isinstance(error, DownstreamError):
                log.info("order not confirmed: %s", error.message)

    async def close(self) -> None:
        """Stop waiting for confirmations (each counted cancelled), then close the connection."""
        for task in list(self.waiting):
            task.cancel()
        await asyncio.gather(*self.waiting, return_exceptions=True)
        for downstream in self.downstreams:
            await downstream.close()

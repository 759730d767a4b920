"""The relay: one order sent on to every downstream, in turn or all at once, within one deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from wirelab import core

Req = TypeVar("Req")
Rep = TypeVar("Rep")
Req_contra = TypeVar("Req_contra", contravariant=True)
Rep_co = TypeVar("Rep_co", covariant=True)
Rep_contra = TypeVar("Rep_contra", contravariant=True)
Reply = TypeVar("Reply")
# REST's deadline: the caller's remaining budget in milliseconds, as gRPC sends grpc-timeout.
DEADLINE_HEADER = "x-wirelab-deadline-ms"
Reason = Literal["unavailable", "timeout", "failed"]


class DownstreamError(Exception):
    """A downstream call that did not give a reply: no connection (``unavailable``), past the
    deadline (``timeout``) or an error status or unreadable reply (``failed``)."""

    def __init__(self, peer: str, reason: Reason, detail: str) -> None:
        self.peer = peer
        self.reason = reason
        self.message = f"downstream {peer} {_SAID[reason]}: {detail}"
        super().__init__(self.message)


def no_reply(peer: str, timeout: float) -> DownstreamError:
    """The call to ``peer`` ran past its budget."""
    return DownstreamError(peer, "timeout", f"no reply within {timeout:.3f} s")


def unreachable(peer: str, exc: BaseException) -> DownstreamError:
    """No connection to ``peer`` (or its broker) carried the call: the client library's error."""
    return DownstreamError(peer, "unavailable", f"{type(exc).__name__}: {exc}")


_SAID: dict[Reason, str] = {
    "unavailable": "is unavailable",
    "timeout": "did not answer in time",
    "failed": "failed",
}


class Splitter(Protocol[Req, Rep_contra, Reply]):
    """How a protocol's order is split into parts and the parts' replies joined (fanout split)."""

    def parts(self, request: Req, count: int) -> list[Req]:
        """``request`` as ``count`` orders, each with a piece of the note (core.split_note)."""
        ...

    def merge(self, own: Reply, replies: Sequence[Rep_contra]) -> Reply:
        """``own`` with the word and character counts the parts' replies add up to."""
        ...


class Downstream(Protocol[Req_contra, Rep_co]):
    """One downstream service, reached with its protocol's connection-reusing async client."""

    peer: str

    async def order(self, request: Req_contra, timeout: float) -> Rep_co:
        """Send ``request``; its reply, or DownstreamError (the call is measured either way)."""
        ...

    def problem(self) -> str | None:
        """None when calls can be sent now, else why not (a broker not connected yet)."""
        ...

    async def close(self) -> None: ...


@dataclass
class Relay(Generic[Req, Rep]):
    """Sends each order to ``downstreams``; ``timeout`` bounds all of one order's calls."""

    downstreams: Sequence[Downstream[Req, Rep]]
    parallel: bool
    local_work: bool
    timeout: float
    # Set for fanout "split" (the primary/replica study): each downstream gets a part of the
    # note to count, all at once, and the answer adds their counts up.
    splitter: Splitter[Req, Rep, Any] | None = None

    async def order(
        self, request: Req, own: Reply, work_ms: int, deadline: float | None
    ) -> Reply | Rep:
        """Do this hop's part and call the downstreams: ``own`` is this hop's reply to an order
        already validated here (so bad input never leaves the edge), ``work_ms`` the simulated
        work, ``deadline`` the seconds the caller still waits (None: no deadline).

        Sequential: this hop's work, then each downstream in turn (the order-chain study's
        4 x 100 ms floor). Parallel: the work and every call at once; the first failure cancels
        the rest. The answer is this hop's own reply, or with local work off (a pure relay, the
        A->B study's A) the first downstream's. Split: as parallel, each downstream counting one
        part of the note, and the answer is this hop's reply with their counts added up (``own``
        then carries no counts of its own: the word count is the downstreams' work).
        """
        loop = asyncio.get_running_loop()
        budget = self.timeout if deadline is None else min(self.timeout, deadline)
        end = loop.time() + budget
        if budget <= 0:
            first = self.downstreams[0].peer
            raise DownstreamError(first, "timeout", "the caller's deadline passed")
        work = work_ms if self.local_work else 0
        if self.parallel or self.splitter is not None:
            count = len(self.downstreams)
            sent = (
                [request] * count if self.splitter is None else self.splitter.parts(request, count)
            )
            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(core.work_async(work))
                    calls = [
                        group.create_task(d.order(part, budget))
                        for d, part in zip(self.downstreams, sent, strict=True)
                    ]
            except* DownstreamError as failed:
                raise failed.exceptions[0] from None
            replies = [call.result() for call in calls]
            if self.splitter is not None:
                merged: Reply = self.splitter.merge(own, replies)
                return merged
        else:
            await core.work_async(work)
            replies = []
            for downstream in self.downstreams:
                left = end - loop.time()
                if left <= 0:
                    raise DownstreamError(
                        downstream.peer, "timeout", f"{budget:g} s spent before the call"
                    )
                replies.append(await downstream.order(request, left))
        return own if self.local_work else replies[0]

    def problem(self) -> str | None:
        """Why an order cannot be relayed now (the first downstream's reason), or None."""
        return next((p for d in self.downstreams if (p := d.problem()) is not None), None)

    async def close(self) -> None:
        for downstream in self.downstreams:
            await downstream.close()

"""Measured handlers for grpc.aio: whole-call timing, protobuf bytes and messages, every shape."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any, cast

import grpc
import grpc.aio

from wirelab.contract import OTHER_KIND
from wirelab.metrics import FLUSH_MASK, Call, KindInstruments, Record, carried, opened
from wirelab.rpc.kinds import Recorded, abandoned, error_outcome, ok_outcome
from wirelab.rpc.measure import (
    READS_ITS_MESSAGE,
    Handler,
    MeasuredMethods,
    rebuild,
)

# When the current call arrived. grpc.aio looks a call's handler up and then runs it in one
# asyncio task, so the stamp the lookup sets is the one the behaviour reads (a test checks).
_ARRIVED: ContextVar[float] = ContextVar("wirelab_grpc_arrived")


async def _counted(requests: AsyncIterator[bytes], call: Call) -> AsyncIterator[bytes]:
    async for request in requests:  # raw messages: intake.py parses them
        call.received(len(request))
        yield request


def _recorded(call: Call, context: Any) -> Recorded:
    recorded = Recorded(call, context)
    # Runs once the RPC's task is done: after grpc has sent the reply and the status.
    context.add_done_callback(recorded.done)
    return recorded


class _OneToOne:
    """One request-response call being measured, with what its done callback records: the
    fields of one record, without the Call and Recorded objects the streaming shapes use."""

    __slots__ = (
        "bound",
        "bytes_in",
        "bytes_out",
        "code",
        "enqueue",
        "outcome",
        "replied",
        "started",
    )

    def __init__(
        self, bound: KindInstruments, enqueue: Callable[[Record], None], started: float, size: int
    ) -> None:
        self.bound = bound
        self.enqueue = enqueue
        self.started = started
        self.bytes_in = size
        self.bytes_out = self.replied = 0
        # As with Recorded: until the behaviour has returned or raised, a call that ends was
        # abandoned (kinds.abandoned).
        self.outcome: str | None = None
        self.code = ""

    def done(self, context: Any) -> None:
        """The RPC's done callback: after grpc has sent the reply and the status."""
        took = time.perf_counter() - self.started
        if self.outcome is None:
            self.outcome, self.code = abandoned(context)
        self.enqueue(
            (self.bound, self.outcome, self.code, took, None, self.bytes_in, self.bytes_out, 1,
             self.replied)
        )  # fmt: skip


class _TracedOneToOne(_OneToOne):
    """A _OneToOne of a traced service (exemplars kept): as metrics.TracedCall, it opens the
    Sampled a kept span of its trace fills and carries it to the done callback's record."""

    __slots__ = ("sampled",)

    def __init__(
        self, bound: KindInstruments, enqueue: Callable[[Record], None], started: float, size: int
    ) -> None:
        super().__init__(bound, enqueue, started, size)
        self.sampled = opened()

    def done(self, context: Any) -> None:
        carried(self.sampled, super().done, context)


class AioMeasuredMethods(MeasuredMethods):
    def arrived(self, handler: Handler) -> Handler:
        _ARRIVED.set(time.perf_counter())
        return handler

    def _one_to_one(
        self, unary: Callable[[Any, Any], Awaitable[Any]], kind: str, reads: bool
    ) -> Callable[[Any, Any], Awaitable[Any]]:
        """The measured behaviour of a request-response method: ``ProcessOrder`` (the kind the
        observer-effect benchmark saturates) and the one-message ``Upload`` and ``Download``.
        Records exactly what the general path below does, with fewer Python calls per call,
        each of which shows in that benchmark: the start counted with ``+= 1``
        (KindInstruments.arrived: every aio behaviour runs on the event loop's one thread), and
        one small object per call instead of a Call and a Recorded. With ``reads`` it is handed
        the request stream and reads the one message itself, in its turn (measure.rebuild,
        receipts.Receipts)."""
        metrics = self.metrics
        bound = metrics.bound(kind)
        enqueue = metrics.enqueue
        arrival = _ARRIVED.get
        read = self.receipts.read
        measured = _TracedOneToOne if metrics.exemplars else _OneToOne

        async def one_reply(request: Any, context: Any) -> Any:
            arrived = bound.arrived = bound.arrived + 1
            if not arrived & FLUSH_MASK:  # bounds the queue between scrapes
                metrics.flush()
            call = measured(bound, enqueue, arrival(), 0)
            context.add_done_callback(call.done)
            try:
                # The raw message: intake.py decodes it inside ``unary``.
                if reads:
                    request = await read(context)
                call.bytes_in = len(request)
                reply = await unary(request, context)
            except BaseException as exc:
                call.outcome, call.code = error_outcome(context, exc)
                raise
            call.outcome, call.code = ok_outcome(context)
            call.bytes_out = reply.ByteSize()
            call.replied = 1
            return reply

        return one_reply

    async def unknown_method(self, requests: Any, context: Any) -> None:
        with _recorded(self.metrics.start(OTHER_KIND, _ARRIVED.get()), context):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

    def wrap(self, handler: Handler, kind: str) -> Handler:
        start = self.start
        arrival = _ARRIVED.get
        if handler.unary_unary is not None:
            reads = kind in READS_ITS_MESSAGE
            behavior = self._one_to_one(handler.unary_unary, kind, reads)
            return rebuild(handler, behavior, streamed=reads)
        if not handler.response_streaming:  # one reply to a request stream (UploadStream)
            unary = cast(Callable[[Any, Any], Awaitable[Any]], handler.stream_unary)

            async def one_reply(requests: Any, context: Any) -> Any:
                call = start(kind, arrival())
                request = _counted(requests, call)
                with _recorded(call, context):
                    reply = await unary(request, context)
                    # grpc.aio ends a request stream the same way whether the client closed
                    # it or the call failed (cancelled, deadline, a message over grpc's limit),
                    # so the behaviour returns either way. Sending the headers now makes a
                    # failed call show: the send fails or grpc cancels this task, and the call
                    # counts as abandoned instead of ok (measured: 20 of 20 cancelled uploads
                    # counted cancelled, none of 20 completed ones).
                    await context.send_initial_metadata(())
                    call.sent(reply.ByteSize())
                return reply

            return rebuild(handler, one_reply)
        # On an aio server these behaviours are async generator functions, whatever the stubs say.
        streaming = cast(
            Callable[[Any, Any], AsyncIterator[Any]], handler.unary_stream or handler.stream_stream
        )

        streaming_in = handler.request_streaming

        async def replies(request: Any, context: Any) -> AsyncIterator[Any]:
            call = start(kind, arrival())
            if streaming_in:
                request = _counted(request, call)
            else:
                call.received(len(request))
            with _recorded(call, context):
                async for reply in streaming(request, context):
                    size = reply.ByteSize()
                    yield reply
                    # Counted once the server has taken the message, so the first one marks
                    # time to first message.
                    call.sent(size)
                if streaming_in:
                    # As for UploadStream above: a PingPong cancelled midway ended its request
                    # stream as a close does and counted ok. PingPong answers until its stream
                    # ends, so one more read only asks grpc for the end again, and a failed
                    # call shows: grpc cancels this task first (measured: 20 of 20 cancelled
                    # sessions counted cancelled, none of 20 closed ones).
                    await context.read()

        return rebuild(handler, replies)

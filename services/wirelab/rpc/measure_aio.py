"""Measured handlers for grpc.aio: whole-call timing, protobuf bytes and messages, every shape."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import Context, ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

import grpc

from wirelab.contract import OTHER_KIND
from wirelab.metrics import FLUSH_MASK, Call, KindInstruments, Record, opened
from wirelab.rpc.kinds import Recorded, abandoned, error_outcome, ok_outcome
from wirelab.rpc.measure import READS_ITS_MESSAGE, Handler, MeasuredMethods, rebuild

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


@dataclass(slots=True, eq=False)
class _OneToOne:
    """One request-response call being measured: the fields of its record, which its done
    callback makes, without the Call and Recorded objects of the streaming shapes."""

    bound: KindInstruments
    enqueue: Callable[[Record], None]
    started: float
    bytes_in: int = 0
    bytes_out: int = 0
    replied: int = 0
    # None until the behaviour has returned or raised: a call that ends before was abandoned.
    outcome: str | None = None
    code: str = ""

    def done(self, context: Any) -> None:
        """The RPC's done callback: after grpc has sent the reply and the status."""
        took = time.perf_counter() - self.started
        if self.outcome is None:
            self.outcome, self.code = abandoned(context)
        self.enqueue(
            (self.bound, self.outcome, self.code, took, None, self.bytes_in, self.bytes_out, 1,
             self.replied)
        )  # fmt: skip


@dataclass(slots=True, eq=False)
class _TracedOneToOne(_OneToOne):
    """A _OneToOne of a traced service (exemplars kept): as metrics.TracedCall, it opens the
    Sampled a kept span of its trace fills and makes its record in the context that holds it."""

    record_in: Context = field(default_factory=opened)

    def done(self, context: Any) -> None:
        self.record_in.run(_OneToOne.done, self, context)


class AioMeasuredMethods(MeasuredMethods):
    def arrived(self, handler: Handler) -> Handler:
        _ARRIVED.set(time.perf_counter())
        return handler

    async def unknown_method(self, requests: Any, context: Any) -> None:
        with _recorded(self.metrics.start(OTHER_KIND, _ARRIVED.get()), context):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

    def wrap(self, handler: Handler, kind: str, exemplars: bool) -> Handler:
        metrics = self.metrics
        start = metrics.start_traced if exemplars else metrics.start
        arrival = _ARRIVED.get
        one = handler.unary_unary
        if one is not None:
            # ProcessOrder and the one-message Upload and Download record what the general path
            # does with fewer Python calls per call: docs/services.md#lean-paths.
            bound = metrics.bound(kind)
            enqueue = metrics.enqueue
            reads = kind in READS_ITS_MESSAGE  # then it reads the one message itself
            read = self.receipts.read
            measured = _TracedOneToOne if exemplars else _OneToOne

            async def one_message(request: Any, context: Any) -> Any:
                arrived = bound.arrived = bound.arrived + 1
                if not arrived & FLUSH_MASK:  # bounds the queue between scrapes
                    metrics.flush()
                call = measured(bound, enqueue, arrival())
                context.add_done_callback(call.done)
                try:
                    # The raw message: intake.py decodes it inside ``one``.
                    if reads:
                        request = await read(context)
                    call.bytes_in = len(request)
                    reply = await one(request, context)
                except BaseException as exc:
                    call.outcome, call.code = error_outcome(context, exc)
                    raise
                call.outcome, call.code = ok_outcome(context)
                call.bytes_out = reply.ByteSize()
                call.replied = 1
                return reply

            return rebuild(handler, one_message, streamed=reads)
        if not handler.response_streaming:  # one reply to a request stream (UploadStream)
            unary = cast(Callable[[Any, Any], Awaitable[Any]], handler.stream_unary)

            async def one_reply(requests: Any, context: Any) -> Any:
                call = start(kind, arrival())
                request = _counted(requests, call)
                with _recorded(call, context):
                    reply = await unary(request, context)
                    # Headers now, so a failed call shows: grpc.aio ends a request stream alike
                    # for a close and a failure (docs/services.md#the-end-of-a-request-stream).
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
                    call.sent(size)  # once grpc has taken it: the first marks its time
                if streaming_in:
                    # One more read after PingPong's stream ended, so a cancelled session
                    # shows (docs/services.md#the-end-of-a-request-stream).
                    await context.read()

        return rebuild(handler, replies)

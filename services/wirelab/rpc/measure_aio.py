"""Measured handlers for grpc.aio: whole-call timing, protobuf bytes and messages, every shape."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from typing import Any, cast

import grpc
import grpc.aio

from wirelab.metrics import Call
from wirelab.rpc.kinds import OTHER_KIND, Recorded
from wirelab.rpc.measure import Handler, MeasuredMethods, rebuild

# When the current call arrived. grpc.aio looks a call's handler up and then runs it in one
# asyncio task, so the stamp the lookup sets is the one the behaviour reads (a test checks).
_ARRIVED: ContextVar[float] = ContextVar("wirelab_grpc_arrived")


async def _counted(requests: AsyncIterator[Any], call: Call) -> AsyncIterator[Any]:
    async for request in requests:
        call.received(request.ByteSize())
        yield request


def _recorded(call: Call, context: Any) -> Recorded:
    recorded = Recorded(call, context)
    # Runs once the RPC's task is done: after grpc has sent the reply and the status.
    context.add_done_callback(recorded.done)
    return recorded


class AioMeasuredMethods(MeasuredMethods):
    def arrived(self, handler: Handler) -> Handler:
        _ARRIVED.set(time.perf_counter())
        return handler

    async def unknown_method(self, requests: Any, context: Any) -> None:
        with _recorded(self.metrics.start(OTHER_KIND, _ARRIVED.get()), context):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

    def wrap(self, handler: Handler, kind: str) -> Handler:
        begin = self.begin
        arrival = _ARRIVED.get
        streaming_in = handler.request_streaming
        if not handler.response_streaming:
            unary = cast(
                Callable[[Any, Any], Awaitable[Any]], handler.unary_unary or handler.stream_unary
            )

            async def one_reply(request: Any, context: Any) -> Any:
                call, request = begin(kind, arrival(), request, streaming_in, _counted)
                with _recorded(call, context):
                    reply = await unary(request, context)
                    call.sent(reply.ByteSize())
                return reply

            return rebuild(handler, one_reply)
        # On an aio server these behaviours are async generator functions, whatever the stubs say.
        streaming = cast(
            Callable[[Any, Any], AsyncIterator[Any]], handler.unary_stream or handler.stream_stream
        )

        async def replies(request: Any, context: Any) -> AsyncIterator[Any]:
            call, request = begin(kind, arrival(), request, streaming_in, _counted)
            with _recorded(call, context):
                async for reply in streaming(request, context):
                    size = reply.ByteSize()
                    yield reply
                    # Counted once the server has taken the message, so the first one marks
                    # time to first message.
                    call.sent(size)

        return rebuild(handler, replies)

"""Measured handlers for grpc.aio: whole-call timing, protobuf bytes and messages, every shape."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import grpc
import grpc.aio

from wirelab.metrics import Call
from wirelab.rpc.kinds import OTHER_KIND, Recorded
from wirelab.rpc.measure import Handler, MeasuredMethods, rebuild


async def _counted(requests: AsyncIterator[Any], call: Call) -> AsyncIterator[Any]:
    async for request in requests:
        call.received(request.ByteSize())
        yield request


class AioMeasuredMethods(MeasuredMethods):
    async def unknown_method(self, requests: Any, context: Any) -> None:
        with Recorded(self.metrics.start(OTHER_KIND), context):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

    def wrap(self, handler: Handler, kind: str) -> Handler:
        begin = self.begin
        streaming_in = handler.request_streaming
        if not handler.response_streaming:
            unary = cast(
                Callable[[Any, Any], Awaitable[Any]], handler.unary_unary or handler.stream_unary
            )

            async def one_reply(request: Any, context: Any) -> Any:
                call, request = begin(kind, request, streaming_in, _counted)
                with Recorded(call, context):
                    reply = await unary(request, context)
                    call.sent(reply.ByteSize())
                return reply

            return rebuild(handler, one_reply)
        # On an aio server these behaviours are async generator functions, whatever the stubs say.
        streaming = cast(
            Callable[[Any, Any], AsyncIterator[Any]], handler.unary_stream or handler.stream_stream
        )

        async def replies(request: Any, context: Any) -> AsyncIterator[Any]:
            call, request = begin(kind, request, streaming_in, _counted)
            with Recorded(call, context):
                async for reply in streaming(request, context):
                    size = reply.ByteSize()
                    yield reply
                    # Counted once the server has taken the message, so the first one marks
                    # time to first message.
                    call.sent(size)

        return rebuild(handler, replies)

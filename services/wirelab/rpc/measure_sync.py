"""Measured handlers for the thread-pool gRPC server: the same measurements as the aio ones."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc

from wirelab.metrics import Call
from wirelab.rpc.kinds import OTHER_KIND, Recorded
from wirelab.rpc.measure import Handler, MeasuredMethods, rebuild


def _counted(requests: Iterator[Any], call: Call) -> Iterator[Any]:
    for request in requests:
        call.received(request.ByteSize())
        yield request


class SyncMeasuredMethods(MeasuredMethods):
    def unknown_method(self, requests: Any, context: Any) -> Iterator[bytes]:
        with Recorded(self.metrics.start(OTHER_KIND), context):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        yield b""  # never reached (abort raises); the yield makes this a streaming behaviour

    def wrap(self, handler: Handler, kind: str) -> Handler:
        begin = self.begin
        streaming_in = handler.request_streaming
        if not handler.response_streaming:
            unary = handler.unary_unary or handler.stream_unary
            assert unary is not None

            def one_reply(request: Any, context: Any) -> Any:
                call, request = begin(kind, request, streaming_in, _counted)
                with Recorded(call, context):
                    reply = unary(request, context)
                    call.sent(reply.ByteSize())
                return reply

            return rebuild(handler, one_reply)
        streaming = handler.unary_stream or handler.stream_stream
        assert streaming is not None

        def replies(request: Any, context: Any) -> Iterator[Any]:
            call, request = begin(kind, request, streaming_in, _counted)
            with Recorded(call, context):
                for reply in streaming(request, context):
                    size = reply.ByteSize()
                    yield reply
                    call.sent(size)

        return rebuild(handler, replies)

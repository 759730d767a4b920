"""Measured handlers for the thread-pool gRPC server: the same measurements as the aio ones."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import grpc

from wirelab.contract import OTHER_KIND
from wirelab.metrics import Call
from wirelab.rpc.kinds import Recorded
from wirelab.rpc.measure import FIELDS, READS_ITS_MESSAGE, Handler, MeasuredMethods, rebuild


def _counted(requests: Iterator[bytes], call: Call) -> Iterator[bytes]:
    for request in requests:  # raw messages: intake.py parses them
        call.received(len(request))
        yield request


def _recorded(call: Call, context: Any) -> Recorded:
    recorded = Recorded(call, context)
    # Runs once grpc has sent the status (in its polling thread); refused if the RPC is over.
    recorded.deferred = context.add_callback(recorded.done)
    return recorded


class SyncMeasuredMethods(MeasuredMethods):
    """Behaviours take the call's arrival time first. The lookup runs in grpc's one polling
    thread as each call arrives, the behaviour later in a pool thread (after waiting for a free
    one and reading the request), so arrived only swaps in the call's behaviour bound to it."""

    def arrived(self, handler: Handler) -> Handler:
        field = FIELDS[handler.request_streaming, handler.response_streaming]
        bound = functools.partial(getattr(handler, field), time.perf_counter())
        return handler._replace(**{field: bound})  # type: ignore[attr-defined, no-any-return]

    def unknown_method(self, started: float, requests: Any, context: Any) -> Iterator[bytes]:
        with _recorded(self.metrics.start(OTHER_KIND, started), context):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        yield b""  # never reached (abort raises); the yield makes this a streaming behaviour

    def wrap(self, handler: Handler, kind: str, exemplars: bool) -> Handler:
        start = self.metrics.start_traced if exemplars else self.metrics.start
        streaming_in = handler.request_streaming
        reads = kind in READS_ITS_MESSAGE
        read = self.receipts.read_sync
        if not handler.response_streaming:
            unary = handler.unary_unary or handler.stream_unary
            assert unary is not None

            def one_reply(started: float, request: Any, context: Any) -> Any:
                call = start(kind, started)
                with _recorded(call, context):
                    if streaming_in:
                        request = _counted(request, call)
                    else:
                        if reads:
                            request = read(request, context)
                        call.received(len(request))
                    reply = unary(request, context)
                    call.sent(reply.ByteSize())
                return reply

            return rebuild(handler, one_reply, streamed=reads)
        streaming = handler.unary_stream or handler.stream_stream
        assert streaming is not None

        def replies(started: float, request: Any, context: Any) -> Iterator[Any]:
            call = start(kind, started)
            if streaming_in:
                request = _counted(request, call)
            else:
                call.received(len(request))
            with _recorded(call, context):
                for reply in streaming(request, context):
                    size = reply.ByteSize()
                    yield reply
                    call.sent(size)

        return rebuild(handler, replies)

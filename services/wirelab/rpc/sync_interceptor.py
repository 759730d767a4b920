"""Server interceptor for the thread-pool gRPC server: the same measurements as the aio one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc

from wirelab.metrics import Call, ServerMetrics
from wirelab.rpc.kinds import METHOD_KINDS, OTHER_KIND, UNMEASURED_PREFIXES, finish_error, finish_ok

Handler = grpc.RpcMethodHandler[Any, Any]


def _counted(requests: Iterator[Any], call: Call) -> Iterator[Any]:
    for request in requests:
        call.received(request.ByteSize())
        yield request


class SyncMetricsInterceptor(grpc.ServerInterceptor[Any, Any]):
    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics
        self._wrapped: dict[str, Handler] = {}
        self._unimplemented = grpc.stream_stream_rpc_method_handler(self._unknown_method)

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Handler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        method = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = continuation(handler_call_details)
        kind = METHOD_KINDS.get(method)
        if handler is None and not method.startswith(UNMEASURED_PREFIXES):
            return self._unimplemented
        if kind is None or handler is None:
            return handler
        wrapped = self._wrapped[method] = self._wrap(handler, kind)
        return wrapped

    def _unknown_method(self, requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        call = self.metrics.start(OTHER_KIND)
        try:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        except BaseException as exc:
            finish_error(call, context, exc)
            raise
        yield b""  # unreachable: abort raises; the yield makes this a streaming handler

    def _wrap(self, handler: Handler, kind: str) -> Handler:
        start = self.metrics.start
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        unary = handler.unary_unary or handler.stream_unary
        if unary is not None:
            client_streaming = handler.stream_unary is not None

            def one_reply(request: Any, context: Any) -> Any:
                call = start(kind)
                if client_streaming:
                    request = _counted(request, call)
                else:
                    call.received(request.ByteSize())
                try:
                    reply = unary(request, context)
                except BaseException as exc:
                    finish_error(call, context, exc)
                    raise
                call.sent(reply.ByteSize())
                finish_ok(call, context)
                return reply

            if client_streaming:
                return grpc.stream_unary_rpc_method_handler(one_reply, **codec)
            return grpc.unary_unary_rpc_method_handler(one_reply, **codec)
        streaming = handler.unary_stream or handler.stream_stream
        assert streaming is not None
        client_streams = handler.stream_stream is not None

        def replies(request: Any, context: Any) -> Iterator[Any]:
            call = start(kind)
            if client_streams:
                request = _counted(request, call)
            else:
                call.received(request.ByteSize())
            try:
                for reply in streaming(request, context):
                    size = reply.ByteSize()
                    yield reply
                    call.sent(size)
            except BaseException as exc:
                finish_error(call, context, exc)
                raise
            finish_ok(call, context)

        if client_streams:
            return grpc.stream_stream_rpc_method_handler(replies, **codec)
        return grpc.unary_stream_rpc_method_handler(replies, **codec)

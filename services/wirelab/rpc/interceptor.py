"""grpc.aio server interceptor: whole-call timing, protobuf bytes and messages for every shape."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import grpc
import grpc.aio

from wirelab.metrics import Call, ServerMetrics
from wirelab.rpc.kinds import METHOD_KINDS, OTHER_KIND, UNMEASURED_PREFIXES, finish_error, finish_ok

Handler = grpc.RpcMethodHandler[Any, Any]
Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[Handler]]


async def _counted(requests: AsyncIterator[Any], call: Call) -> AsyncIterator[Any]:
    async for request in requests:
        call.received(request.ByteSize())
        yield request


class AioMetricsInterceptor(grpc.aio.ServerInterceptor[Any, Any]):
    """Wraps each contract method's handler once and caches it, so a call costs one dict lookup
    before the handler runs."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics
        self._wrapped: dict[str, Handler] = {}
        self._unimplemented = grpc.stream_stream_rpc_method_handler(self._unknown_method)

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler:
        method = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        # None (typed away by the stubs) means no service knows the method.
        handler: Handler | None = await continuation(handler_call_details)
        kind = METHOD_KINDS.get(method)
        if handler is None and not method.startswith(UNMEASURED_PREFIXES):
            return self._unimplemented
        if kind is None or handler is None:
            return cast(Handler, handler)
        wrapped = self._wrapped[method] = self._wrap(handler, kind)
        return wrapped

    async def _unknown_method(self, requests: AsyncIterator[bytes], context: Any) -> None:
        call = self.metrics.start(OTHER_KIND)
        try:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        except BaseException as exc:
            finish_error(call, context, exc)
            raise

    def _wrap(self, handler: Handler, kind: str) -> Handler:
        start = self.metrics.start
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        unary = handler.unary_unary or handler.stream_unary
        if unary is not None:
            client_streaming = handler.stream_unary is not None

            async def one_reply(request: Any, context: Any) -> Any:
                call = start(kind)
                if client_streaming:
                    request = _counted(request, call)
                else:
                    call.received(request.ByteSize())
                try:
                    reply = await unary(request, context)
                except BaseException as exc:
                    finish_error(call, context, exc)
                    raise
                call.sent(reply.ByteSize())
                finish_ok(call, context)
                return reply

            if client_streaming:
                return grpc.stream_unary_rpc_method_handler(one_reply, **codec)
            return grpc.unary_unary_rpc_method_handler(one_reply, **codec)
        # On an aio server these behaviours are async generator functions, whatever the stubs say.
        streaming = cast(
            Callable[[Any, Any], AsyncIterator[Any]], handler.unary_stream or handler.stream_stream
        )
        client_streaming = handler.stream_stream is not None

        async def replies(request: Any, context: Any) -> AsyncIterator[Any]:
            call = start(kind)
            if client_streaming:
                request = _counted(request, call)
            else:
                call.received(request.ByteSize())
            try:
                async for reply in streaming(request, context):
                    size = reply.ByteSize()
                    yield reply
                    # Counted once the server has taken the message, so the first one marks
                    # time to first message.
                    call.sent(size)
            except BaseException as exc:
                finish_error(call, context, exc)
                raise
            finish_ok(call, context)

        if client_streaming:
            return grpc.stream_stream_rpc_method_handler(replies, **codec)
        return grpc.unary_stream_rpc_method_handler(replies, **codec)

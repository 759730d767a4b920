"""A cap on concurrent gRPC calls: past it a call is refused RESOURCE_EXHAUSTED at once.

gRPC's counterpart of REST's ``WIRELAB_REST_MAX_CONCURRENT_CALLS``: without it an overloaded
service queues every call and never says so. grpc's own ``maximum_concurrent_rpcs`` refuses
before any handler runs, so its refusals would not be counted; this cap sits inside the measured
handlers, so each refusal is counted ``client_error``/``RESOURCE_EXHAUSTED`` as a refusal for
load is on both protocols, with grpc's retry pushback as REST's 503 has ``Retry-After``.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc

from wirelab.core import Overloaded
from wirelab.rpc.intake import pushback
from wirelab.rpc.measure import Handler

_MAKE = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}
_BEHAVIOR = {
    (False, False): "unary_unary",
    (False, True): "unary_stream",
    (True, False): "stream_unary",
    (True, True): "stream_stream",
}


class CallCap:
    """At most ``limit`` calls of the wrapped methods at once, on either server mode."""

    def __init__(self, limit: int, aio: bool) -> None:
        self.limit = limit
        self.aio = aio
        self.active = 0
        self._lock = threading.Lock()  # the thread-pool server enters from many threads

    def handlers(self, handlers: dict[str, Handler]) -> dict[str, Handler]:
        """``handlers`` by method name, each refusing a call past the cap."""
        return {name: self._capped(handler) for name, handler in handlers.items()}

    def _enter(self, context: Any) -> None:
        """Count the call in until it is done, or raise Overloaded."""
        with self._lock:
            if self.active >= self.limit:
                raise Overloaded(f"over {self.limit} concurrent calls; retry later")
            self.active += 1

        def leave(*_: object) -> None:
            with self._lock:
                self.active -= 1

        if self.aio:
            context.add_done_callback(leave)
        elif not context.add_callback(leave):  # the RPC is already over
            leave()

    def _capped(self, handler: Handler) -> Handler:
        shape = (handler.request_streaming, handler.response_streaming)
        behavior = getattr(handler, _BEHAVIOR[shape])
        enter = self._enter

        def refused(context: Any) -> tuple[Any, ...] | None:
            try:
                enter(context)
            except Overloaded as exc:
                return grpc.StatusCode.RESOURCE_EXHAUSTED, exc.message, pushback(exc)
            return None

        capped: Any
        if self.aio and handler.response_streaming:

            async def capped(request: Any, context: Any) -> AsyncIterator[Any]:
                if (refusal := refused(context)) is not None:
                    await context.abort(*refusal)
                async for reply in behavior(request, context):
                    yield reply

        elif self.aio:

            async def capped(request: Any, context: Any) -> Any:
                if (refusal := refused(context)) is not None:
                    await context.abort(*refusal)
                return await behavior(request, context)

        elif handler.response_streaming:

            def capped(request: Any, context: Any) -> Iterator[Any]:
                if (refusal := refused(context)) is not None:
                    _abort(context, refusal)
                yield from behavior(request, context)

        else:

            def capped(request: Any, context: Any) -> Any:
                if (refusal := refused(context)) is not None:
                    _abort(context, refusal)
                return behavior(request, context)

        make: Any = _MAKE[shape]
        return make(  # type: ignore[no-any-return]
            capped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def _abort(context: Any, refusal: tuple[Any, ...]) -> None:
    code, details, trailing = refusal
    context.set_trailing_metadata(trailing)  # the thread-pool server's abort takes none
    context.abort(code, details)

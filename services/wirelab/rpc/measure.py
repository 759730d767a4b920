"""What the aio and the sync metrics interceptors share: the per-method handler cache."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc
import grpc.aio

from wirelab.metrics import Call, ServerMetrics
from wirelab.rpc.kinds import METHOD_KINDS, UNMEASURED_PREFIXES

# grpc's classes are generic only in the stubs; at runtime they cannot be subscripted.
if TYPE_CHECKING:
    Handler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
    SyncInterceptor: TypeAlias = grpc.ServerInterceptor[Any, Any]
    AioInterceptor: TypeAlias = grpc.aio.ServerInterceptor[Any, Any]
else:
    Handler = grpc.RpcMethodHandler
    SyncInterceptor = grpc.ServerInterceptor
    AioInterceptor = grpc.aio.ServerInterceptor


def rebuild(handler: Handler, behavior: Callable[..., Any]) -> Handler:
    """A handler of the same shape and codec as ``handler`` that runs ``behavior``."""
    codec = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(behavior, **codec)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(behavior, **codec)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(behavior, **codec)
    return grpc.stream_stream_rpc_method_handler(behavior, **codec)


class MeasuredMethods(ABC):
    """Wraps each contract method's handler once and caches it, so a measured call costs one
    dict lookup before its handler runs. Subclasses supply ``wrap`` (aio or sync flavour) and
    ``unknown_method``; unknown methods are answered UNIMPLEMENTED and counted as kind "other",
    health and reflection pass through unmeasured."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics
        self.wrapped: dict[str, Handler] = {}
        self.unimplemented = grpc.stream_stream_rpc_method_handler(self.unknown_method)

    @abstractmethod
    def unknown_method(self, requests: Any, context: Any) -> Any:
        """Behaviour that answers UNIMPLEMENTED (and counts it)."""

    @abstractmethod
    def wrap(self, handler: Handler, kind: str) -> Handler:
        """``handler`` with its calls measured as ``kind``."""

    def resolve(self, method: str, handler: Handler | None) -> Handler | None:
        """Measured, pass-through or UNIMPLEMENTED handler for ``method``."""
        if handler is None:
            return None if method.startswith(UNMEASURED_PREFIXES) else self.unimplemented
        kind = METHOD_KINDS.get(method)
        if kind is None:
            return handler
        wrapped = self.wrapped[method] = self.wrap(handler, kind)
        return wrapped

    def begin(self, kind: str, request: Any, streaming_in: bool, counted: Any) -> tuple[Call, Any]:
        """Start a call; a request stream is wrapped by ``counted`` to count each message."""
        call = self.metrics.start(kind)
        if streaming_in:
            return call, counted(request, call)
        call.received(request.ByteSize())
        return call, request

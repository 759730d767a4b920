"""Measured gRPC handlers: each contract method wrapped once, when it is registered."""

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
    GenericHandler: TypeAlias = grpc.GenericRpcHandler
else:
    Handler = grpc.RpcMethodHandler
    GenericHandler = grpc.GenericRpcHandler


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


class Capture:
    """Stands in for a server so a generated ``add_*Servicer_to_server`` hands over its
    method handlers instead of registering them."""

    def __init__(self) -> None:
        self.service = ""
        self.handlers: dict[str, Handler] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        """The same handlers also arrive through add_registered_method_handlers."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Handler]) -> None:
        self.service, self.handlers = service, handlers

    @classmethod
    def of(cls, add_to_server: Callable[[Any, Any], None], servicer: Any) -> Capture:
        """The handlers ``add_to_server`` would register for ``servicer``."""
        capture = cls()
        add_to_server(servicer, capture)
        return capture


class _Lookup(GenericHandler):
    """The only way grpc finds a measured method: a generic handler, because grpc consults it
    as the call arrives (before it reads the request message), which is when the measured
    duration starts. Methods registered through add_registered_method_handlers are looked up
    without any Python hook, hence too late for that."""

    def __init__(self, handlers: dict[str, Handler], arrived: Callable[[Handler], Handler]) -> None:
        self.handlers = handlers
        self.arrived = arrived

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Handler | None:
        handler = self.handlers.get(handler_call_details.method)
        return None if handler is None else self.arrived(handler)


class _Unimplemented(GenericHandler):
    """Registered last: any method no service knows is answered (and counted) UNIMPLEMENTED."""

    def __init__(self, handler: Handler, arrived: Callable[[Handler], Handler]) -> None:
        self.handler = handler
        self.arrived = arrived

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Handler | None:
        if handler_call_details.method.startswith(UNMEASURED_PREFIXES):
            return None
        return self.arrived(self.handler)


class MeasuredMethods(ABC):
    """Wraps each contract method's handler once, at registration. A server interceptor would
    do the same per call, but grpc's interceptor hook alone (a pass-through interceptor
    returning a cached handler) cost 6 % of small-unary throughput per server CPU-second
    here, more than the whole observer-effect budget. Subclasses supply the aio or sync
    flavour of ``wrap``, ``arrived`` (how a call's arrival time reaches its behaviour) and
    ``unknown_method``."""

    def __init__(self, metrics: ServerMetrics) -> None:
        self.metrics = metrics

    @abstractmethod
    def unknown_method(self, *args: Any) -> Any:
        """Behaviour that answers UNIMPLEMENTED (and counts it)."""

    @abstractmethod
    def wrap(self, handler: Handler, kind: str) -> Handler:
        """``handler`` with its calls measured as ``kind``."""

    @abstractmethod
    def arrived(self, handler: Handler) -> Handler:
        """Called by the lookup as a call arrives: the handler grpc should run for it."""

    def register(self, server: Any, service: str, handlers: dict[str, Handler]) -> None:
        """Register ``service``'s method ``handlers`` (by method name) on ``server``, every
        contract method measured from the moment its call arrives."""
        measured = {}
        for name, handler in handlers.items():
            method = f"/{service}/{name}"
            measured[method] = self.wrap(handler, METHOD_KINDS[method])
        server.add_generic_rpc_handlers((_Lookup(measured, self.arrived),))

    def register_unknown(self, server: Any) -> None:
        """Call after every other service: unknown methods become UNIMPLEMENTED, counted."""
        unimplemented: Handler = grpc.stream_stream_rpc_method_handler(self.unknown_method)
        server.add_generic_rpc_handlers((_Unimplemented(unimplemented, self.arrived),))

    def begin(
        self, kind: str, started: float, request: Any, streaming_in: bool, counted: Any
    ) -> tuple[Call, Any]:
        """Start a call that arrived at ``started``; a request stream is wrapped by
        ``counted`` to count each message; requests are raw messages (intake.py parses them)."""
        call = self.metrics.start(kind, started)
        if streaming_in:
            return call, counted(request, call)
        call.received(len(request))
        return call, request

"""Measured gRPC handlers: each contract method wrapped once, when it is registered."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

from wirelab.metrics import ServerMetrics
from wirelab.rpc.kinds import METHOD_KINDS, UNMEASURED_PREFIXES

if TYPE_CHECKING:
    from wirelab.rpc.receipts import Receipts

# Quoted: grpc's handler class is generic only in the stubs, at runtime it cannot be subscripted.
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


# The one-message methods (by kind) whose behaviour reads its request message itself (receipts.py),
# and why only Upload's: docs/services.md#grpc-calls-that-end-before-their-handler-runs
READS_ITS_MESSAGE = frozenset({"upload"})


def rebuild(handler: Handler, behavior: Callable[..., Any], streamed: bool = False) -> Handler:
    """A handler of ``handler``'s reply shape and codec that runs ``behavior``; with ``streamed``,
    its request handed over as a stream, so ``behavior`` runs as the call arrives and reads a
    one-message request itself (docs/services.md#the-message-read-by-the-behaviour)."""
    make = _MAKERS[streamed or handler.request_streaming, handler.response_streaming]
    return make(behavior, handler.request_deserializer, handler.response_serializer)


# (request streamed, response streamed) -> grpc's handler of that shape, and the handler's field
# that holds its behaviour, which grpc names its constructor after.
_MAKERS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}
FIELDS = {
    shape: make.__name__.removesuffix("_rpc_method_handler") for shape, make in _MAKERS.items()
}


class Capture:
    """The handlers a generated ``add_*Servicer_to_server`` would register for ``servicer``:
    this stands in for the server it is handed."""

    def __init__(self, add_to_server: Callable[[Any, Any], None], servicer: Any) -> None:
        self.service = ""
        self.handlers: dict[str, Handler] = {}
        add_to_server(servicer, self)

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        """The same handlers also arrive through add_registered_method_handlers."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Handler]) -> None:
        self.service, self.handlers = service, handlers


class _Lookup(grpc.GenericRpcHandler):
    """grpc consults a generic handler as a call arrives, before it reads the message, when the
    duration starts: the one Python hook there (registered methods are found without one)."""

    def __init__(self, handlers: dict[str, Handler], arrived: Callable[[Handler], Handler]) -> None:
        self.handlers = handlers
        self.arrived = arrived

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Handler | None:
        handler = self.handlers.get(handler_call_details.method)
        return None if handler is None else self.arrived(handler)


class _Unimplemented(grpc.GenericRpcHandler):
    """Registered last: any method no service knows is answered (and counted) UNIMPLEMENTED."""

    def __init__(self, handler: Handler, arrived: Callable[[Handler], Handler]) -> None:
        self.handler = handler
        self.arrived = arrived

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Handler | None:
        if handler_call_details.method.startswith(UNMEASURED_PREFIXES):
            return None
        return self.arrived(self.handler)


# Not an interceptor per call: docs/services.md#handlers-wrapped-at-registration
class MeasuredMethods(ABC):
    """Wraps each contract method's handler once, at registration; the aio and sync subclasses
    give ``wrap``, ``arrived`` (how a call's arrival reaches its behaviour), ``unknown_method``."""

    def __init__(self, metrics: ServerMetrics, receipts: Receipts) -> None:
        self.metrics = metrics
        self.receipts = receipts  # how Upload's behaviour reads its message

    @abstractmethod
    def unknown_method(self, *args: Any) -> Any:
        """Behaviour that answers UNIMPLEMENTED (and counts it)."""

    @abstractmethod
    def wrap(self, handler: Handler, kind: str, exemplars: bool) -> Handler:
        """``handler`` measured as ``kind`` (calls' traces to their records: ``exemplars``)."""

    @abstractmethod
    def arrived(self, handler: Handler) -> Handler:
        """Called by the lookup as a call arrives: the handler grpc should run for it."""

    def lookup(self, service: str, handlers: dict[str, Handler], exemplars: bool) -> _Lookup:
        """The generic handler to register for ``service``'s method ``handlers`` (by name), each
        measured from the moment its call arrives (:meth:`wrap`)."""
        methods = {f"/{service}/{name}": handler for name, handler in handlers.items()}
        measured = {m: self.wrap(h, METHOD_KINDS[m], exemplars) for m, h in methods.items()}
        return _Lookup(measured, self.arrived)

    def register_unknown(self, server: Any) -> None:
        """Call after every other service: unknown methods become UNIMPLEMENTED, counted."""
        unimplemented: Handler = grpc.stream_stream_rpc_method_handler(self.unknown_method)
        server.add_generic_rpc_handlers((_Unimplemented(unimplemented, self.arrived),))

"""Server reflection that also resolves method symbols, so ghz and grpcurl need no .proto."""

from __future__ import annotations

from typing import Any

import grpc.aio
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

# The asyncio servicer (re-exported as reflection.aio at runtime) is missing from the stubs.
from grpc_reflection.v1alpha._async import ReflectionServicer as AioBase

SERVICE_NAME = reflection.SERVICE_NAME


class _MethodSymbols:
    """grpcio-reflection answers file_containing_symbol only for messages, enums, services and
    extensions, not for a method ("pkg.Service.Method"): grpc/grpc#34743, still open in
    grpcio-reflection 1.85. ghz asks for exactly that symbol (bojand/ghz#419) and fails with
    "Symbol not found". A method's file is its service's file, so fall back to the service."""

    _pool: Any

    def _file_containing_symbol(
        self, request: reflection_pb2.ServerReflectionRequest, fully_qualified_name: str
    ) -> reflection_pb2.ServerReflectionResponse:
        lookup = super()._file_containing_symbol  # type: ignore[misc]
        found: reflection_pb2.ServerReflectionResponse = lookup(request, fully_qualified_name)
        service, _, method = fully_qualified_name.rpartition(".")
        if not found.HasField("error_response") or not service:
            return found
        try:
            descriptor = self._pool.FindServiceByName(service)
        except KeyError:
            return found
        if method not in descriptor.methods_by_name:
            return found
        answer: reflection_pb2.ServerReflectionResponse = lookup(request, service)
        return answer


class ReflectionServicer(_MethodSymbols, reflection.ReflectionServicer):  # type: ignore[misc]
    """For the thread-pool server."""


class AioReflectionServicer(_MethodSymbols, AioBase):  # type: ignore[misc]
    """For the grpc.aio server."""


def add_reflection(service_names: tuple[str, ...], server: Any) -> None:
    """What reflection.enable_server_reflection does (it lists the same services, reflection
    included), with method symbols resolved."""
    aio = isinstance(server, grpc.aio.Server)
    servicer_class = AioReflectionServicer if aio else ReflectionServicer
    servicer = servicer_class((*service_names, SERVICE_NAME))
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)

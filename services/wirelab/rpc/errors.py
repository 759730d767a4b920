"""Maps the core's one error type to a gRPC status, for both the aio and the sync servicer."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

import grpc

from wirelab.core import CoreError

F = TypeVar("F", bound=Callable[..., Any])


def status_of(exc: CoreError) -> grpc.StatusCode:
    return (
        grpc.StatusCode.RESOURCE_EXHAUSTED if exc.over_limit else grpc.StatusCode.INVALID_ARGUMENT
    )


def aborts_on_core_error(method: F) -> F:
    """Turn a CoreError raised by a servicer method (any of the four shapes, aio or sync) into
    ``context.abort`` with INVALID_ARGUMENT / RESOURCE_EXHAUSTED instead of UNKNOWN."""
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def async_stream(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                async for reply in method(self, request, context):
                    yield reply
            except CoreError as exc:
                await context.abort(status_of(exc), exc.message)

        return async_stream  # type: ignore[return-value]
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def async_unary(self: Any, request: Any, context: Any) -> Any:
            try:
                return await method(self, request, context)
            except CoreError as exc:
                await context.abort(status_of(exc), exc.message)

        return async_unary  # type: ignore[return-value]
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def sync_stream(self: Any, request: Any, context: Any) -> Iterator[Any]:
            try:
                yield from method(self, request, context)
            except CoreError as exc:
                context.abort(status_of(exc), exc.message)

        return sync_stream  # type: ignore[return-value]

    @functools.wraps(method)
    def sync_unary(self: Any, request: Any, context: Any) -> Any:
        try:
            return method(self, request, context)
        except CoreError as exc:
            context.abort(status_of(exc), exc.message)

    return sync_unary  # type: ignore[return-value]

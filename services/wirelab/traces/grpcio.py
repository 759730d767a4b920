"""The gRPC service's server spans: an interceptor that costs an unsampled call only the sampler's
decision (aio and thread-pool servers; imported only with traces on).

Hand-written, not OpenTelemetry's grpc server interceptor: that one kept 0.63-0.70 of a
saturated aio service's calls per CPU-second at ratio 0.01 (`wirelab perf overhead --traces 0.01
--protocols grpc`, 28 Nov, rounds cut short), as it builds every attribute and proxies the
servicer context of each call before the sampler has said no. This one asks the sampler first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import suppress
from typing import Any

import grpc
import grpc.aio
from opentelemetry import context, propagate, trace
from opentelemetry.trace import Span, SpanKind, StatusCode

# Operational services, untraced as they are unmeasured (the healthcheck calls one every few s).
UNTRACED = ("/grpc.health.v1.", "/grpc.reflection.")


def _carrier(metadata: Any) -> dict[str, str]:
    found = {}
    for key, value in metadata or ():
        if key in ("traceparent", "tracestate"):
            found[key] = value if isinstance(value, str) else value.decode("latin-1")
    return found


class _Call:
    """One call's span, started in the call's own task or thread and current while it runs."""

    __slots__ = ("span", "token")

    def __init__(self, tracer: trace.Tracer, method: str, kind: str, metadata: Any) -> None:
        carrier = _carrier(metadata)
        parent = propagate.extract(carrier) if carrier else None
        self.span: Span = tracer.start_span(method, parent, SpanKind.SERVER)
        if self.span.is_recording():
            service, _, name = method[1:].rpartition("/")
            self.span.set_attributes(
                {
                    "rpc.system": "grpc",
                    "rpc.service": service,
                    "rpc.method": name,
                    "wirelab.kind": kind,
                }
            )
        self.token = context.attach(trace.set_span_in_context(self.span, parent))

    def end(self, servicer_context: Any, error: BaseException | None) -> None:
        context.detach(self.token)
        span = self.span
        if span.is_recording():
            code = _code(servicer_context, error)
            span.set_attribute("rpc.grpc.status_code", code.value[0])
            if code not in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED):
                span.set_status(StatusCode.ERROR, code.name)
        span.end()


def _code(servicer_context: Any, error: BaseException | None) -> grpc.StatusCode:
    """The status the call ends with, as far as the handler set it."""
    code = None
    # The thread-pool server's context may have none to give.
    with suppress(AttributeError, NotImplementedError):
        code = servicer_context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if isinstance(code, int):
        return next((c for c in grpc.StatusCode if c.value[0] == code), grpc.StatusCode.UNKNOWN)
    return grpc.StatusCode.OK if error is None else grpc.StatusCode.UNKNOWN


def _wrap(handler: Any, wrap: Callable[[Any, bool], Any]) -> Any:
    """``handler`` with its behaviour wrapped (the streaming ones as streams)."""
    if handler.unary_unary:
        return handler._replace(unary_unary=wrap(handler.unary_unary, False))
    if handler.unary_stream:
        return handler._replace(unary_stream=wrap(handler.unary_stream, True))
    if handler.stream_unary:
        return handler._replace(stream_unary=wrap(handler.stream_unary, False))
    return handler._replace(stream_stream=wrap(handler.stream_stream, True))


class AioServerInterceptor(grpc.aio.ServerInterceptor):
    """A server span per call of a grpc.aio server, its parent the call's ``traceparent``."""

    def __init__(self, tracer: trace.Tracer, kinds: Mapping[str, str]) -> None:
        self.tracer = tracer
        self.kinds = kinds

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(details)
        method: str = details.method
        if handler is None or method.startswith(UNTRACED):
            return handler
        tracer, kind = self.tracer, self.kinds.get(method, "other")
        metadata = details.invocation_metadata

        def wrap(behavior: Any, streaming: bool) -> Any:
            if streaming:

                async def stream(request: Any, servicer_context: Any) -> AsyncIterator[Any]:
                    call, error = _Call(tracer, method, kind, metadata), None
                    try:
                        replies = behavior(request, servicer_context)
                        if hasattr(replies, "__aiter__"):
                            async for reply in replies:
                                yield reply
                        else:  # a behaviour that writes its replies itself
                            await replies
                    except BaseException as exc:
                        error = exc
                        raise
                    finally:
                        call.end(servicer_context, error)

                return stream

            async def unary(request: Any, servicer_context: Any) -> Any:
                call, error = _Call(tracer, method, kind, metadata), None
                try:
                    return await behavior(request, servicer_context)
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    call.end(servicer_context, error)

            return unary

        return _wrap(handler, wrap)


class SyncServerInterceptor(grpc.ServerInterceptor):
    """A server span per call of the thread-pool server."""

    def __init__(self, tracer: trace.Tracer, kinds: Mapping[str, str]) -> None:
        self.tracer = tracer
        self.kinds = kinds

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = continuation(details)
        method: str = details.method
        if handler is None or method.startswith(UNTRACED):
            return handler
        tracer, kind = self.tracer, self.kinds.get(method, "other")
        metadata = details.invocation_metadata

        def wrap(behavior: Any, streaming: bool) -> Any:
            if streaming:

                def stream(request: Any, servicer_context: Any) -> Iterator[Any]:
                    call, error = _Call(tracer, method, kind, metadata), None
                    try:
                        yield from behavior(request, servicer_context)
                    except BaseException as exc:
                        error = exc
                        raise
                    finally:
                        call.end(servicer_context, error)

                return stream

            def unary(request: Any, servicer_context: Any) -> Any:
                call, error = _Call(tracer, method, kind, metadata), None
                try:
                    return behavior(request, servicer_context)
                except BaseException as exc:
                    error = exc
                    raise
                finally:
                    call.end(servicer_context, error)

            return unary

        return _wrap(handler, wrap)

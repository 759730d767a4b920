"""The gRPC service's server spans, costing an unsampled call only the sampler's decision: each
method's behaviour wrapped where the server registers it (aio and thread-pool servers; imported
only with traces on).

Hand-written, not OpenTelemetry's grpc server interceptor: that one kept 0.694 [0.661-0.708] of
a saturated aio service's calls per CPU-second at ratio 0.01 (`wirelab perf overhead --traces
0.01 --protocols grpc`, 28 Nov, 12 rounds on a loaded machine), as it builds every attribute and
proxies the servicer context of each call before the sampler has said no. An interceptor of our
own that asked the sampler first kept 0.881 [0.869-0.897] (60 rounds), and the spans made in
the method's own handler, as here, 0.906 [0.902-0.913] (64 rounds), with an unsampled span
started without the SDK (wirelab.traces.spans) 0.936 [0.931-0.945], and with none at all in a
service without downstreams (spans.Starter.serve) 0.950 [0.946-0.956]: still short of the 0.97
the metrics keep (docs/traces.md). Through the handlers in process (`wirelab perf trace-cost`)
this hook adds 1.4-2.8 us to a small call, against 4.7-5.5 before Starter.serve. A measured aio
service runs it only for calls that get a span: SampledLookup decides as the call arrives
(0.966-0.974 on the whole service, docs/traces.md#what-it-costs).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import suppress
from contextvars import Token
from typing import Any

import grpc
import grpc.aio
from opentelemetry import context
from opentelemetry.context import Context
from opentelemetry.trace import Span, StatusCode

from wirelab.traces.spans import Starter

# Operational services, untraced as they are unmeasured (the healthcheck calls one every few s).
UNTRACED = ("/grpc.health.v1.", "/grpc.reflection.")


def _carrier(metadata: Any) -> dict[str, str] | None:
    """The call's ``traceparent`` and ``tracestate``, None when it brought neither."""
    found = None
    for key, value in metadata or ():
        if key == "traceparent" or key == "tracestate":
            if found is None:
                found = {}
            found[key] = value if isinstance(value, str) else value.decode("latin-1")
    return found


class SampledLookup(grpc.GenericRpcHandler):
    """A traced aio service's lookup of its measured methods (rpc.measure): the sampler decides
    as the call arrives, on the metadata grpc built for the lookup, and a call that gets no span
    is found in ``untraced``, the measured handlers without this module's hook, so it pays
    tracing only the decision; the others in ``traced``. aio only: a kept new trace's draw
    reaches the traced behaviour in the call's task (spans.Starter.skips). The split against
    hooking every call: docs/traces.md#what-it-costs."""

    def __init__(self, untraced: Any, traced: Any, starter: Starter) -> None:
        self.untraced = untraced
        self.traced = traced
        self.skips = starter.skips

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        for key, _ in handler_call_details.invocation_metadata or ():
            if key == "traceparent" or key == "tracestate":  # the caller's decision: follow it
                return self.traced.service(handler_call_details)
        lookup = self.untraced if self.skips() else self.traced
        return lookup.service(handler_call_details)


class _Call:
    """One call's span, started in the call's own task or thread and current while it runs."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span, token: Token[Context], method: str, kind: str) -> None:
        self.span = span
        self.token = token
        if span.is_recording():
            service, _, name = method[1:].rpartition("/")
            span.set_attributes(
                {
                    "rpc.system": "grpc",
                    "rpc.service": service,
                    "rpc.method": name,
                    "wirelab.kind": kind,
                }
            )

    @classmethod
    def begin(cls, starter: Starter, method: str, kind: str, servicer_context: Any) -> _Call | None:
        """The call's span begun, or None when the call has none (spans.Starter.serve)."""
        served = starter.serve(method, _carrier(servicer_context.invocation_metadata()))
        return None if served is None else cls(*served, method, kind)

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


def traced_handlers(
    handlers: Mapping[str, Any],
    service: str,
    starter: Starter,
    kinds: Mapping[str, str],
    aio: bool,
) -> dict[str, Any]:
    """``handlers`` (a service's method handlers by method name) with each behaviour in a
    server span, its parent the call's ``traceparent`` metadata."""
    return {
        name: _wrap(handler, _aio if aio else _sync, starter, f"/{service}/{name}", kinds)
        for name, handler in handlers.items()
    }


def _wrap(
    handler: Any,
    wrapper: Callable[..., Any],
    starter: Starter,
    method: str,
    kinds: Mapping[str, str],
) -> Any:
    """``handler`` with its behaviour wrapped (the streaming ones as streams)."""
    kind = kinds.get(method, "other")
    for shape, streaming in (
        ("unary_unary", False),
        ("unary_stream", True),
        ("stream_unary", False),
        ("stream_stream", True),
    ):
        behavior = getattr(handler, shape)
        if behavior is not None:
            traced = wrapper(behavior, streaming, starter, method, kind)
            return handler._replace(**{shape: traced})
    return handler


def _aio(behavior: Any, streaming: bool, starter: Starter, method: str, kind: str) -> Any:
    if streaming:

        async def stream(request: Any, servicer_context: Any) -> AsyncIterator[Any]:
            call, error = _Call.begin(starter, method, kind, servicer_context), None
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
                if call is not None:
                    call.end(servicer_context, error)

        return stream

    async def unary(request: Any, servicer_context: Any) -> Any:
        call = _Call.begin(starter, method, kind, servicer_context)
        if call is None:
            return await behavior(request, servicer_context)
        error = None
        try:
            return await behavior(request, servicer_context)
        except BaseException as exc:
            error = exc
            raise
        finally:
            call.end(servicer_context, error)

    return unary


def _sync(behavior: Any, streaming: bool, starter: Starter, method: str, kind: str) -> Any:
    if streaming:

        def stream(request: Any, servicer_context: Any) -> Iterator[Any]:
            call, error = _Call.begin(starter, method, kind, servicer_context), None
            try:
                yield from behavior(request, servicer_context)
            except BaseException as exc:
                error = exc
                raise
            finally:
                if call is not None:
                    call.end(servicer_context, error)

        return stream

    def unary(request: Any, servicer_context: Any) -> Any:
        call = _Call.begin(starter, method, kind, servicer_context)
        if call is None:
            return behavior(request, servicer_context)
        error = None
        try:
            return behavior(request, servicer_context)
        except BaseException as exc:
            error = exc
            raise
        finally:
            call.end(servicer_context, error)

    return unary

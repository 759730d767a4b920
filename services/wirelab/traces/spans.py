"""Server spans started at the cost of the sampler's decision alone when it says no (imported only
with traces on).

The SDK's own start of a span that is then not kept cost a gRPC call as much as the rest of its
tracing: with every server hook in place at ratio 0, a saturated aio service kept 0.914
[0.909-0.920] of its calls per CPU-second, and with the provider and exporter but no hook,
0.97-1.01 (`wirelab perf overhead --traces 0`, 28 Nov; docs/traces.md). With this starter, at
ratio 0.01: 0.936 [0.931-0.945] against 0.906 [0.902-0.913]; a REST order in process (`wirelab
perf trace-cost`) +11.8 us -> within the noise of traces off. Here an unsampled span is
decided and made without the SDK, as its ParentBased(TraceIdRatioBased) sampler decides: a
caller's decision is followed, a new trace is kept when the low 64 bits of its random id fall
under the ratio's bound. A kept span is the SDK's, on that same trace id. In a service without
downstreams an unsampled call gets no span and no context at all (Starter.serve): its span, its
context and their attach and detach were most of what was left, 4.7-5.5 us of a gRPC call
through the handlers, 1.4-2.8 us now, and 0.936 -> 0.950 [0.946-0.956] on the whole service.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextvars import ContextVar, Token
from random import getrandbits

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags

_LOW_64 = (1 << 64) - 1
_NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)
# The low 64 bits of a new trace the sampler kept before its call's span was started (Starter.
# skips, in the gRPC lookup), for Starter.serve in the same task to start it on.
_DRAWN: ContextVar[int | None] = ContextVar("wirelab_drawn", default=None)


class DrawnIds(RandomIdGenerator):
    """The provider's id generator: the trace id drawn for a sampling decision, when one is
    waiting in this thread, else a random one."""

    def __init__(self) -> None:
        self.waiting = threading.local()

    def generate_trace_id(self) -> int:
        drawn: int | None = getattr(self.waiting, "trace_id", None)
        if drawn is None:
            return super().generate_trace_id()
        self.waiting.trace_id = None
        return drawn


class Starter:
    """Starts a call's server span: the SDK's when the trace is kept, else a non-recording one
    that still carries the trace's context (flagged unsampled) to the call's downstreams, or,
    in a service that calls none (``relays`` False), nothing at all."""

    def __init__(self, tracer: trace.Tracer, ids: DrawnIds, ratio: float, relays: bool) -> None:
        self.tracer = tracer
        self.ids = ids
        self.relays = relays
        # As TraceIdRatioBased.get_bound_for_rate.
        self.bound = round(ratio * (_LOW_64 + 1))

    def serve(
        self, name: str, carrier: Mapping[str, str] | None
    ) -> tuple[Span, Token[Context]] | None:
        """Begin a server call whose ``traceparent`` and ``tracestate`` are ``carrier``: its span,
        made current until the token returned with it is detached. None when the call is not
        kept and the service calls no downstream: then nothing would read its context (an
        exemplar is taken of a kept call only), so none is made current and no span is made.
        A relay's unsampled call still makes one current, for its downstream calls to send on
        the "not sampled" flag, so the trace stays whole or absent."""
        parent = propagate.extract(carrier) if carrier else None
        if parent is None and not self.relays:  # the common call: a new trace, rarely kept
            low = _DRAWN.get()
            if low is None:
                low = getrandbits(64)
                if low >= self.bound:
                    return None
            else:  # kept already (skips)
                _DRAWN.set(None)
            span = self._kept(name, (getrandbits(64) << 64 | low) or 1)
        else:
            span = self.start(name, parent)
            if not self.relays and not span.is_recording():
                return None
        return span, context.attach(trace.set_span_in_context(span, parent))

    def skips(self) -> bool:
        """Whether a call that brought no trace headers gets no span at all, decided before its
        handler is chosen (the gRPC lookup, rpc.measure), so that it runs no tracing code: a new
        trace the sampler does not keep, in a service without downstreams. A kept one's draw
        waits in this task for :meth:`serve` to start its span on."""
        if self.relays:
            return False
        low = getrandbits(64)
        if low >= self.bound:
            return True
        _DRAWN.set(low)
        return False

    def start(self, name: str, parent: Context | None) -> Span:
        """The span of a call whose caller's context is ``parent`` (None: a new trace), made
        whether it is kept or not."""
        if parent is not None:
            caller = trace.get_current_span(parent).get_span_context()
            if caller.is_valid:
                if caller.trace_flags.sampled:
                    return self.tracer.start_span(name, parent, SpanKind.SERVER)
                own = SpanContext(caller.trace_id, getrandbits(64) or 1, False, _NOT_SAMPLED)
                return NonRecordingSpan(own)
        trace_id = getrandbits(128) or 1
        if trace_id & _LOW_64 >= self.bound:
            return NonRecordingSpan(
                SpanContext(trace_id, getrandbits(64) or 1, False, _NOT_SAMPLED)
            )
        return self._kept(name, trace_id)

    def _kept(self, name: str, trace_id: int) -> Span:
        """The SDK's span of a new trace kept on ``trace_id``: its sampler, given that id, then
        decides as here."""
        self.ids.waiting.trace_id = trace_id
        return self.tracer.start_span(name, None, SpanKind.SERVER)

"""Exemplars: each kept span's trace id noted where the latency histograms read it (imported only
with traces on).

The server's duration histogram (wirelab.metrics) and a relay's client histogram
(wirelab.hops.outgoing) take a sampled call's trace id from ``wirelab.metrics.SAMPLED`` as the
exemplar of the bucket the call fell in; Prometheus stores it from the OpenMetrics page and
Grafana's latency panels link it to the trace in Jaeger (docs/traces.md#exemplars). The id is
noted as a span starts rather than read from OpenTelemetry's current span where each call is
recorded: only a kept span pays for it, and gRPC records a call in a done callback, after its
span has ended and outside its context.
"""

from __future__ import annotations

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from wirelab.metrics import SAMPLED, Sampled


class SampledTraceIds(SpanProcessor):
    """Notes the trace id of the first span the sampler keeps in a call (the SDK starts no
    other) in the call's Sampled: the one a measured gRPC call opened (metrics.TracedCall), else
    a new one, current for the rest of the call (a REST request, which starts its span before
    its measurement). The call's later spans (a relay's client spans) are of the same trace."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        sampled = SAMPLED.get()
        if sampled is None:
            SAMPLED.set(Sampled(format(span.get_span_context().trace_id, "032x")))
        elif sampled.trace_id is None:
            sampled.trace_id = format(span.get_span_context().trace_id, "032x")

    def on_end(self, span: ReadableSpan) -> None:
        return None

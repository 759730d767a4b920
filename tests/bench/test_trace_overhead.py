"""`wirelab perf overhead --traces`: the traced variant exports to an OTLP receiver of the
command's own, which must take the services' exporter's batches as Jaeger would (a refused
export would leave the traced service retrying instead of exporting, and measure that)."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from wirelab_perf.overhead import otlp_sink


def test_the_sink_takes_an_otlp_export() -> None:
    kept = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    with provider.get_tracer("test").start_as_current_span("POST /v1/orders"):
        pass
    with otlp_sink() as endpoint:
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=5)
        try:
            assert exporter.export(kept.get_finished_spans()) == SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()

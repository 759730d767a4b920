"""`wirelab perf overhead --traces`: the traced variant exports to an OTLP receiver of the
command's own, which must take the services' exporter's batches as Jaeger would (a refused
export would leave the traced service retrying instead of exporting, and measure that)."""

from __future__ import annotations

import httpx
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from wirelab.traces import TRACES_PATH
from wirelab_perf.overhead import otlp_sink


def test_the_sink_takes_an_otlp_export() -> None:
    kept = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(kept))
    with provider.get_tracer("test").start_as_current_span("POST /v1/orders"):
        pass
    received: list[ExportTraceServiceRequest] = []
    with otlp_sink(received.append) as endpoint:
        exporter = OTLPSpanExporter(endpoint=endpoint + TRACES_PATH, timeout=5)
        try:
            assert exporter.export(kept.get_finished_spans()) == SpanExportResult.SUCCESS
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]
    [request] = received
    [span] = request.resource_spans[0].scope_spans[0].spans
    assert span.name == "POST /v1/orders"


def test_the_sink_refuses_another_path() -> None:
    with otlp_sink() as endpoint:
        answered = httpx.post(endpoint + "/v1/metrics", content=b"", timeout=5)
    assert answered.status_code == 404


def test_the_sink_reads_a_chunked_export_as_nodes_exporter_sends_it() -> None:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.add(name="GET /v1/blobs")
    sent = request.SerializeToString()
    received: list[ExportTraceServiceRequest] = []
    with otlp_sink(received.append) as endpoint:
        # A generator body goes out chunked: three pieces, the last of one byte.
        pieces = iter((sent[:5], sent[5:-1], sent[-1:]))
        answered = httpx.post(endpoint + TRACES_PATH, content=pieces, timeout=5)
    assert answered.status_code == 200
    assert answered.request.headers["Transfer-Encoding"] == "chunked"
    assert received == [request]

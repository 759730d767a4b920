"""Traces (docs/traces.md): OpenTelemetry, set up only when WIRELAB_TRACES=on.

Off (the default) nothing of the SDK is imported and no hook is installed: the services run the
code they ran before traces existed. On, one TracerProvider per process samples each new trace
with the head ratio WIRELAB_TRACE_SAMPLE_RATIO (a call that arrives with a W3C ``traceparent``
follows its caller's decision), and exports in batches over OTLP/HTTP to
WIRELAB_TRACES_ENDPOINT (Jaeger, compose's ``traces`` profile). A call is traced by the lab's own
hooks, which ask the sampler before anything else (OpenTelemetry's instrumentations of FastAPI
and of grpc servers cost every call at any ratio: wirelab.traces.asgi and .grpcio say how much):
REST's by wirelab.traces.asgi and a relay's by wirelab.traces.http, gRPC's by
wirelab.traces.grpcio and a relay's channel by OpenTelemetry's grpc client interceptors, the AMQP
arm's messages by wirelab.traces.amqp. Every span carries the lab's labels,
``wirelab.protocol``, ``wirelab.kind``, ``wirelab.service`` and ``wirelab.runtime``, as the
metrics do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

    from wirelab.settings import Settings
    from wirelab.traces.spans import Starter

RUNTIME = "python"
# What a span's kind (the metrics' `kind` label) is read from when the instrumentation that
# started it knows only the call: gRPC's full method name.
KindOf = Callable[[Mapping[str, Any]], str | None]

# Where an OTLP/HTTP receiver takes spans, under WIRELAB_TRACES_ENDPOINT (OTLP's own path).
TRACES_PATH = "/v1/traces"


@dataclass
class Tracing:
    """A process's tracer provider and the hooks each transport installs with it."""

    provider: TracerProvider
    protocol: str
    service: str
    starter: Starter

    @property
    def tracer(self) -> Tracer:
        return self.provider.get_tracer("wirelab")

    def instrument_app(self, app: FastAPI) -> None:
        """Trace the REST service's calls (wirelab.traces.asgi): a server span per request and
        per WebSocket session, its caller's context taken from ``traceparent``; none for the
        operational endpoints."""
        from wirelab.rest.middleware import KINDS, WEBSOCKET_KINDS
        from wirelab.traces.asgi import TracingMiddleware

        app.add_middleware(
            TracingMiddleware, starter=self.starter, kinds=KINDS, websocket_kinds=WEBSOCKET_KINDS
        )

    def grpc_handlers(self, handlers: Mapping[str, Any], service: str, aio: bool) -> Any:
        """A gRPC service's method handlers, aio or thread pool, each call in a server span
        (wirelab.traces.grpcio), its caller's context taken from the call's metadata."""
        from wirelab.rpc.kinds import METHOD_KINDS
        from wirelab.traces.grpcio import traced_handlers

        return traced_handlers(handlers, service, self.starter, METHOD_KINDS, aio)

    def grpc_lookup(self, untraced: Any, traced: Any) -> Any:
        """A measured aio service's lookup that asks the sampler first: a call without a span
        is found in ``untraced``, the others in ``traced`` (wirelab.traces.grpcio)."""
        from wirelab.traces.grpcio import SampledLookup

        return SampledLookup(untraced, traced, self.starter)

    def client_interceptors(self) -> list[Any]:
        """A grpc.aio channel's interceptors: a client span per call, ``traceparent`` sent in
        the call's metadata."""
        from opentelemetry.instrumentation.grpc import aio_client_interceptors

        interceptors: list[Any] = aio_client_interceptors(  # type: ignore[no-untyped-call]
            tracer_provider=self.provider
        )
        return interceptors

    def http_client(self, client: Any) -> Any:
        """A REST relay's pooled client (hops.via_rest.Client), its calls traced
        (wirelab.traces.http)."""
        from wirelab.traces.http import TracedClient

        return TracedClient(client, self.tracer)

    def shutdown(self) -> None:
        """Export what is still batched, then stop (SIGTERM's drain)."""
        self.provider.shutdown()


def start(
    settings: Settings,
    protocol: str,
    kind_of: KindOf | None = None,
    *,
    service: str | None = None,
    exporter: SpanExporter | None = None,
) -> Tracing | None:
    """The process's tracing for WIRELAB_TRACES, or None when it is off. ``kind_of`` names a
    span's kind from its attributes; ``service`` is the name WIRELAB_SERVICE_NAME leaves to the
    process (a queue's consumer: its queue), else the protocol; ``exporter`` replaces OTLP
    (tests: in memory)."""
    if not settings.traces:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    from wirelab.traces.exemplars import SampledTraceIds
    from wirelab.traces.labels import LabLabels
    from wirelab.traces.spans import DrawnIds, Starter

    service = settings.service_name or service or protocol
    labels = {"wirelab.protocol": protocol, "wirelab.service": service, "wirelab.runtime": RUNTIME}
    resource = Resource.create({"service.name": service, "service.namespace": "wirelab", **labels})
    sampler = ParentBased(TraceIdRatioBased(settings.trace_sample_ratio))
    ids = DrawnIds()
    provider = TracerProvider(resource=resource, sampler=sampler, id_generator=ids)
    provider.add_span_processor(LabLabels(labels, kind_of))
    provider.add_span_processor(SampledTraceIds())  # the latency histograms' exemplars
    if exporter is None:
        # Over HTTP, not gRPC: at ratio 0.01 a saturated REST service kept 0.916 of traces off
        # over OTLP/gRPC, 0.951 over OTLP/HTTP as at ratio 0 (docs/traces.md#otlp-over-http).
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.traces_endpoint.rstrip("/") + TRACES_PATH)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    # A service with downstreams makes even an unsampled call's context current, for them.
    relays = bool(settings.downstream)
    starter = Starter(provider.get_tracer("wirelab"), ids, settings.trace_sample_ratio, relays)
    return Tracing(provider, protocol, service, starter)


def grpc_kind(kinds: Mapping[str, str]) -> KindOf:
    """A gRPC span's kind from its full method name, by the measured methods' table."""

    def kind_of(attributes: Mapping[str, Any]) -> str | None:
        service, method = attributes.get("rpc.service"), attributes.get("rpc.method")
        if service is None or method is None:
            return None
        return kinds.get(f"/{service}/{method}")

    return kind_of

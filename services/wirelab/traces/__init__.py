"""Traces (docs/traces.md): OpenTelemetry, set up only when WIRELAB_TRACES=on.

Off (the default) nothing of the SDK is imported and no hook is installed: the services run the
code they ran before traces existed. On, one TracerProvider per process samples each new trace
with the head ratio WIRELAB_TRACE_SAMPLE_RATIO (a call that arrives with a W3C ``traceparent``
follows its caller's decision), and exports in batches over OTLP/gRPC to
WIRELAB_TRACES_ENDPOINT (Jaeger, compose's ``traces`` profile). REST and gRPC calls are traced by
OpenTelemetry's own instrumentations (FastAPI/ASGI, grpc, httpx), the AMQP arm's messages by
wirelab.traces.amqp (the context in their headers). Every span carries the lab's labels,
``wirelab.protocol``, ``wirelab.kind``, ``wirelab.service`` and ``wirelab.runtime``, as the
metrics do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import httpx
    from fastapi import FastAPI
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer

    from wirelab.settings import Settings

RUNTIME = "python"
# What a span's kind (the metrics' `kind` label) is read from when the instrumentation that
# started it knows only the call: gRPC's full method name, REST's method and path.
KindOf = Callable[[Mapping[str, Any]], str | None]


@dataclass
class Tracing:
    """A process's tracer provider and the hooks each transport installs with it."""

    provider: TracerProvider
    protocol: str
    service: str

    @property
    def tracer(self) -> Tracer:
        return self.provider.get_tracer("wirelab")

    def instrument_app(self, app: FastAPI) -> None:
        """Trace the REST service's calls: a server span per request, its caller's context taken
        from ``traceparent``. No span per ASGI message (a stream's thousands of them) and none
        for the health endpoint, which the healthcheck calls every few seconds."""
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(
            app,
            tracer_provider=self.provider,
            excluded_urls="/healthz,/openapi.json,/docs",
            exclude_spans=["receive", "send"],
        )

    def server_interceptors(self, aio: bool) -> list[Any]:
        """The gRPC server's interceptor (aio or thread pool): a server span per call, its
        caller's context taken from the call's metadata; health and reflection untraced."""
        from opentelemetry.instrumentation.grpc import (
            aio_server_interceptor,
            filters,
            server_interceptor,
        )

        traced = filters.negate(
            filters.any_of(filters.health_check(), filters.service_prefix("grpc.reflection"))
        )
        make = aio_server_interceptor if aio else server_interceptor
        return [make(tracer_provider=self.provider, filter_=traced)]  # type: ignore[no-untyped-call]

    def client_interceptors(self) -> list[Any]:
        """A grpc.aio channel's interceptors: a client span per call, ``traceparent`` sent in
        the call's metadata."""
        from opentelemetry.instrumentation.grpc import aio_client_interceptors

        interceptors: list[Any] = aio_client_interceptors(  # type: ignore[no-untyped-call]
            tracer_provider=self.provider
        )
        return interceptors

    def instrument_client(self, client: httpx.AsyncClient) -> None:
        """A REST relay's client: a client span per request, ``traceparent`` in its headers."""
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor.instrument_client(client, tracer_provider=self.provider)

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

    from wirelab.traces.labels import LabLabels

    service = settings.service_name or service or protocol
    labels = {"wirelab.protocol": protocol, "wirelab.service": service, "wirelab.runtime": RUNTIME}
    resource = Resource.create({"service.name": service, "service.namespace": "wirelab", **labels})
    sampler = ParentBased(TraceIdRatioBased(settings.trace_sample_ratio))
    provider = TracerProvider(resource=resource, sampler=sampler)
    provider.add_span_processor(LabLabels(labels, kind_of))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.traces_endpoint, insecure=True)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return Tracing(provider, protocol, service)


def rest_kind(kinds: Mapping[tuple[str, str], str]) -> KindOf:
    """A REST span's kind from its method and path (a server's path, a client's URL; the old
    and the stable HTTP conventions both), by the metrics middleware's table."""

    def kind_of(attributes: Mapping[str, Any]) -> str | None:
        method = attributes.get("http.request.method") or attributes.get("http.method")
        path = attributes.get("url.path") or attributes.get("http.target")
        url = attributes.get("url.full") or attributes.get("http.url")
        if path is None and url is not None:
            path = urlsplit(str(url)).path
        if method is None or path is None:
            return None
        return kinds.get((str(method), str(path).partition("?")[0]))

    return kind_of


def grpc_kind(kinds: Mapping[str, str]) -> KindOf:
    """A gRPC span's kind from its full method name, by the measured methods' table."""

    def kind_of(attributes: Mapping[str, Any]) -> str | None:
        service, method = attributes.get("rpc.service"), attributes.get("rpc.method")
        if service is None or method is None:
            return None
        return kinds.get(f"/{service}/{method}")

    return kind_of

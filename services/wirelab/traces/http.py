"""A REST relay's outgoing calls in its order's trace, whichever HTTP client makes them
(hops.via_rest: aiohttp or httpx): a client span per sampled call, ``traceparent`` on every one
(imported only with traces on)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode


class TracedClient:
    """Wraps a relay's pooled client (hops.via_rest.Client). In an unsampled trace the caller's
    context is sent as it is, its flags saying "not sampled", so the downstream keeps none
    either; no span is made for it, the cheapest way to keep a trace whole or absent."""

    def __init__(self, inner: Any, tracer: trace.Tracer) -> None:
        self.inner = inner
        self.tracer = tracer
        self.name: str = inner.name

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, bytes, str]:
        if not trace.get_current_span().is_recording():
            propagate.inject(headers)
            result: tuple[int, bytes, str] = await self.inner.post(url, body, headers, timeout)
            return result
        where = urlsplit(url)
        attributes: dict[str, str | int] = {
            "http.request.method": "POST",
            "url.full": url,
            "server.address": where.hostname or "",
            "server.port": where.port or 80,
            "wirelab.kind": "unary",
        }
        with self.tracer.start_as_current_span(
            f"POST {where.path}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            propagate.inject(headers)
            result = await self.inner.post(url, body, headers, timeout)
            span.set_attribute("http.response.status_code", result[0])
            if result[0] >= 400:
                span.set_status(StatusCode.ERROR)
            return result

    async def close(self) -> None:
        await self.inner.close()

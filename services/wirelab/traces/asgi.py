"""The REST service's server spans: a pure ASGI middleware that costs an unsampled call only the
sampler's decision (imported only with traces on).

Hand-written, not OpenTelemetry's FastAPI/ASGI instrumentation: that one added 80 us of CPU to
every small order at ratio 0.01 (73 -> 153 us per order through the app in process; 218 us at
ratio 1), about as much again as the service's own work, by collecting every HTTP attribute and
wrapping each ASGI message before the sampler had said no. This one asks the sampler first and
builds attributes only for a span it keeps, and in a service without downstreams does nothing
more for one it does not keep (spans.Starter.serve): 0.5 us a call around a do-nothing app,
about 2 us in the lab's app at ratio 0 (ad hoc, 28 Nov, load average 5; `wirelab perf
trace-cost` measures it at each ratio, and the library's).
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context
from opentelemetry.trace import StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wirelab.traces.spans import Starter

# Operational endpoints, untraced as they are unmeasured (the healthcheck calls one every few s).
UNTRACED = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


class TracingMiddleware:
    """A server span per HTTP call (not yet WebSocket pings), its parent the caller's
    ``traceparent``; made current while the call runs, so a relay's downstream calls carry it,
    sampled or not."""

    def __init__(
        self, app: ASGIApp, starter: Starter, kinds: Mapping[tuple[str, str], str]
    ) -> None:
        self.app = app
        self.starter = starter
        self.kinds = kinds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNTRACED:
            await self.app(scope, receive, send)
            return
        carrier = None
        for name, value in scope["headers"]:
            if name == b"traceparent" or name == b"tracestate":
                if carrier is None:
                    carrier = {}
                carrier[name.decode()] = value.decode("latin-1")
        method = scope.get("method", "GET")
        path = scope["path"]
        served = self.starter.serve(f"{method} {path}", carrier)
        if served is None:  # unsampled, and no downstream to tell: nothing to make current
            await self.app(scope, receive, send)
            return
        span, token = served
        try:
            if not span.is_recording():  # unsampled: the context only, for the downstreams
                await self.app(scope, receive, send)
                return
            span.set_attributes(
                {
                    "http.request.method": method,
                    "url.path": path,
                    "url.scheme": scope.get("scheme", "http"),
                    "http.route": path,
                    "network.protocol.version": scope.get("http_version", "1.1"),
                    "wirelab.kind": self.kinds.get((method, path), "other"),
                }
            )
            status = 0

            async def sending(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    span.set_attribute("http.response.status_code", status)
                await send(message)

            try:
                await self.app(scope, receive, sending)
            except BaseException as exc:
                span.record_exception(exc)
                span.set_status(StatusCode.ERROR, type(exc).__name__)
                raise
            if status >= 500:
                span.set_status(StatusCode.ERROR)
        finally:
            context.detach(token)
            span.end()

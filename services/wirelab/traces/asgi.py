"""The REST service's server spans, a call's or a WebSocket session's: a pure ASGI middleware that
costs an unsampled call only the sampler's decision (imported only with traces on).

Hand-written, not OpenTelemetry's FastAPI/ASGI instrumentation: that one added 80 us of CPU to
every small order at ratio 0.01 (73 -> 153 us per order through the app in process; 218 us at
ratio 1), about as much again as the service's own work, by collecting every HTTP attribute and
wrapping each ASGI message before the sampler had said no. This one asks the sampler first and
builds attributes only for a span it keeps, and in a service without downstreams does nothing
more for one it does not keep (spans.Starter.skips, asked first): 0.5 us a call around a
do-nothing app, about 2 us in the lab's app at ratio 0 (ad hoc, 28 Nov, load average 5;
`wirelab perf trace-cost` measures it at each ratio, and the library's).
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import context
from opentelemetry.trace import Span, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wirelab.contract import OTHER_KIND
from wirelab.traces.spans import Starter

# Operational endpoints, untraced as they are unmeasured (the healthcheck calls one every few s).
UNTRACED = frozenset({"/healthz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
# RFC 6455's "internal error" close: a session the server ends so is a server error.
_INTERNAL_ERROR = 1011


def _carrier(scope: Scope) -> dict[str, str] | None:
    """The call's ``traceparent`` and ``tracestate`` headers, or None when it sent neither."""
    carrier = None
    for name, value in scope["headers"]:
        if name == b"traceparent" or name == b"tracestate":
            if carrier is None:
                carrier = {}
            carrier[name.decode()] = value.decode("latin-1")
    return carrier


def _failed(span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(StatusCode.ERROR, type(exc).__name__)


class TracingMiddleware:
    """A server span per HTTP call and per WebSocket session, its parent the caller's
    ``traceparent`` (the upgrade request's, for a session); made current while the call runs, so
    a relay's downstream calls carry it, sampled or not. ``kinds`` names an HTTP call's kind by
    (method, path), ``websocket_kinds`` a session's by path, as the metrics do."""

    def __init__(
        self,
        app: ASGIApp,
        starter: Starter,
        kinds: Mapping[tuple[str, str], str],
        websocket_kinds: Mapping[str, str],
    ) -> None:
        self.app = app
        self.starter = starter
        self.skips = starter.skips  # False in a relay: its unsampled calls still carry a context
        self.kinds = kinds
        self.websocket_kinds = websocket_kinds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNTRACED:
            if scope["type"] == "websocket" and scope["path"] not in UNTRACED:
                await self._session(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        carrier = _carrier(scope)
        # A new trace the sampler does not keep, in a service without downstreams: no span, no
        # name, no other call (as the gRPC lookup decides, grpcio.SampledLookup). It kept 0.971
        # [0.960-0.976] of traces off at ratio 0.01 against 0.962 [0.957-0.971] asking serve():
        # docs/traces.md#otlp-over-http.
        if carrier is None and self.skips():
            await self.app(scope, receive, send)
            return
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
                    "wirelab.kind": self.kinds.get((method, path), OTHER_KIND),
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
                _failed(span, exc)
                raise
            if status >= 500:
                span.set_status(StatusCode.ERROR)
        finally:
            context.detach(token)
            span.end()

    async def _session(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket session's span, as an HTTP call's (the sampler asked first, attributes
        built only for a kept span): named for its upgrade request, ``GET <path>``, from the
        upgrade to the session's end, as the metrics time the session (one observation per
        session, not per ping), so the session's exemplar names this trace. Its status code is
        the handshake's answer (101 accepted, 403 closed before it); an error when the app
        raised or closed the session as an internal error (1011)."""
        path = scope["path"]
        served = self.starter.serve(f"GET {path}", _carrier(scope))
        if served is None:
            await self.app(scope, receive, send)
            return
        span, token = served
        try:
            if not span.is_recording():
                await self.app(scope, receive, send)
                return
            span.set_attributes(
                {
                    "http.request.method": "GET",
                    "url.path": path,
                    # The upgrade request's scheme: ASGI names the session's (ws, wss).
                    "url.scheme": "https" if scope.get("scheme") == "wss" else "http",
                    "http.route": path,
                    "network.protocol.version": scope.get("http_version", "1.1"),
                    "wirelab.kind": self.websocket_kinds.get(path, OTHER_KIND),
                }
            )
            answered = False

            async def sending(message: Message) -> None:
                nonlocal answered
                kind = message["type"]
                if kind == "websocket.accept":
                    answered = True
                    span.set_attribute("http.response.status_code", 101)
                elif kind == "websocket.close":
                    if not answered:  # refused before the handshake: the server answers 403
                        answered = True
                        span.set_attribute("http.response.status_code", 403)
                    elif message.get("code") == _INTERNAL_ERROR:
                        span.set_status(StatusCode.ERROR)
                elif kind == "websocket.http.response.start":  # a refusal with its own answer
                    answered = True
                    span.set_attribute("http.response.status_code", message["status"])
                    if message["status"] >= 500:
                        span.set_status(StatusCode.ERROR)
                await send(message)

            try:
                await self.app(scope, receive, sending)
            except BaseException as exc:
                _failed(span, exc)
                raise
        finally:
            context.detach(token)
            span.end()

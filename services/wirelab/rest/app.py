"""The FastAPI application: routes, error mapping, health and (unless switched off) metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.telemetry import TelemetryConfig
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from wirelab.core import CoreError, Overloaded, PayloadBudget
from wirelab.hops import DownstreamError, build_relay
from wirelab.metrics import ServerMetrics
from wirelab.rest import openapi
from wirelab.rest.concurrency import ConcurrencyLimit
from wirelab.rest.middleware import MetricsMiddleware
from wirelab.rest.orderlimit import OrderBodyLimit
from wirelab.rest.routes import build_router
from wirelab.settings import Settings
from wirelab.traces import Tracing

# FastAPI's own OpenTelemetry (0.165's `telemetry`) off: the lab's spans are wirelab.traces.asgi's
# and its metrics its own; with a global provider set FastAPI made four spans of its own per order
# (its server span and its operations': tests/services/test_traces.py). Left on, it asks the
# global tracer, meter and logger providers at every call whether they are configured: 2.98 us a
# call against 0.06 off (timeit of its `enabled()`), and a small order through the app took 151.2
# and 145.0 us with it against 144.6 and 137.7 without (medians of 8 batches of 3,000 in turn, ad
# hoc, 29 Nov 2026).
NO_FASTAPI_TELEMETRY: TelemetryConfig = {
    "tracing": False,
    "metrics": False,
    "logs": False,
    "operation_spans": False,
}


def _validation_detail(errors: Sequence[Any]) -> str:
    # One readable line instead of FastAPI's list, so every 4xx body is {"detail": "<message>"}.
    parts = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{where or 'body'}: {err.get('msg')}")
    return "; ".join(parts)


async def _core_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CoreError)
    return JSONResponse({"detail": exc.message}, status_code=413 if exc.over_limit else 400)


async def _overloaded(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Overloaded)
    headers = {"Retry-After": str(exc.retry_after_seconds)}
    return JSONResponse({"detail": exc.message}, status_code=503, headers=headers)


async def _downstream_failed(_: Request, exc: Exception) -> JSONResponse:
    # 504 when the downstream ran out of time, else 502: the fault is past this service, and
    # neither is 503, which here means "this service refuses the call for load".
    assert isinstance(exc, DownstreamError)
    return JSONResponse(
        {"detail": exc.message}, status_code=504 if exc.reason == "timeout" else 502
    )


async def _request_invalid(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError | ValidationError)
    return JSONResponse({"detail": _validation_detail(exc.errors())}, status_code=422)


async def _bad_request(request: Request, exc: Exception) -> Response:
    # FastAPI reads a JSON body itself and turns any failure to read it into 400 "error parsing
    # the body", a client that went away mid-body (or was cut off by the body read timeout)
    # included: an order counted 400 where an upload counts 499 or 408. Raised on, the metrics
    # middleware records it as it does an upload's.
    assert isinstance(exc, HTTPException)
    if isinstance(exc.__cause__, ClientDisconnect):
        raise exc.__cause__
    return await http_exception_handler(request, exc)


def _method_not_allowed(app: FastAPI) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    async def answer(request: Request, exc: Exception) -> JSONResponse:
        # Starlette's 405 lists the methods of the first route with the path only (POST, not
        # GET, for /v1/blobs); the document has every operation on it. HEAD is not among them:
        # FastAPI's GET routes answer it 405 too.
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        operations = app.openapi()["paths"].get(request.url.path)
        if operations:
            headers["Allow"] = ", ".join(sorted(method.upper() for method in operations))
        return JSONResponse({"detail": exc.detail}, status_code=405, headers=headers)

    return answer


def create_app(
    settings: Settings, metrics: ServerMetrics | None = None, tracing: Tracing | None = None
) -> FastAPI:
    """Build the app; with ``metrics`` None no instrumentation is installed at all, with
    ``tracing`` None no tracing."""

    relay = build_relay(settings, "rest", None if metrics is None else metrics.registry, tracing)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Sync handlers run in anyio's pool; size it like the sync gRPC server's.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.grpc_threads
        yield
        if relay is not None:
            await relay.close()

    app = FastAPI(
        telemetry=NO_FASTAPI_TELEMETRY,
        lifespan=lifespan,
        title="wirelab REST",
        version="1.0",
        description="REST mirror of wirelab.v1.WireLab (proto/wirelab/v1/wirelab.proto).",
    )
    budget = PayloadBudget(settings.limits.payload_budget_bytes)
    sync = settings.rest_handlers == "sync"
    capped = settings.rest_max_concurrent_calls > 0
    # Protobuf orders (rest/protobuf.py) are not relayed: a relay hop speaks its downstreams' JSON.
    openapi.install(app, settings.limits, capped=capped, protobuf=relay is None)
    app.include_router(build_router(settings.limits, sync, budget, relay))
    app.add_exception_handler(DownstreamError, _downstream_failed)
    app.add_exception_handler(Overloaded, _overloaded)
    app.add_exception_handler(CoreError, _core_error)
    app.add_exception_handler(400, _bad_request)
    app.add_exception_handler(405, _method_not_allowed(app))
    app.add_exception_handler(RequestValidationError, _request_invalid)
    app.add_exception_handler(ValidationError, _request_invalid)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    # Added first, so it runs inside the metrics middleware, which then counts its refusals.
    app.add_middleware(OrderBodyLimit, limits=settings.limits)
    if settings.rest_max_concurrent_calls:
        app.add_middleware(ConcurrencyLimit, limit=settings.rest_max_concurrent_calls)
    if metrics is not None:
        metrics.budget = budget
        app.add_middleware(MetricsMiddleware, metrics=metrics)
    if tracing is not None:
        # Outside every middleware above, so a span covers what the metrics measure.
        tracing.instrument_app(app)
    return app

"""Builds and runs the gRPC server: aio by default, or grpc.server with a thread pool."""

from __future__ import annotations

import asyncio
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

# health re-exports its asyncio servicer as `aio` at runtime.
from grpc_health.v1.health import aio as health_aio

from wirelab import serving
from wirelab.core import PayloadBudget
from wirelab.hops import Relay, build_relay
from wirelab.metrics import ServerMetrics
from wirelab.rpc.callcap import CallCap
from wirelab.rpc.intake import Admission
from wirelab.rpc.kinds import METHOD_KINDS, SERVICE
from wirelab.rpc.measure import Capture, MeasuredMethods
from wirelab.rpc.measure_aio import AioMeasuredMethods
from wirelab.rpc.measure_sync import SyncMeasuredMethods
from wirelab.rpc.receipts import Receipts, receipt_options, receipts_for
from wirelab.rpc.reflection import add_reflection
from wirelab.rpc.servicer import AsyncWireLab, RelayingWireLab
from wirelab.rpc.sync_servicer import SyncWireLab
from wirelab.settings import Settings
from wirelab.traces import Tracing, grpc_kind
from wirelab.traces import start as start_tracing
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

PROG = "python -m wirelab.rpc"


def server_options(settings: Settings) -> list[tuple[str, int]]:
    limit = settings.grpc_max_message_bytes
    return [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        # Without this a second server on the same port silently shares it (SO_REUSEPORT).
        ("grpc.so_reuseport", 0),
        *receipt_options(settings.limits.payload_budget_bytes),
    ]


def _register(
    server: Any,
    servicer: Any,
    health_servicer: Any,
    measured: MeasuredMethods | None,
    admission: Admission,
    receipts: Receipts,
    cap: int,
    tracing: Tracing | None = None,
) -> None:
    capture = Capture(pb_grpc.add_WireLabServicer_to_server, servicer)
    handlers = admission.handlers(capture.handlers)
    if measured is None:  # Upload's message read in its turn here, as measured it is there
        handlers = receipts.handlers(handlers)
    if cap:
        handlers = CallCap(cap, admission.aio).handlers(handlers)
    # Spans inside the measurement: a span is part of what a call costs.
    if tracing is not None and measured is not None and admission.aio:
        # The sampler decides at the lookup: a call without a span runs the untraced handler,
        # whose record carries no trace.
        traced = tracing.grpc_handlers(handlers, capture.service, admission.aio)
        untraced = measured.lookup(capture.service, handlers, exemplars=False)
        kept = measured.lookup(capture.service, traced, exemplars=True)
        server.add_generic_rpc_handlers((tracing.grpc_lookup(untraced, kept),))
    else:
        if tracing is not None:
            handlers = tracing.grpc_handlers(handlers, capture.service, admission.aio)
        if measured is None:
            server.add_registered_method_handlers(capture.service, handlers)
        else:
            lookup = measured.lookup(capture.service, handlers, measured.metrics.exemplars)
            server.add_generic_rpc_handlers((lookup,))
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    names = (SERVICE, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name)
    add_reflection(names, server)
    if measured is not None:
        measured.register_unknown(server)


def _receipts(settings: Settings, aio: bool) -> Receipts:
    """Upload messages in receipt at once: as many of the largest as the budget holds."""
    limit = receipts_for(settings.limits.payload_budget_bytes, settings.grpc_max_message_bytes)
    return Receipts(limit, aio)


def _budget(settings: Settings, metrics: ServerMetrics | None) -> PayloadBudget:
    """One payload budget per server, shown on /metrics."""
    budget = PayloadBudget(settings.limits.payload_budget_bytes)
    if metrics is not None:
        metrics.budget = budget
    return budget


def bind_address(host: str, port: int) -> str:
    """``host:port`` as grpc parses it: an IPv6 literal goes in brackets (``[::1]:50051``)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def _bind(server: Any, settings: Settings, port: int) -> int:
    """Listen on ``port`` (0 = any free port) and return the bound port."""
    try:
        bound = int(server.add_insecure_port(bind_address(settings.host, port)))
    except RuntimeError as exc:
        raise OSError(f"address already in use or unavailable ({exc})") from None
    if bound == 0:
        raise OSError("address already in use or unavailable")
    return bound


async def build_aio(
    settings: Settings,
    metrics: ServerMetrics | None,
    port: int,
    relay: Relay[pb.OrderRequest, pb.OrderReply] | None = None,
    tracing: Tracing | None = None,
) -> tuple[grpc.aio.Server, health_aio.HealthServicer, int]:
    server = grpc.aio.server(options=server_options(settings))
    health_servicer = health_aio.HealthServicer()
    receipts = _receipts(settings, aio=True)
    measured = AioMeasuredMethods(metrics, receipts) if metrics is not None else None
    admission = Admission(settings.limits, _budget(settings, metrics), aio=True)
    servicer = (
        AsyncWireLab(settings.limits) if relay is None else RelayingWireLab(settings.limits, relay)
    )
    _register(
        server,
        servicer,
        health_servicer,
        measured,
        admission,
        receipts,
        settings.grpc_max_concurrent_calls,
        tracing,
    )
    bound = _bind(server, settings, port)
    for name in ("", SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, health_servicer, bound


def build_sync(
    settings: Settings, metrics: ServerMetrics | None, port: int, tracing: Tracing | None = None
) -> tuple[grpc.Server, health.HealthServicer, int]:
    server = grpc.server(
        ThreadPoolExecutor(max_workers=settings.grpc_threads, thread_name_prefix="grpc"),
        options=server_options(settings),
    )
    health_servicer = health.HealthServicer()
    receipts = _receipts(settings, aio=False)
    measured = SyncMeasuredMethods(metrics, receipts) if metrics is not None else None
    admission = Admission(settings.limits, _budget(settings, metrics), aio=False)
    _register(
        server,
        SyncWireLab(settings.limits),
        health_servicer,
        measured,
        admission,
        receipts,
        settings.grpc_max_concurrent_calls,
        tracing,
    )
    bound = _bind(server, settings, port)
    for name in ("", SERVICE):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, health_servicer, bound


def _cannot_listen(settings: Settings, exc: OSError) -> NoReturn:
    serving.fail_to_listen(PROG, "gRPC", settings.host, settings.grpc_port, exc)


async def serve_aio(settings: Settings) -> None:
    metrics = serving.instruments(settings, "grpc", "aio")
    tracing = start_tracing(settings, "grpc", grpc_kind(METHOD_KINDS))
    relay = _relay(settings, metrics, tracing)
    try:
        server, health_servicer, _ = await build_aio(
            settings, metrics, settings.grpc_port, relay, tracing
        )
    except OSError as exc:
        _cannot_listen(settings, exc)
    # The metrics port is bound only once the API port is ours: a taken API port fails first.
    serving.serve_metrics(settings, PROG, metrics)
    await server.start()
    serving.settle()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    where = bind_address(settings.host, settings.grpc_port)
    print(f"{PROG}: aio server listening on {where}", flush=True)
    follow = None if relay is None else asyncio.create_task(_follow(relay, health_servicer))
    await stop.wait()
    if follow is not None:
        follow.cancel()
    # NOT_SERVING first so health-checking clients stop sending, then drain in-flight calls.
    await health_servicer.enter_graceful_shutdown()
    await server.stop(settings.grace_seconds)
    if relay is not None:
        await relay.close()
    if tracing is not None:
        tracing.shutdown()


async def _follow(
    relay: Relay[pb.OrderRequest, pb.OrderReply], health_servicer: health_aio.HealthServicer
) -> None:
    """Health follows the relay: NOT_SERVING while it cannot send orders on (its broker not
    connected yet, or reconnecting), so a compose healthcheck says so; checked every second."""
    serving = True
    while True:
        ready = relay.problem() is None
        if ready != serving:
            serving = ready
            status = health_pb2.HealthCheckResponse.SERVING
            if not ready:
                status = health_pb2.HealthCheckResponse.NOT_SERVING
            for name in ("", SERVICE):
                await health_servicer.set(name, status)
        await asyncio.sleep(1)


def _relay(
    settings: Settings, metrics: ServerMetrics | None, tracing: Tracing | None = None
) -> Relay[pb.OrderRequest, pb.OrderReply] | None:
    try:
        registry = None if metrics is None else metrics.registry
        return build_relay(settings, "grpc", registry, tracing)
    except ValueError as exc:
        serving.bad_configuration(PROG, exc)


def serve_sync(settings: Settings) -> None:
    _relay(settings, None)  # refuses downstreams: a sync server cannot await them
    metrics = serving.instruments(settings, "grpc", "sync")
    tracing = start_tracing(settings, "grpc", grpc_kind(METHOD_KINDS))
    try:
        server, health_servicer, _ = build_sync(settings, metrics, settings.grpc_port, tracing)
    except OSError as exc:
        _cannot_listen(settings, exc)
    serving.serve_metrics(settings, PROG, metrics)
    server.start()
    serving.settle()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    where = bind_address(settings.host, settings.grpc_port)
    print(f"{PROG}: sync server listening on {where}", flush=True)
    stop.wait()
    health_servicer.enter_graceful_shutdown()
    server.stop(settings.grace_seconds).wait()
    if tracing is not None:
        tracing.shutdown()

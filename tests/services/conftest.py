"""Fixtures for in-process service tests: a fresh registry, a REST client and a gRPC server."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from wirelab.core import Limits
from wirelab.metrics import ServerMetrics
from wirelab.rest.app import create_app
from wirelab.rpc.server import build_aio, build_sync
from wirelab.settings import Settings
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

# Small limits so over-limit inputs are cheap to send.
SMALL = Limits(
    max_payload_bytes=64 * 1024,
    chunk_bytes=4096,
    max_stream_count=50,
    max_message_bytes=8192,
    max_interval_ms=1000,
    max_work_ms=500,
    max_order_bytes=16 * 1024,
)


def settings(**overrides: Any) -> Settings:
    return Settings(**{"host": "127.0.0.1", "limits": SMALL, **overrides})


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample's value, 0 when absent, so "moved by one" reads as a plain subtraction."""
    return registry.get_sample_value(name, labels) or 0.0


def requests(
    registry: CollectorRegistry, protocol: str, kind: str, outcome: str, code: str
) -> float:
    return value(
        registry,
        "wirelab_server_requests_total",
        protocol=protocol,
        kind=kind,
        outcome=outcome,
        code=code,
    )


async def settled(read: Callable[[], float], expected: float) -> float:
    """``read()`` once it equals ``expected``, or its last value after 2 s. A gRPC abort sends the
    status before the handler's exception reaches the interceptor, so a client can see the error
    a moment before the server has recorded it."""
    for _ in range(100):
        got = read()
        if got == expected:
            return got
        await asyncio.sleep(0.02)
    return read()


async def idle(registry: CollectorRegistry, kind: str, protocol: str = "grpc") -> None:
    """Wait (at most 2 s) until no call of ``kind`` is in flight. A gRPC call is recorded by
    its done callback, after the reply and status are sent, so the client can hold the answer
    a moment before the server has recorded the call."""
    in_flight = "wirelab_server_requests_in_flight"
    await settled(lambda: value(registry, in_flight, protocol=protocol, kind=kind), 0)


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture(params=["async", "sync"])
def rest(request: pytest.FixtureRequest, registry: CollectorRegistry) -> Iterator[TestClient]:
    """The REST app in both handler modes, instrumented into the test's registry."""
    mode = request.param
    app = create_app(settings(rest_handlers=mode), ServerMetrics("rest", registry, mode))
    with TestClient(app) as client:
        yield client


@dataclass
class GrpcTarget:
    # Any: the generated stubs type the blocking client; on an aio channel the same methods
    # return awaitable calls and async iterators.
    stub: Any
    channel: grpc.aio.Channel
    port: int


async def serve_grpc(
    mode: str, registry: CollectorRegistry | None, base: Settings | None = None
) -> AsyncIterator[GrpcTarget]:
    config = dataclasses.replace(base or settings(), grpc_server=mode, grpc_threads=8)
    metrics = ServerMetrics("grpc", registry, mode) if registry is not None else None
    server: Any
    if mode == "aio":
        server, _, port = await build_aio(config, metrics, 0)
        await server.start()
    else:
        server, _, port = build_sync(config, metrics, 0)
        server.start()
    limit = config.grpc_max_message_bytes
    options = [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        yield GrpcTarget(pb_grpc.WireLabStub(channel), channel, port)
    stopped = server.stop(0)
    if mode == "aio":
        await stopped
    else:
        stopped.wait()


@pytest.fixture(params=["aio", "sync"])
async def grpc_target(
    request: pytest.FixtureRequest, registry: CollectorRegistry
) -> AsyncIterator[GrpcTarget]:
    """The gRPC server (aio and thread-pool) on a free loopback port, with an aio client."""
    async for target in serve_grpc(request.param, registry):
        yield target

"""The gRPC duration spans the whole call, as REST's does: from arrival to the status sent."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry
from wirelab import core
from wirelab.core import Limits
from wirelab.metrics import ServerMetrics
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.services.conftest import idle, serve_grpc, settings, value
from tests.services.test_integration import start

LARGE = 32 * 1024 * 1024


@pytest.fixture(params=["aio", "sync"])
async def large(request: pytest.FixtureRequest, registry: CollectorRegistry) -> AsyncIterator[Any]:
    """A server (aio and thread-pool) whose limits let a 32 MiB blob through."""
    config = settings(limits=Limits(max_payload_bytes=2 * LARGE))
    async for target in serve_grpc(request.param, registry, config):
        yield target


async def test_upload_span_covers_the_transfer(large: Any, registry: CollectorRegistry) -> None:
    # One 32 MiB message: most of the call is moving and parsing it, which the server span
    # must include. Before the span started at arrival it held little more than the hashing
    # (0.2-0.4 of the client's time). The median of three calls: one call alone read 0.46
    # once on this shared 2-core machine under load (0.56-0.85 otherwise).
    blob = pb.Blob(data=core.payload(LARGE))
    await large.stub.Upload(pb.Blob(data=b"warm"))
    await idle(registry, "upload")
    ratios = []
    for _ in range(3):
        before = _duration_sum(registry, "upload")
        started = time.perf_counter()
        reply = await large.stub.Upload(blob)
        client = time.perf_counter() - started
        assert reply.size == LARGE
        await idle(registry, "upload")
        ratios.append((_duration_sum(registry, "upload") - before) / client)
    assert 0.5 <= statistics.median(ratios) <= 1.0, f"server/client {ratios}"


def _duration_sum(registry: CollectorRegistry, kind: str) -> float:
    return value(
        registry,
        "wirelab_server_request_duration_seconds_sum",
        protocol="grpc",
        kind=kind,
        outcome="ok",
    )


# Server duration / client time of a one-message 32 MiB download from a real process, the
# median of three calls: the band the REST test states (test_rest_span.py), so both sides'
# server durations of a transfer read alike. The gRPC span ends once grpc has sent the reply;
# measured 0.69-0.76 on this 2-core machine (aio and thread pool); the rest is the Python
# client taking in what the kernel already holds. In-process (server and client on one event
# loop) the aio ratio passed 1.0: the done callback waited behind the client.
DOWNLOAD_BAND = (0.45, 1.0)


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["aio", "sync"])
def test_download_span_covers_the_transfer(mode: str, tmp_path: Path) -> None:
    env = {"WIRELAB_GRPC_SERVER": mode, "WIRELAB_MAX_PAYLOAD_BYTES": str(2 * LARGE)}
    service = start("wirelab.rpc", tmp_path, env)
    labels = 'kind="download",outcome="ok",protocol="grpc"'
    line = f"wirelab_server_request_duration_seconds_sum{{{labels}}}"
    count = line.replace("_sum{", "_count{")
    options = [("grpc.max_receive_message_length", 2 * LARGE)]
    ratios = []
    try:
        with grpc.insecure_channel(f"127.0.0.1:{service.port}", options=options) as channel:
            stub = pb_grpc.WireLabStub(channel)
            stub.Download(pb.BlobRequest(size=1024))  # connection and first-call costs
            for calls in range(2, 5):
                assert service.wait_for(count, calls - 1) == calls - 1
                before = service.metric(line)
                started = time.perf_counter()
                blob = stub.Download(pb.BlobRequest(size=LARGE))
                took = time.perf_counter() - started
                assert len(blob.data) == LARGE
                assert service.wait_for(count, calls) == calls
                ratios.append((service.metric(line) - before) / took)
    finally:
        assert service.stop() == 0
    ratio = statistics.median(ratios)
    assert DOWNLOAD_BAND[0] <= ratio <= DOWNLOAD_BAND[1], f"server/client {ratios}"


async def test_small_calls_include_grpc_work(grpc_target: Any, registry: CollectorRegistry) -> None:
    await grpc_target.stub.ProcessOrder(pb.OrderRequest(order=pb.Order(order_id="a")))
    messages = [m async for m in grpc_target.stub.StreamMessages(pb.StreamRequest(count=3))]
    assert len(messages) == 3
    await idle(registry, "unary")
    await idle(registry, "server_stream")

    def read(name: str, kind: str, **extra: str) -> float:
        return value(registry, name, protocol="grpc", kind=kind, **extra)

    duration = "wirelab_server_request_duration_seconds_sum"
    assert read(duration, "unary", outcome="ok") > 0
    first = read("wirelab_server_time_to_first_message_seconds_sum", "server_stream")
    assert 0 < first <= read(duration, "server_stream", outcome="ok")


# What the aio measurement relies on: grpc.aio runs a call's handler lookup and its behaviour
# in one asyncio task, so a ContextVar set by the lookup is the one the behaviour reads, even
# with many calls in flight at once.
_SEEN: ContextVar[str] = ContextVar("seen")


class _EchoLookup(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def service(self, details: grpc.HandlerCallDetails) -> Any:
        _SEEN.set(str(dict(details.invocation_metadata)["x-id"]))
        return grpc.unary_unary_rpc_method_handler(self.echo)

    async def echo(self, request: bytes, context: Any) -> bytes:
        await asyncio.sleep(0.01)  # let the other calls' lookups run in between
        return _SEEN.get().encode()


async def test_aio_lookup_and_behaviour_share_a_task() -> None:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_EchoLookup(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            echo = channel.unary_unary("/t.T/Echo", None, None)
            ids = [str(i) for i in range(20)]
            replies = await asyncio.gather(*(echo(b"", metadata=(("x-id", i),)) for i in ids))
        assert [r.decode() for r in replies] == ids
    finally:
        await server.stop(0)


def test_metrics_start_takes_the_arrival_time(registry: CollectorRegistry) -> None:
    metrics = ServerMetrics("grpc", registry, "aio")
    call = metrics.start("unary", time.perf_counter() - 1.0)
    call.finish("ok", "OK")
    total = value(
        registry,
        "wirelab_server_request_duration_seconds_sum",
        protocol="grpc",
        kind="unary",
        outcome="ok",
    )
    assert total >= 1.0

"""Faults on the gRPC service, both server modes: undecodable requests, abandoned and
oversize uploads, deadlines; each answered with the right status and counted once."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry
from wirelab.contract import DEADLINE_SLACK_S
from wirelab.rpc.kinds import abandoned
from wirelab.rpc.server import bind_address, build_aio, build_sync
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.services.conftest import (
    SMALL,
    GrpcTarget,
    idle,
    requests,
    settings,
    settled,
    value,
)
from tests.services.test_integration import start

# Bytes no message parses: a field tag with a wire type protobuf does not have.
GARBAGE = b"\xff\xff\xff\xff"
UNARY_REQUEST = [
    ("ProcessOrder", "unary", "wirelab.v1.OrderRequest"),
    ("StreamMessages", "server_stream", "wirelab.v1.StreamRequest"),
    ("Upload", "upload", "wirelab.v1.Blob"),
    ("Download", "download", "wirelab.v1.BlobRequest"),
    ("DownloadStream", "download_chunked", "wirelab.v1.BlobRequest"),
]


def _raw(target: GrpcTarget, method: str, streaming: bool) -> Any:
    """A call to ``method`` that sends its request bytes as given (no serializer)."""
    path = f"/wirelab.v1.WireLab/{method}"
    make = target.channel.unary_stream if streaming else target.channel.unary_unary
    return make(path, None, None)


@pytest.mark.parametrize(("method", "kind", "message"), UNARY_REQUEST)
async def test_undecodable_request_is_invalid_argument(
    grpc_target: GrpcTarget, registry: CollectorRegistry, method: str, kind: str, message: str
) -> None:
    call = _raw(grpc_target, method, kind in ("server_stream", "download_chunked"))(GARBAGE)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        if kind in ("server_stream", "download_chunked"):
            async for _ in call:
                pass
        else:
            await call
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"not a valid {message}" in (raised.value.details() or "")
    counted = await settled(
        lambda: requests(registry, "grpc", kind, "client_error", "INVALID_ARGUMENT"), 1
    )
    assert counted == 1
    assert value(registry, "wirelab_server_request_bytes_sum", protocol="grpc", kind=kind) == len(
        GARBAGE
    )


@pytest.mark.parametrize(
    ("method", "kind", "message"),
    [
        ("UploadStream", "upload_chunked", "wirelab.v1.Chunk"),
        ("PingPong", "bidi", "wirelab.v1.Ping"),
    ],
)
async def test_undecodable_stream_message_is_invalid_argument(
    grpc_target: GrpcTarget, registry: CollectorRegistry, method: str, kind: str, message: str
) -> None:
    # A good message, then bytes that are none: was UNKNOWN, counted server_error.
    good = pb.Chunk(data=b"ok") if kind == "upload_chunked" else pb.Ping(seq=1)
    path = f"/wirelab.v1.WireLab/{method}"
    channel = grpc_target.channel
    make: Any = channel.stream_unary if kind == "upload_chunked" else channel.stream_stream
    call = make(path, None, None)(_raw_stream([good.SerializeToString(), GARBAGE]))
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        if kind == "bidi":
            async for _ in call:
                pass
        else:
            await call
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"not a valid {message}" in (raised.value.details() or "")
    counted = await settled(
        lambda: requests(registry, "grpc", kind, "client_error", "INVALID_ARGUMENT"), 1
    )
    assert counted == 1


async def _raw_stream(messages: list[bytes]) -> AsyncIterator[bytes]:
    for raw in messages:
        yield raw


async def _slow_chunks(first: int, then: asyncio.Event) -> AsyncIterator[pb.Chunk]:
    for _ in range(first):
        yield pb.Chunk(data=b"x" * 1000)
    then.set()
    await asyncio.sleep(30)  # the test cancels the call long before this ends
    yield pb.Chunk(data=b"never")


async def test_upload_stream_cancelled_halfway_counts_cancelled(
    grpc_target: GrpcTarget, registry: CollectorRegistry
) -> None:
    sent = asyncio.Event()
    call = grpc_target.stub.UploadStream(_slow_chunks(3, sent))
    await sent.wait()
    in_flight = "wirelab_server_requests_in_flight"
    labels = {"protocol": "grpc", "kind": "upload_chunked"}
    assert await settled(lambda: value(registry, in_flight, **labels), 1) == 1
    call.cancel()
    cancelled = await settled(
        lambda: requests(registry, "grpc", "upload_chunked", "cancelled", "CANCELLED"), 1
    )
    assert cancelled == 1
    await idle(registry, "upload_chunked")
    assert requests(registry, "grpc", "upload_chunked", "ok", "OK") == 0


async def test_pingpong_cancelled_midway_counts_cancelled(
    grpc_target: GrpcTarget, registry: CollectorRegistry
) -> None:
    # Before, aio counted it ok: the request stream ends alike when closed and when the call
    # is cancelled, so the behaviour ended well, and grpc then skipped the status it could not
    # send (the conformance suite, tests/conformance, found it).
    stop = asyncio.Event()

    async def pings() -> AsyncIterator[pb.Ping]:
        yield pb.Ping(seq=1)
        yield pb.Ping(seq=2)
        await stop.wait()

    call = grpc_target.stub.PingPong(pings())
    assert [(await call.read()).seq for _ in range(2)] == [1, 2]
    in_flight = "wirelab_server_requests_in_flight"
    labels = {"protocol": "grpc", "kind": "bidi"}
    assert await settled(lambda: value(registry, in_flight, **labels), 1) == 1
    call.cancel()
    stop.set()
    cancelled = await settled(
        lambda: requests(registry, "grpc", "bidi", "cancelled", "CANCELLED"), 1
    )
    assert cancelled == 1
    await idle(registry, "bidi")
    assert requests(registry, "grpc", "bidi", "ok", "OK") == 0


async def test_upload_stream_chunk_over_the_message_limit(
    grpc_target: GrpcTarget, registry: CollectorRegistry
) -> None:
    # grpc itself refuses a message over grpc.max_receive_message_length (the payload limit +
    # 1 MiB) and sends RESOURCE_EXHAUSTED; the handler sees only its request stream fail, as
    # when the client cancels, so the server counts it cancelled (not ok, as it did before).
    too_big = pb.Chunk(data=b"x" * (SMALL.max_payload_bytes + 2 * 1024 * 1024))

    async def chunks() -> AsyncIterator[pb.Chunk]:
        yield pb.Chunk(data=b"x" * 100)
        yield too_big

    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await grpc_target.stub.UploadStream(chunks())
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    counted = await settled(
        lambda: requests(registry, "grpc", "upload_chunked", "cancelled", "CANCELLED"), 1
    )
    assert counted == 1
    await idle(registry, "upload_chunked")
    assert requests(registry, "grpc", "upload_chunked", "ok", "OK") == 0


class _Ended:
    """A context whose call has ended with ``remaining`` seconds left before its deadline."""

    def __init__(self, remaining: float | None) -> None:
        self.remaining = remaining

    def time_remaining(self) -> float | None:
        return self.remaining


@pytest.mark.parametrize(
    ("remaining", "outcome"),
    [
        (0.0, ("timeout", "DEADLINE_EXCEEDED")),
        # The client's deadline cancelled the call a little before the server's copy ran out.
        (0.0025, ("timeout", "DEADLINE_EXCEEDED")),
        (DEADLINE_SLACK_S, ("timeout", "DEADLINE_EXCEEDED")),
        (DEADLINE_SLACK_S + 0.001, ("cancelled", "CANCELLED")),
        (5.0, ("cancelled", "CANCELLED")),
        (None, ("cancelled", "CANCELLED")),  # no deadline
    ],
)
def test_abandoned_call_near_its_deadline_timed_out(
    remaining: float | None, outcome: tuple[str, str]
) -> None:
    assert abandoned(_Ended(remaining)) == outcome


async def test_deadline_exceeded_counts_timeout(
    grpc_target: GrpcTarget, registry: CollectorRegistry
) -> None:
    slow = pb.OrderRequest(order=pb.Order(order_id="d"), work_ms=400)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await grpc_target.stub.ProcessOrder(slow, timeout=0.1)
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    timed_out = await settled(
        lambda: requests(registry, "grpc", "unary", "timeout", "DEADLINE_EXCEEDED"), 1
    )
    assert timed_out == 1
    await idle(registry, "unary")
    await asyncio.sleep(0.4)  # the thread-pool server's behaviour runs on: still counted once
    assert requests(registry, "grpc", "unary", "cancelled", "CANCELLED") == 0
    assert requests(registry, "grpc", "unary", "ok", "OK") == 0


async def test_deadline_exceeded_mid_stream_counts_timeout(
    grpc_target: GrpcTarget, registry: CollectorRegistry
) -> None:
    call = grpc_target.stub.StreamMessages(
        pb.StreamRequest(count=50, size=10, interval_ms=20), timeout=0.2
    )
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        async for _ in call:
            pass
    assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    timed_out = await settled(
        lambda: requests(registry, "grpc", "server_stream", "timeout", "DEADLINE_EXCEEDED"), 1
    )
    assert timed_out == 1
    await idle(registry, "server_stream")
    assert requests(registry, "grpc", "server_stream", "cancelled", "CANCELLED") == 0


@pytest.mark.parametrize("mode", ["aio", "sync"])
async def test_serves_on_an_ipv6_literal(mode: str) -> None:
    # "::1:0" is not an address grpc can parse; before the fix binding failed with "address
    # already in use or unavailable" while REST served on ::1.
    config = dataclasses.replace(settings(host="::1"), grpc_server=mode)
    server: Any
    if mode == "aio":
        server, _, port = await build_aio(config, None, 0)
        await server.start()
    else:
        server, _, port = build_sync(config, None, 0)
        server.start()
    try:
        async with grpc.aio.insecure_channel(f"[::1]:{port}") as channel:
            reply = await pb_grpc.WireLabStub(channel).Download(pb.BlobRequest(size=10))
        assert reply.size == 10
    finally:
        stopped = server.stop(0)
        if mode == "aio":
            await stopped
        else:
            stopped.wait()


def test_bind_address_brackets_ipv6_literals() -> None:
    assert bind_address("::1", 50051) == "[::1]:50051"
    assert bind_address("::", 0) == "[::]:0"
    assert bind_address("[::1]", 5) == "[::1]:5"
    assert bind_address("127.0.0.1", 5) == "127.0.0.1:5"
    assert bind_address("localhost", 5) == "localhost:5"


@pytest.mark.integration
def test_process_serves_on_ipv6_loopback(tmp_path: Path) -> None:
    # `WIRELAB_HOST=::1 python -m wirelab.rpc` said "address already in use or unavailable";
    # start() waits for the container healthcheck, which must reach [::1] too.
    service = start("wirelab.rpc", tmp_path, {"WIRELAB_HOST": "::1"})
    try:
        with grpc.insecure_channel(f"[::1]:{service.port}") as channel:
            reply = pb_grpc.WireLabStub(channel).Download(pb.BlobRequest(size=10), timeout=10)
        assert reply.size == 10
    finally:
        assert service.stop() == 0

"""Every RPC on the aio and the thread-pool server: answers, checksums, bad input, metrics."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import AsyncIterator, Iterable
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import CollectorRegistry
from wirelab import core
from wirelab.rpc.servicer import AsyncWireLab
from wirelab.rpc.sync_servicer import SyncWireLab
from wirelab.v1 import wirelab_pb2 as pb

from tests.services.conftest import (
    SMALL,
    GrpcTarget,
    idle,
    requests,
    serve_grpc,
    settled,
    value,
)

ORDER = pb.OrderRequest(
    order=pb.Order(
        order_id="o-1",
        customer_id="c-9",
        items=[
            pb.LineItem(sku="a", quantity=2, unit_price_cents=150),
            pb.LineItem(sku="b", quantity=1, unit_price_cents=2**40),
        ],
        attributes={"channel": "web"},
        note="deliver  before noon\n",
    ),
    work_ms=1,
    count_words=True,
)


async def errors(registry: CollectorRegistry, kind: str, code: str) -> float:
    return await settled(lambda: requests(registry, "grpc", kind, "client_error", code), 1)


def labels(kind: str) -> dict[str, str]:
    return {"protocol": "grpc", "kind": kind}


async def _aiter(items: Iterable[object]) -> AsyncIterator[object]:
    for item in items:
        yield item


async def _status(call: Any) -> tuple[grpc.StatusCode, str]:
    """Await a unary call or drain a stream; return the error status it ended with."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        if isinstance(call, grpc.aio.UnaryStreamCall | grpc.aio.StreamStreamCall):
            async for _ in call:
                pass
        else:
            await call
    return raised.value.code(), raised.value.details() or ""


async def test_process_order(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    reply = await grpc_target.stub.ProcessOrder(ORDER)
    assert (reply.order_id, reply.item_count, reply.total_cents) == ("o-1", 2, 300 + 2**40)
    assert (reply.word_count, reply.char_count) == (3, 21)
    assert reply.order == ORDER.order
    await idle(registry, "unary")
    assert requests(registry, "grpc", "unary", "ok", "OK") == 1
    assert (
        value(registry, "wirelab_server_request_bytes_sum", **labels("unary")) == ORDER.ByteSize()
    )
    assert (
        value(registry, "wirelab_server_response_bytes_sum", **labels("unary")) == reply.ByteSize()
    )
    assert value(registry, "wirelab_server_messages_received_total", **labels("unary")) == 1
    assert value(registry, "wirelab_server_messages_sent_total", **labels("unary")) == 1
    assert value(registry, "wirelab_server_requests_in_flight", **labels("unary")) == 0


async def test_stream_messages(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    call = grpc_target.stub.StreamMessages(pb.StreamRequest(count=4, size=100, interval_ms=1))
    messages = [m async for m in call]
    assert [m.seq for m in messages] == [0, 1, 2, 3]
    assert all(m.payload == core.payload(100) for m in messages)
    await idle(registry, "server_stream")
    assert value(registry, "wirelab_server_messages_sent_total", **labels("server_stream")) == 4
    assert value(registry, "wirelab_server_response_bytes_sum", **labels("server_stream")) == sum(
        m.ByteSize() for m in messages
    )
    first = "wirelab_server_time_to_first_message_seconds_count"
    assert value(registry, first, **labels("server_stream")) == 1
    assert requests(registry, "grpc", "server_stream", "ok", "OK") == 1


async def test_upload(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    blob = pb.Blob(data=core.payload(50_000))
    reply = await grpc_target.stub.Upload(blob)
    assert (reply.size, reply.sha256) == (50_000, core.digest(50_000))
    await idle(registry, "upload")
    assert (
        value(registry, "wirelab_server_request_bytes_sum", **labels("upload")) == blob.ByteSize()
    )


async def test_upload_stream(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    chunks = [pb.Chunk(data=piece) for piece in core.chunks(10_000, 3000)]
    reply = await grpc_target.stub.UploadStream(_aiter(chunks))
    assert (reply.size, reply.sha256) == (10_000, core.digest(10_000))
    await idle(registry, "upload_chunked")
    assert (
        value(registry, "wirelab_server_messages_received_total", **labels("upload_chunked")) == 4
    )
    assert value(registry, "wirelab_server_request_bytes_sum", **labels("upload_chunked")) == sum(
        c.ByteSize() for c in chunks
    )


async def test_oversize_uploads(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    big = b"x" * (SMALL.max_payload_bytes + 1)
    status, _ = await _status(grpc_target.stub.Upload(pb.Blob(data=big)))
    assert status == grpc.StatusCode.RESOURCE_EXHAUSTED
    pieces = [pb.Chunk(data=b"x" * 4096)] * (SMALL.max_payload_bytes // 4096 + 2)
    status, _ = await _status(grpc_target.stub.UploadStream(_aiter(pieces)))
    assert status == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert await errors(registry, "upload_chunked", status.name) == 1


async def test_download(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    blob = await grpc_target.stub.Download(pb.BlobRequest(size=40_000))
    assert (blob.size, blob.sha256) == (40_000, hashlib.sha256(blob.data).hexdigest())
    await idle(registry, "download")
    assert (
        value(registry, "wirelab_server_response_bytes_sum", **labels("download"))
        == blob.ByteSize()
    )


async def test_download_stream(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    call = grpc_target.stub.DownloadStream(pb.BlobRequest(size=10_000, chunk_size=3000))
    data = b"".join([c.data async for c in call])
    metadata = dict(await call.initial_metadata())
    assert metadata["x-wirelab-size"] == "10000"
    assert metadata["x-wirelab-sha256"] == hashlib.sha256(data).hexdigest() == core.digest(10_000)
    await idle(registry, "download_chunked")
    assert value(registry, "wirelab_server_messages_sent_total", **labels("download_chunked")) == 4


EXHAUSTED, INVALID = grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT
BLOB, MESSAGE = SMALL.max_payload_bytes + 1, SMALL.max_message_bytes + 1  # one over the limits
HUGE_ITEM = pb.LineItem(quantity=2**32 - 1, unit_price_cents=2**62)  # total overflows int64
BAD_REQUESTS = [
    ("ProcessOrder", "unary", pb.OrderRequest(work_ms=10**6), EXHAUSTED),
    ("ProcessOrder", "unary", pb.OrderRequest(order=pb.Order(items=[HUGE_ITEM])), INVALID),
    ("StreamMessages", "server_stream", pb.StreamRequest(count=10**5), EXHAUSTED),
    ("StreamMessages", "server_stream", pb.StreamRequest(count=1, size=MESSAGE), EXHAUSTED),
    ("StreamMessages", "server_stream", pb.StreamRequest(interval_ms=2**31), EXHAUSTED),
    ("Download", "download", pb.BlobRequest(size=BLOB), EXHAUSTED),
    ("DownloadStream", "download_chunked", pb.BlobRequest(size=BLOB), EXHAUSTED),
    ("DownloadStream", "download_chunked", pb.BlobRequest(chunk_size=MESSAGE), EXHAUSTED),
]


@pytest.mark.parametrize(("method", "kind", "request_", "code"), BAD_REQUESTS)
async def test_bad_requests(
    grpc_target: GrpcTarget,
    registry: CollectorRegistry,
    method: str,
    kind: str,
    request_: Any,
    code: grpc.StatusCode,
) -> None:
    status, details = await _status(getattr(grpc_target.stub, method)(request_))
    assert status == code and details
    assert await errors(registry, kind, code.name) == 1


async def test_pingpong(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    pings = [pb.Ping(seq=seq, payload=core.payload(10 * seq)) for seq in range(3)]
    pongs = [p async for p in grpc_target.stub.PingPong(_aiter(pings))]
    assert [(p.seq, p.payload) for p in pongs] == [(p.seq, p.payload) for p in pings]
    await idle(registry, "bidi")
    assert value(registry, "wirelab_server_messages_received_total", **labels("bidi")) == 3
    assert value(registry, "wirelab_server_messages_sent_total", **labels("bidi")) == 3
    assert requests(registry, "grpc", "bidi", "ok", "OK") == 1


async def test_oversize_ping(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    pings = [pb.Ping(seq=1), pb.Ping(seq=2, payload=b"x" * (SMALL.max_message_bytes + 1))]
    status, details = await _status(grpc_target.stub.PingPong(_aiter(pings)))
    assert status == grpc.StatusCode.RESOURCE_EXHAUSTED and details
    assert await errors(registry, "bidi", "RESOURCE_EXHAUSTED") == 1


async def test_unknown_method(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    unknown: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = grpc_target.channel.unary_unary(
        "/wirelab.v1.WireLab/Nope", None, None
    )
    call = unknown(b"")
    assert (await _status(call))[0] == grpc.StatusCode.UNIMPLEMENTED
    assert await errors(registry, "other", "UNIMPLEMENTED") == 1


async def test_client_cancel_mid_stream_counts_cancelled(
    grpc_target: GrpcTarget, registry: CollectorRegistry
) -> None:
    call = grpc_target.stub.StreamMessages(pb.StreamRequest(count=50, size=10, interval_ms=20))
    await call.read()
    call.cancel()
    cancelled = await settled(
        lambda: requests(registry, "grpc", "server_stream", "cancelled", "CANCELLED"), 1
    )
    assert cancelled == 1
    assert value(registry, "wirelab_server_requests_in_flight", **labels("server_stream")) == 0


async def test_client_cancel_mid_call_counts_cancelled_once(
    grpc_target: GrpcTarget, registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The order's work waits for this gate, which opens only after the cancel has been counted:
    # with a 300 ms work_ms instead, a busy machine could finish the call before the cancel
    # reached the server (once in CI: counted ok, "assert 0.0 == 1"). The behaviour says when
    # it has started, so no fixed wait decides whether the call is in flight either.
    gate, entered = threading.Event(), threading.Event()
    real_async, real_sync = core.process_order_async, core.process_order

    async def gated_async(*args: Any) -> Any:
        entered.set()
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return await real_async(*args)

    def gated_sync(*args: Any) -> Any:
        entered.set()
        gate.wait(10)
        return real_sync(*args)

    monkeypatch.setattr(core, "process_order_async", gated_async)
    monkeypatch.setattr(core, "process_order", gated_sync)
    call = grpc_target.stub.ProcessOrder(pb.OrderRequest(order=pb.Order(order_id="x")))
    try:
        for _ in range(1000):  # up to 10 s; the aio server runs on this loop: give it turns
            if entered.is_set():
                break
            await asyncio.sleep(0.01)
        assert entered.is_set()
        in_flight = "wirelab_server_requests_in_flight"
        assert value(registry, in_flight, **labels("unary")) == 1
        call.cancel()
        cancelled = await settled(
            lambda: requests(registry, "grpc", "unary", "cancelled", "CANCELLED"), 1
        )
        assert cancelled == 1
        await idle(registry, "unary")
    finally:
        # The behaviour finishing later (the thread-pool server's runs on) records nothing.
        gate.set()
    await asyncio.sleep(0.1)
    assert requests(registry, "grpc", "unary", "ok", "OK") == 0
    sent = value(registry, "wirelab_server_messages_sent_total", **labels("unary"))
    assert sent == 0
    assert value(registry, "wirelab_server_messages_received_total", **labels("unary")) == 1


@pytest.mark.parametrize("mode", ["aio", "sync"])
async def test_a_failing_behaviour_counts_a_server_error(
    mode: str, registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken_async(*_: Any) -> Any:
        raise RuntimeError("bug")

    def broken_sync(*_: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(AsyncWireLab, "ProcessOrder", broken_async)
    monkeypatch.setattr(SyncWireLab, "ProcessOrder", broken_sync)
    async for target in serve_grpc(mode, registry):
        status, _ = await _status(target.stub.ProcessOrder(ORDER))
        assert status == grpc.StatusCode.UNKNOWN
        failed = await settled(
            lambda: requests(registry, "grpc", "unary", "server_error", "UNKNOWN"), 1
        )
        assert failed == 1
        await idle(registry, "unary")


async def test_health_and_reflection(grpc_target: GrpcTarget, registry: CollectorRegistry) -> None:
    health = health_pb2_grpc.HealthStub(grpc_target.channel)
    for service in ("", "wirelab.v1.WireLab"):
        reply = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(grpc_target.channel)
    call = stub.ServerReflectionInfo(
        _aiter([reflection_pb2.ServerReflectionRequest(list_services="")])
    )
    names = {s.name async for r in call for s in r.list_services_response.service}
    assert "wirelab.v1.WireLab" in names
    assert requests(registry, "grpc", "other", "ok", "OK") == 0


async def _reflect(grpc_target: GrpcTarget, **query: str) -> Any:
    stub = reflection_pb2_grpc.ServerReflectionStub(grpc_target.channel)
    call = stub.ServerReflectionInfo(_aiter([reflection_pb2.ServerReflectionRequest(**query)]))
    (reply,) = [reply async for reply in call]
    return reply


async def test_reflection_resolves_method_symbols(grpc_target: GrpcTarget) -> None:
    listed = await _reflect(grpc_target, list_services="")
    assert {s.name for s in listed.list_services_response.service} == {
        "wirelab.v1.WireLab",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    }
    for symbol in ("wirelab.v1.WireLab.ProcessOrder", "wirelab.v1.WireLab", "wirelab.v1.Blob"):
        found = await _reflect(grpc_target, file_containing_symbol=symbol)
        files = found.file_descriptor_response.file_descriptor_proto
        names = [descriptor_pb2.FileDescriptorProto.FromString(f).name for f in files]
        assert "wirelab/v1/wirelab.proto" in names, symbol
    for missing in ("wirelab.v1.WireLab.NoSuchMethod", "wirelab.v1.NoService.Method"):
        answer = await _reflect(grpc_target, file_containing_symbol=missing)
        assert answer.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0], missing

"""Admission on the gRPC service, both server modes: the payload budget and the order limit."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry
from wirelab import core
from wirelab.rpc import replies
from wirelab.rpc.intake import UPLOAD_HOLDS
from wirelab.rpc.servicer import AsyncWireLab
from wirelab.rpc.sync_servicer import SyncWireLab
from wirelab.v1 import wirelab_pb2 as pb

from tests.services.conftest import (
    SMALL,
    GrpcTarget,
    idle,
    requests,
    serve_grpc,
    settings,
    settled,
    value,
)

BUDGET = 10_000
LIMITS = dataclasses.replace(SMALL, payload_budget_bytes=BUDGET, max_order_bytes=1000)
IN_FLIGHT_BYTES = "wirelab_server_payload_in_flight_bytes"


@pytest.fixture(params=["aio", "sync"])
async def budgeted(
    request: pytest.FixtureRequest, registry: CollectorRegistry
) -> AsyncIterator[GrpcTarget]:
    async for target in serve_grpc(request.param, registry, settings(limits=LIMITS)):
        yield target


async def _refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value


async def exhausted(registry: CollectorRegistry, kind: str, expected: float) -> float:
    return await settled(
        lambda: requests(registry, "grpc", kind, "client_error", "RESOURCE_EXHAUSTED"), expected
    )


async def test_budget_is_reported(budgeted: GrpcTarget, registry: CollectorRegistry) -> None:
    assert value(registry, "wirelab_server_payload_budget_bytes", protocol="grpc") == BUDGET
    assert value(registry, IN_FLIGHT_BYTES, protocol="grpc") == 0


async def test_upload_past_the_budget_is_refused_for_load(
    budgeted: GrpcTarget, registry: CollectorRegistry
) -> None:
    error = await _refused(budgeted.stub.Upload(pb.Blob(data=core.payload(BUDGET + 1))))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "payload budget exhausted" in (error.details() or "")
    trailing: Any = error.trailing_metadata()
    assert ("grpc-retry-pushback-ms", "1000") in tuple(trailing)
    # A refusal for load counts client_error, as REST's 503 does; its details and pushback
    # tell it from an input over a limit.
    assert await exhausted(registry, "upload", 1) == 1
    # Charged UPLOAD_HOLDS times its message, what a one-message upload peaks at.
    small = await budgeted.stub.Upload(pb.Blob(data=core.payload(BUDGET // 8)))
    assert small.size == BUDGET // 8
    await idle(registry, "upload")
    assert value(registry, IN_FLIGHT_BYTES, protocol="grpc") == 0


async def test_download_past_the_budget_is_refused_for_load(
    budgeted: GrpcTarget, registry: CollectorRegistry
) -> None:
    error = await _refused(budgeted.stub.Download(pb.BlobRequest(size=BUDGET + 1)))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "payload budget exhausted" in (error.details() or "")
    assert await exhausted(registry, "download", 1) == 1
    # Over the payload limit is the core's refusal, not the budget's.
    error = await _refused(budgeted.stub.Download(pb.BlobRequest(size=SMALL.max_payload_bytes + 1)))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "over the limit" in (error.details() or "")
    assert await exhausted(registry, "download", 2) == 2


@pytest.mark.parametrize("mode", ["aio", "sync"])
async def test_calls_in_flight_hold_their_bytes_until_done(
    mode: str, registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()

    async def gated_async(self: Any, request: pb.Blob, context: Any) -> pb.BlobDigest:
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return replies.upload_digest(request, self.limits)

    def gated_sync(self: Any, request: pb.Blob, context: Any) -> pb.BlobDigest:
        gate.wait(5)
        return replies.upload_digest(request, self.limits)

    monkeypatch.setattr(AsyncWireLab, "Upload", gated_async)
    monkeypatch.setattr(SyncWireLab, "Upload", gated_sync)
    async for target in serve_grpc(mode, registry, settings(limits=LIMITS)):
        first = asyncio.ensure_future(target.stub.Upload(pb.Blob(data=core.payload(1500))))
        try:
            # Held from admission until the call is done: UPLOAD_HOLDS times the message, 1500
            # payload bytes and 3 bytes of field framing.
            charged = UPLOAD_HOLDS * 1503
            held = await settled(lambda: value(registry, IN_FLIGHT_BYTES, protocol="grpc"), charged)
            assert held == charged
            second = await _refused(target.stub.Upload(pb.Blob(data=core.payload(1500))))
            assert second.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        finally:
            gate.set()
        assert (await first).size == 1500
        await idle(registry, "upload")
        assert value(registry, IN_FLIGHT_BYTES, protocol="grpc") == 0
        assert (await target.stub.Upload(pb.Blob(data=core.payload(1500)))).size == 1500
        assert await exhausted(registry, "upload", 1) == 1


async def test_order_over_its_limit_is_refused_before_parsing(
    budgeted: GrpcTarget, registry: CollectorRegistry
) -> None:
    big = pb.OrderRequest(order=pb.Order(order_id="o", note="x" * 2000))
    error = await _refused(budgeted.stub.ProcessOrder(big))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.details() == "order is over the limit of 1000 bytes"
    counted = await settled(
        lambda: requests(registry, "grpc", "unary", "client_error", "RESOURCE_EXHAUSTED"), 1
    )
    assert counted == 1
    ok = await budgeted.stub.ProcessOrder(pb.OrderRequest(order=pb.Order(order_id="o")))
    assert ok.order_id == "o"


@pytest.mark.parametrize("mode", ["aio", "sync"])
async def test_unmeasured_server_decodes_and_admits_too(mode: str) -> None:
    async for target in serve_grpc(mode, None, settings(limits=LIMITS)):
        garbage: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = target.channel.unary_unary(
            "/wirelab.v1.WireLab/ProcessOrder", None, None
        )
        error = await _refused(garbage(b"\xff\xff\xff\xff"))
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        error = await _refused(target.stub.Upload(pb.Blob(data=core.payload(BUDGET + 1))))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (await target.stub.Upload(pb.Blob(data=b"ok"))).size == 2

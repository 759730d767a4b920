"""The gRPC concurrency cap, both server modes: past it a call is refused at once and counted."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry
from wirelab import settings as knobs
from wirelab.rpc import replies
from wirelab.rpc.servicer import AsyncWireLab
from wirelab.rpc.sync_servicer import SyncWireLab
from wirelab.v1 import wirelab_pb2 as pb

from tests.services.conftest import idle, requests, serve_grpc, settings, settled


@pytest.mark.parametrize("mode", ["aio", "sync"])
async def test_calls_past_the_cap_are_refused_and_counted(
    mode: str, registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    entered = threading.Event()

    async def gated_async(self: Any, request: pb.Blob, context: Any) -> pb.BlobDigest:
        entered.set()
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return replies.upload_digest(request, self.limits)

    def gated_sync(self: Any, request: pb.Blob, context: Any) -> pb.BlobDigest:
        entered.set()
        gate.wait(5)
        return replies.upload_digest(request, self.limits)

    monkeypatch.setattr(AsyncWireLab, "Upload", gated_async)
    monkeypatch.setattr(SyncWireLab, "Upload", gated_sync)
    async for target in serve_grpc(mode, registry, settings(grpc_max_concurrent_calls=1)):
        first = asyncio.ensure_future(target.stub.Upload(pb.Blob(data=b"held")))
        try:
            for _ in range(200):
                if entered.is_set():
                    break
                await asyncio.sleep(0.01)
            assert entered.is_set()
            # A unary call and a response stream alike, while the first call holds the one slot.
            for call in (
                target.stub.ProcessOrder(pb.OrderRequest(order=pb.Order(order_id="o"))),
                _drain(target.stub.StreamMessages(pb.StreamRequest(count=2, size=1))),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await call
                assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert refused.value.details() == "over 1 concurrent calls; retry later"
                trailing: Any = refused.value.trailing_metadata()
                assert ("grpc-retry-pushback-ms", "1000") in tuple(trailing)
        finally:
            gate.set()
        assert (await first).size == 4
        for kind in ("unary", "server_stream"):
            assert await _refusals(registry, kind) == 1, kind
        await idle(registry, "upload")
        # The slot is free again once the first call is done.
        reply = await target.stub.ProcessOrder(pb.OrderRequest(order=pb.Order(order_id="o")))
        assert reply.order_id == "o"


async def _refusals(registry: CollectorRegistry, kind: str) -> float:
    return await settled(
        lambda: requests(registry, "grpc", kind, "client_error", "RESOURCE_EXHAUSTED"), 1
    )


async def _drain(call: Any) -> list[Any]:
    return [message async for message in call]


def test_cap_is_off_by_default() -> None:
    assert knobs.load([], environ={}).grpc_max_concurrent_calls == 0
    env = {"WIRELAB_GRPC_MAX_CONCURRENT_CALLS": "3"}
    assert knobs.load([], environ=env).grpc_max_concurrent_calls == 3

"""Parity: the same inputs through REST and gRPC give equivalent results (and equivalent errors)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from fastapi.testclient import TestClient
from google.protobuf import json_format
from wirelab import core
from wirelab.rest.app import create_app
from wirelab.v1 import wirelab_pb2 as pb

from tests.services.conftest import SMALL, GrpcTarget, serve_grpc, settings

ORDER_JSON: dict[str, Any] = {
    "order": {
        "order_id": "p-1",
        "customer_id": "c",
        "items": [{"sku": "s", "quantity": 3, "unit_price_cents": -7}] * 3,
        "attributes": {"a": "1", "b": "2"},
        "note": "ünïcode words\tand tabs",
    },
    "work_ms": 0,
    "count_words": True,
}
# REST status for each gRPC status the core's errors map to.
HTTP_FOR = {grpc.StatusCode.INVALID_ARGUMENT: 400, grpc.StatusCode.RESOURCE_EXHAUSTED: 413}


@pytest.fixture
def rest() -> Iterator[TestClient]:
    with TestClient(create_app(settings())) as client:
        yield client


@pytest.fixture
async def grpc_target() -> AsyncIterator[GrpcTarget]:
    async for target in serve_grpc("aio", None):
        yield target


async def _aiter(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def test_orders(rest: TestClient, grpc_target: GrpcTarget) -> None:
    over_rest = json_format.ParseDict(
        rest.post("/v1/orders", json=ORDER_JSON).json(), pb.OrderReply()
    )
    over_grpc = await grpc_target.stub.ProcessOrder(
        json_format.ParseDict(ORDER_JSON, pb.OrderRequest())
    )
    assert over_rest == over_grpc
    assert over_grpc.word_count == 4 and over_grpc.total_cents == -63


async def test_streams(rest: TestClient, grpc_target: GrpcTarget) -> None:
    params = {"count": 5, "size": 333, "interval_ms": 0}
    lines = [json.loads(line) for line in rest.get("/v1/stream", params=params).text.splitlines()]
    over_rest = [(m["seq"], base64.b64decode(m["payload"])) for m in lines]
    call = grpc_target.stub.StreamMessages(pb.StreamRequest(**params))
    assert over_rest == [(m.seq, m.payload) async for m in call]


async def test_uploads(rest: TestClient, grpc_target: GrpcTarget) -> None:
    data = core.payload(20_000)[::-1]
    digests = {
        rest.post("/v1/blobs", content=data).text,
        rest.post("/v1/blobs/stream", content=data).text,
        rest.post("/v1/blobs/json", json={"data": base64.b64encode(data).decode()}).text,
    }
    assert len(digests) == 1
    one = json_format.Parse(digests.pop(), pb.BlobDigest())
    assert one == await grpc_target.stub.Upload(pb.Blob(data=data))
    chunks = [pb.Chunk(data=data[i : i + 7000]) for i in range(0, len(data), 7000)]
    assert one == await grpc_target.stub.UploadStream(_aiter(chunks))


async def test_downloads(rest: TestClient, grpc_target: GrpcTarget) -> None:
    size = 12_345
    binary = rest.get("/v1/blobs", params={"size": size})
    as_json = json_format.Parse(rest.get("/v1/blobs/json", params={"size": size}).text, pb.Blob())
    streamed = rest.get("/v1/blobs/stream", params={"size": size, "chunk_size": 1000})
    blob = await grpc_target.stub.Download(pb.BlobRequest(size=size))
    assert as_json == blob
    assert binary.content == streamed.content == blob.data
    call = grpc_target.stub.DownloadStream(pb.BlobRequest(size=size, chunk_size=1000))
    assert b"".join([c.data async for c in call]) == blob.data
    metadata = dict(await call.initial_metadata())
    for headers in (binary.headers, streamed.headers):
        assert headers["x-wirelab-size"] == metadata["x-wirelab-size"] == str(size)
        assert headers["x-wirelab-sha256"] == metadata["x-wirelab-sha256"] == blob.sha256


async def test_pingpong(rest: TestClient, grpc_target: GrpcTarget) -> None:
    pings = [pb.Ping(seq=seq, payload=core.payload(seq % 1000)) for seq in (0, 5, 2**40 + 9)]
    with rest.websocket_connect("/v1/pingpong") as ws:
        over_rest = []
        for ping in pings:
            ws.send_text(
                json.dumps({"seq": ping.seq, "payload": base64.b64encode(ping.payload).decode()})
            )
            pong = json.loads(ws.receive_text())
            over_rest.append(pb.Pong(seq=pong["seq"], payload=base64.b64decode(pong["payload"])))
    assert over_rest == [p async for p in grpc_target.stub.PingPong(_aiter(pings))]


@pytest.mark.parametrize(
    ("path", "params", "method", "request_"),
    [
        (
            "/v1/stream",
            {"count": SMALL.max_stream_count + 1},
            "StreamMessages",
            pb.StreamRequest(count=SMALL.max_stream_count + 1),
        ),
        (
            "/v1/blobs",
            {"size": SMALL.max_payload_bytes + 1},
            "Download",
            pb.BlobRequest(size=SMALL.max_payload_bytes + 1),
        ),
        (
            "/v1/blobs/stream",
            {"size": 1, "chunk_size": SMALL.max_message_bytes + 1},
            "DownloadStream",
            pb.BlobRequest(size=1, chunk_size=SMALL.max_message_bytes + 1),
        ),
    ],
)
async def test_errors(
    rest: TestClient,
    grpc_target: GrpcTarget,
    path: str,
    params: dict[str, int],
    method: str,
    request_: Any,
) -> None:
    reply = rest.get(path, params=params)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        call = getattr(grpc_target.stub, method)(request_)
        if isinstance(call, grpc.aio.UnaryStreamCall):
            await call.read()
        else:
            await call
    assert reply.status_code == HTTP_FOR[raised.value.code()]
    assert reply.json()["detail"] == raised.value.details()

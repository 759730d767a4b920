"""Protobuf over REST: POST /v1/orders as application/x-protobuf, gRPC's messages, JSON errors."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from google.protobuf import json_format
from prometheus_client import CollectorRegistry
from wirelab.rest.protobuf import PROTOBUF, accepts_protobuf
from wirelab.v1 import wirelab_pb2 as pb

from tests.services.conftest import SMALL, requests, value

ORDER: dict[str, Any] = {
    "order": {"order_id": "p-1", "items": [{"sku": "a", "quantity": 3, "unit_price_cents": 7}]},
    "count_words": True,
}
NOTED = {**ORDER, "order": {**ORDER["order"], "note": "two words"}}
HEADERS = {"content-type": PROTOBUF}


def encoded(order: dict[str, Any]) -> bytes:
    return json_format.ParseDict(order, pb.OrderRequest()).SerializeToString()


def test_a_protobuf_order_gets_the_reply_grpc_gives(
    rest: TestClient, registry: CollectorRegistry
) -> None:
    body = encoded(NOTED)
    reply = rest.post("/v1/orders", content=body, headers=HEADERS)
    assert reply.status_code == 200 and reply.headers["content-type"] == PROTOBUF
    got = pb.OrderReply.FromString(reply.content)
    assert (got.order_id, got.item_count, got.total_cents, got.word_count) == ("p-1", 1, 21, 2)
    # The JSON route answers the same order with the same numbers.
    as_json = rest.post("/v1/orders", json=NOTED)
    assert json_format.ParseDict(as_json.json(), pb.OrderReply()) == got
    assert requests(registry, "rest", "unary", "ok", "200") == 2
    received = value(registry, "wirelab_server_request_bytes_sum", protocol="rest", kind="unary")
    assert received > len(body)  # this order's bytes and the JSON one's


def test_malformed_protobuf_is_400_with_a_json_message(
    rest: TestClient, registry: CollectorRegistry
) -> None:
    reply = rest.post("/v1/orders", content=b"\xff\xff\xff", headers=HEADERS)
    assert reply.status_code == 400
    assert "not a protobuf wirelab.v1.OrderRequest" in reply.json()["detail"]
    assert requests(registry, "rest", "unary", "client_error", "400") == 1


def test_core_refusals_keep_their_statuses(rest: TestClient) -> None:
    too_long = encoded({**ORDER, "work_ms": SMALL.max_work_ms + 1})
    assert rest.post("/v1/orders", content=too_long, headers=HEADERS).status_code == 413


def test_an_order_over_the_limit_is_413_before_it_is_parsed(
    rest: TestClient, registry: CollectorRegistry
) -> None:
    big = encoded({"order": {"order_id": "x", "note": "n" * SMALL.max_order_bytes}})
    reply = rest.post("/v1/orders", content=big, headers=HEADERS)
    assert reply.status_code == 413 and "over the limit" in reply.json()["detail"]
    assert requests(registry, "rest", "unary", "client_error", "413") == 1


@pytest.mark.parametrize(
    ("accept", "status"),
    [(None, 200), (PROTOBUF, 200), ("*/*", 200), ("application/json, */*;q=0.1", 200),
     ("application/json", 406), (f"{PROTOBUF};q=0, application/json", 406)],
)  # fmt: skip
def test_accept_negotiates_the_reply(rest: TestClient, accept: str | None, status: int) -> None:
    headers = {**HEADERS, **({"accept": accept} if accept else {})}
    reply = rest.post("/v1/orders", content=encoded(ORDER), headers=headers)
    assert reply.status_code == status
    if status == 406:
        assert PROTOBUF in reply.json()["detail"]


def test_json_stays_the_default(rest: TestClient) -> None:
    reply = rest.post("/v1/orders", json=ORDER, headers={"accept": PROTOBUF})
    assert reply.status_code == 200 and reply.headers["content-type"] == "application/json"


def test_accept_parsing() -> None:
    assert accepts_protobuf(None) and accepts_protobuf("application/*")
    assert not accepts_protobuf("text/plain") and not accepts_protobuf(f"{PROTOBUF}; q=0")
    assert not accepts_protobuf(f"{PROTOBUF};q=0.00") and accepts_protobuf(f"{PROTOBUF};q=0.5")
    assert accepts_protobuf(f"{PROTOBUF};q=x")


def test_openapi_declares_both_encodings(rest: TestClient) -> None:
    operation = rest.get("/openapi.json").json()["paths"]["/v1/orders"]["post"]
    assert set(operation["requestBody"]["content"]) == {"application/json", PROTOBUF}
    assert set(operation["responses"]["200"]["content"]) == {"application/json", PROTOBUF}
    assert "406" in operation["responses"]

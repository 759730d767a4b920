"""Every REST route in both handler modes: answers, checksums, bad input and the metrics moved."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from starlette.websockets import WebSocketDisconnect
from wirelab import core

from tests.services.conftest import SMALL, requests, value

ORDER = {
    "order": {
        "order_id": "o-1",
        "customer_id": "c-9",
        "items": [
            {"sku": "a", "quantity": 2, "unit_price_cents": 150},
            {"sku": "b", "quantity": 1, "unit_price_cents": 2**40},
        ],
        "attributes": {"channel": "web"},
        "note": "deliver  before noon\n",
    },
    "work_ms": 1,
    "count_words": True,
}


def test_order_round_trip(rest: TestClient, registry: CollectorRegistry) -> None:
    reply = rest.post("/v1/orders", json=ORDER)
    assert reply.status_code == 200
    body = reply.json()
    assert body["order_id"] == "o-1"
    assert (body["item_count"], body["total_cents"]) == (2, 300 + 2**40)
    assert (body["word_count"], body["char_count"]) == (3, 21)
    assert body["order"] == ORDER["order"]
    assert requests(registry, "rest", "unary", "ok", "200") == 1
    labels = {"protocol": "rest", "kind": "unary"}
    assert value(registry, "wirelab_server_request_bytes_sum", **labels) == len(
        reply.request.content
    )
    assert value(registry, "wirelab_server_response_bytes_sum", **labels) == len(reply.content)
    assert value(registry, "wirelab_server_messages_received_total", **labels) == 1
    assert value(registry, "wirelab_server_messages_sent_total", **labels) == 1
    assert value(registry, "wirelab_server_requests_in_flight", **labels) == 0
    assert value(registry, "wirelab_server_request_duration_seconds_count", **labels) == 1


def test_order_body_bytes_with_and_without_length(
    rest: TestClient, registry: CollectorRegistry
) -> None:
    # With a Content-Length the middleware counts the order's body from the header (FastAPI
    # reads it whole); a chunked body, without one, is counted as it is received.
    body = json.dumps(ORDER).encode()
    headers = {"content-type": "application/json"}
    assert rest.post("/v1/orders", content=body, headers=headers).status_code == 200
    pieces = [body[:10], body[10:50], body[50:]]
    chunked = rest.post("/v1/orders", content=iter(pieces), headers=headers)
    assert chunked.status_code == 200
    assert "content-length" not in chunked.request.headers
    labels = {"protocol": "rest", "kind": "unary"}
    assert value(registry, "wirelab_server_request_bytes_sum", **labels) == 2 * len(body)
    assert value(registry, "wirelab_server_request_bytes_count", **labels) == 2
    assert value(registry, "wirelab_server_messages_received_total", **labels) == 2


def test_chunked_upload_bytes(rest: TestClient, registry: CollectorRegistry) -> None:
    data = core.payload(20_000)
    pieces = [data[:7000], data[7000:7001], data[7001:]]
    reply = rest.post("/v1/blobs/stream", content=iter(pieces))
    assert reply.json()["size"] == 20_000
    labels = {"protocol": "rest", "kind": "upload_chunked"}
    assert value(registry, "wirelab_server_request_bytes_sum", **labels) == 20_000
    assert value(registry, "wirelab_server_messages_received_total", **labels) >= 1


def test_empty_order_gets_proto_defaults(rest: TestClient) -> None:
    body = rest.post("/v1/orders", json={}).json()
    assert (body["item_count"], body["total_cents"], body["word_count"]) == (0, 0, 0)


@pytest.mark.parametrize(
    "order",
    [
        '{"note": "\\ud800"}',
        '{"order_id": "a\\udfff"}',
        '{"customer_id": "\\udc00b"}',
        '{"items": [{"sku": "\\ud83d"}]}',
        '{"attributes": {"\\ud800": "v"}}',
        '{"attributes": {"k": "\\ud800"}}',
    ],
)
def test_lone_surrogate_in_a_string_is_422(
    rest: TestClient, registry: CollectorRegistry, order: str
) -> None:
    # Valid JSON but not Unicode text: it made a 500 when the reply was encoded, and in an
    # attributes key it came back as replacement characters.
    body = f'{{"order": {order}}}'.encode()
    reply = rest.post("/v1/orders", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 422
    assert "lone surrogate" in reply.json()["detail"]
    assert requests(registry, "rest", "unary", "client_error", "422") == 1


def test_surrogate_pair_is_text(rest: TestClient) -> None:
    body = b'{"order": {"note": "\\ud83d\\ude00", "attributes": {"\\ud83d\\ude00": "x"}}}'
    reply = rest.post("/v1/orders", content=body, headers={"content-type": "application/json"})
    assert reply.json()["order"]["note"] == "\N{GRINNING FACE}"
    assert reply.json()["order"]["attributes"] == {"\N{GRINNING FACE}": "x"}


@pytest.mark.parametrize("chunked", [False, True])
def test_oversize_order_is_refused_with_413(
    rest: TestClient, registry: CollectorRegistry, chunked: bool
) -> None:
    # With a Content-Length it is refused before the body is read; without one, once the bytes
    # read pass the limit. Before the limit any order was parsed whole (300 MiB: 1.25 GB RSS).
    body = json.dumps({"order": {"note": "x" * SMALL.max_order_bytes}}).encode()
    content = iter([body[:1000], body[1000:]]) if chunked else body
    headers = {"content-type": "application/json"}
    reply = rest.post("/v1/orders", content=content, headers=headers)
    assert ("content-length" in reply.request.headers) is not chunked
    assert reply.status_code == 413
    assert reply.json() == {"detail": f"order is over the limit of {SMALL.max_order_bytes} bytes"}
    assert requests(registry, "rest", "unary", "client_error", "413") == 1


def test_order_at_the_limit_is_accepted(rest: TestClient) -> None:
    body = json.dumps({"order": {"note": ""}}).encode()
    body = body.replace(b'""', b'"' + b"x" * (SMALL.max_order_bytes - len(body)) + b'"')
    assert len(body) == SMALL.max_order_bytes
    headers = {"content-type": "application/json"}
    assert rest.post("/v1/orders", content=body, headers=headers).status_code == 200
    pieces = iter([body[:100], body[100:]])
    assert rest.post("/v1/orders", content=pieces, headers=headers).status_code == 200


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        (b"{not json", 422),
        (b"[1, 2]", 422),
        (json.dumps({"work_ms": "soon"}).encode(), 422),
        (json.dumps({"order": {"items": [{"quantity": "two"}]}}).encode(), 422),
        # No coercion the OpenAPI document does not allow: "5" is no integer, 0 no boolean.
        (json.dumps({"work_ms": "5"}).encode(), 422),
        (json.dumps({"count_words": 0}).encode(), 422),
        (json.dumps({"order": {"items": [{"quantity": True}]}}).encode(), 422),
        (json.dumps({"order": {"items": [{"unit_price_cents": 1.5}]}}).encode(), 422),
        (json.dumps({"order": {"items": [{"quantity": -1}]}}).encode(), 400),
        (json.dumps({"work_ms": -5}).encode(), 400),
        (json.dumps({"work_ms": 10**6}).encode(), 413),
    ],
)
def test_bad_orders_are_4xx_with_a_message(
    rest: TestClient, registry: CollectorRegistry, payload: bytes, status: int
) -> None:
    reply = rest.post("/v1/orders", content=payload, headers={"content-type": "application/json"})
    assert reply.status_code == status
    assert isinstance(reply.json()["detail"], str) and reply.json()["detail"]
    assert requests(registry, "rest", "unary", "client_error", str(status)) == 1


def test_integral_number_is_an_integer(rest: TestClient) -> None:
    # JSON Schema's integer, as the document says: 2.0 is one.
    order = {"order": {"items": [{"quantity": 2.0, "unit_price_cents": 5}]}, "work_ms": 1.0}
    assert rest.post("/v1/orders", json=order).json()["total_cents"] == 10


def test_stream_ndjson(rest: TestClient, registry: CollectorRegistry) -> None:
    reply = rest.get("/v1/stream", params={"count": 4, "size": 100, "interval_ms": 1})
    assert reply.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in reply.text.splitlines()]
    assert [m["seq"] for m in lines] == [0, 1, 2, 3]
    assert all(base64.b64decode(m["payload"]) == core.payload(100) for m in lines)
    labels = {"protocol": "rest", "kind": "server_stream"}
    assert value(registry, "wirelab_server_messages_sent_total", **labels) == 4
    assert value(registry, "wirelab_server_response_bytes_sum", **labels) == len(reply.content)
    assert value(registry, "wirelab_server_time_to_first_message_seconds_count", **labels) == 1
    assert requests(registry, "rest", "server_stream", "ok", "200") == 1


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"count": -1}, 400),
        ({"count": "many"}, 422),
        ({"count": SMALL.max_stream_count + 1}, 413),
        ({"count": 1, "size": SMALL.max_message_bytes + 1}, 413),
        ({"count": 1, "interval_ms": 10**9}, 413),
    ],
)
def test_bad_stream_requests(
    rest: TestClient, registry: CollectorRegistry, params: dict[str, object], status: int
) -> None:
    reply = rest.get("/v1/stream", params=params)
    assert reply.status_code == status and reply.json()["detail"]
    assert requests(registry, "rest", "server_stream", "client_error", str(status)) == 1


@pytest.mark.parametrize("path", ["/v1/blobs", "/v1/blobs/stream"])
def test_binary_uploads_are_hashed(
    rest: TestClient, registry: CollectorRegistry, path: str
) -> None:
    data = core.payload(50_000)
    reply = rest.post(path, content=data, headers={"content-type": "application/octet-stream"})
    assert reply.json() == {"size": 50_000, "sha256": hashlib.sha256(data).hexdigest()}
    kind = "upload" if path == "/v1/blobs" else "upload_chunked"
    assert requests(registry, "rest", kind, "ok", "200") == 1
    labels = {"protocol": "rest", "kind": kind}
    assert value(registry, "wirelab_server_request_bytes_sum", **labels) == 50_000


def test_json_upload(rest: TestClient, registry: CollectorRegistry) -> None:
    data = core.payload(1000)
    reply = rest.post("/v1/blobs/json", json={"data": base64.b64encode(data).decode()})
    assert reply.json() == {"size": 1000, "sha256": core.digest(1000)}
    assert requests(registry, "rest", "upload_json", "ok", "200") == 1


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/blobs", b"x" * (SMALL.max_payload_bytes + 1), 413),
        ("/v1/blobs/stream", b"x" * (SMALL.max_payload_bytes + 1), 413),
        ("/v1/blobs/json", b'{"data": "%%%"}', 400),
        ("/v1/blobs/json", b'{"data": 5}', 422),
        ("/v1/blobs/json", b"{", 422),
        ("/v1/blobs/json", b'{"data": "' + b"A" * (SMALL.max_payload_bytes * 2) + b'"}', 413),
    ],
)
def test_bad_uploads(
    rest: TestClient, registry: CollectorRegistry, path: str, body: bytes, status: int
) -> None:
    reply = rest.post(path, content=body)
    assert reply.status_code == status and reply.json()["detail"]
    kind = {"/v1/blobs": "upload", "/v1/blobs/stream": "upload_chunked"}.get(path, "upload_json")
    assert requests(registry, "rest", kind, "client_error", str(status)) == 1


def test_oversize_chunked_upload_without_length(rest: TestClient) -> None:
    pieces = (b"x" * 4096 for _ in range(SMALL.max_payload_bytes // 4096 + 2))
    assert rest.post("/v1/blobs/stream", content=pieces).status_code == 413


def test_download_binary(rest: TestClient, registry: CollectorRegistry) -> None:
    reply = rest.get("/v1/blobs", params={"size": 40_000})
    assert reply.headers["content-type"] == "application/octet-stream"
    assert reply.headers["x-wirelab-size"] == "40000"
    assert reply.headers["x-wirelab-sha256"] == hashlib.sha256(reply.content).hexdigest()
    labels = {"protocol": "rest", "kind": "download"}
    assert value(registry, "wirelab_server_response_bytes_sum", **labels) == 40_000


def test_download_json(rest: TestClient) -> None:
    blob = rest.get("/v1/blobs/json", params={"size": 3000}).json()
    data = base64.b64decode(blob["data"])
    assert (blob["size"], blob["sha256"]) == (3000, hashlib.sha256(data).hexdigest())


def test_download_chunked(rest: TestClient, registry: CollectorRegistry) -> None:
    with rest.stream("GET", "/v1/blobs/stream", params={"size": 10_000, "chunk_size": 3000}) as r:
        pieces = list(r.iter_raw())
        headers = r.headers
    data = b"".join(pieces)
    assert headers["x-wirelab-sha256"] == hashlib.sha256(data).hexdigest() == core.digest(10_000)
    labels = {"protocol": "rest", "kind": "download_chunked"}
    assert value(registry, "wirelab_server_messages_sent_total", **labels) == 4
    assert value(registry, "wirelab_server_response_bytes_sum", **labels) == 10_000


def test_download_chunked_default_chunk(rest: TestClient, registry: CollectorRegistry) -> None:
    rest.get("/v1/blobs/stream", params={"size": SMALL.chunk_bytes * 2})
    labels = {"protocol": "rest", "kind": "download_chunked"}
    assert value(registry, "wirelab_server_messages_sent_total", **labels) == 2


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/v1/blobs", {"size": -1}, 400),
        ("/v1/blobs", {"size": SMALL.max_payload_bytes + 1}, 413),
        ("/v1/blobs/json", {"size": "big"}, 422),
        ("/v1/blobs/stream", {"size": 10, "chunk_size": -1}, 400),
        ("/v1/blobs/stream", {"size": 10, "chunk_size": SMALL.max_message_bytes + 1}, 413),
    ],
)
def test_bad_downloads(rest: TestClient, path: str, params: dict[str, object], status: int) -> None:
    reply = rest.get(path, params=params)
    assert reply.status_code == status and reply.json()["detail"]


def test_pingpong(rest: TestClient, registry: CollectorRegistry) -> None:
    with rest.websocket_connect("/v1/pingpong") as ws:
        for seq in range(3):
            ping = {"seq": seq, "payload": base64.b64encode(core.payload(10 * seq)).decode()}
            ws.send_text(json.dumps(ping))
            assert json.loads(ws.receive_text()) == ping
    labels = {"protocol": "rest", "kind": "bidi"}
    assert requests(registry, "rest", "bidi", "ok", "101") == 1
    assert value(registry, "wirelab_server_messages_received_total", **labels) == 3
    assert value(registry, "wirelab_server_messages_sent_total", **labels) == 3
    assert value(registry, "wirelab_server_time_to_first_message_seconds_count", **labels) == 1


@pytest.mark.parametrize(
    ("frame", "close_code", "status"),
    [
        ("not json", 1007, "400"),
        ("[1]", 1007, "400"),
        ('{"seq": "x"}', 1007, "400"),
        ('{"seq": -1}', 1007, "400"),
        ('{"seq": 1, "payload": "%%"}', 1007, "400"),
        ('{"seq": 1, "payload": 7}', 1007, "400"),
        (json.dumps({"payload": base64.b64encode(b"x" * 9000).decode()}), 1009, "413"),
    ],
)
def test_bad_pings_close_with_a_reason(
    rest: TestClient, registry: CollectorRegistry, frame: str, close_code: int, status: str
) -> None:
    with rest.websocket_connect("/v1/pingpong") as ws:
        ws.send_text(frame)
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    assert closed.value.code == close_code and closed.value.reason
    assert requests(registry, "rest", "bidi", "client_error", status) == 1


def test_binary_ping_frame_is_refused(rest: TestClient) -> None:
    with rest.websocket_connect("/v1/pingpong") as ws:
        ws.send_bytes(b"\x00")
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    assert closed.value.code == 1007


def test_unknown_route_and_method(rest: TestClient, registry: CollectorRegistry) -> None:
    assert rest.get("/v2/nothing").status_code == 404
    reply = rest.put("/v1/orders", json={})
    assert reply.status_code == 405 and reply.json()["detail"]
    assert requests(registry, "rest", "other", "client_error", "404") == 1
    assert requests(registry, "rest", "other", "client_error", "405") == 1


def test_405_allows_every_method_of_the_path(rest: TestClient) -> None:
    # Starlette listed the first route's methods only: "POST" for /v1/blobs, which has GET too.
    reply = rest.put("/v1/blobs")
    assert reply.status_code == 405 and reply.json()["detail"]
    assert reply.headers["allow"] == "GET, POST"
    assert rest.delete("/v1/orders").headers["allow"] == "POST"
    # HEAD is no method of the contract: refused, and never listed as allowed.
    head = rest.head("/v1/blobs")
    assert head.status_code == 405 and head.headers["allow"] == "GET, POST"


def test_health_and_openapi_are_not_measured(rest: TestClient, registry: CollectorRegistry) -> None:
    assert rest.get("/healthz").json() == {"status": "ok"}
    paths = rest.get("/openapi.json").json()["paths"]
    assert {"/v1/orders", "/v1/stream", "/v1/blobs", "/v1/blobs/json", "/v1/blobs/stream"} <= set(
        paths
    )
    assert rest.get("/docs").status_code == 200
    assert requests(registry, "rest", "other", "ok", "200") == 0


def test_info_gauge_and_preinitialised_series(
    rest: TestClient, registry: CollectorRegistry, request: pytest.FixtureRequest
) -> None:
    mode = request.node.callspec.params["rest"]
    info = {"protocol": "rest", "concurrency": mode, "fanout": "none", "client": "none"}
    assert value(registry, "wirelab_server_info", **info) == 1
    assert (
        registry.get_sample_value(
            "wirelab_server_requests_total",
            {"protocol": "rest", "kind": "download_json", "outcome": "server_error", "code": "500"},
        )
        == 0
    )

"""The Node.js services against the Python ones of the same protocol, as real processes on free
loopback ports: the same calls to both, equal replies (same order -> same reply; same blob size ->
same digest), and the same wirelab_server_* families, label sets, bucket bounds and counts on both
/metrics pages (the runtime is the scrape target's label, never a series label)."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from wirelab import core
from wirelab.contract import SERVER
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.node.conftest import NODE_DIR
from tests.services.test_integration import Service, launch, start

pytestmark = pytest.mark.integration

# Samples whose values may differ between runtimes: the bytes the payload budget holds at the
# moment of a scrape (each runtime releases them at its own point of a call's end; the configured
# budget is compared). The pieces a streamed request body arrives in depend on each server's reads
# (test_rest_replies_and_metrics_match exempts them).
VALUE_EXEMPT = {"wirelab_server_payload_in_flight_bytes"}
# The concurrency model is the one label value that names the runtime's own server.
RUNTIME_LABELS = {("wirelab_server_info", "concurrency")}


def start_node(node: str, protocol: str, tmp: Path, env: dict[str, str] | None = None) -> Service:
    main = str(NODE_DIR / "src" / protocol / "main.js")
    return launch([node, main], protocol, tmp, lambda _, port: _healthy(protocol, port), env)


def _healthy(protocol: str, port: int) -> bool:
    try:
        if protocol == "rest":
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=1)
        return True
    except (httpx.HTTPError, grpc.FutureTimeoutError):
        return False


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("conformance")


def pair(node: str, protocol: str, tmp: Path) -> Iterator[tuple[Service, Service]]:
    python = start("wirelab.rest" if protocol == "rest" else "wirelab.rpc", tmp)
    try:
        js = start_node(node, protocol, tmp)
    except BaseException:
        python.stop()
        raise
    yield python, js
    assert js.stop() == 0, js.log.read_text()
    assert python.stop() == 0


@pytest.fixture(scope="module")
def rest_pair(node: str, tmp: Path) -> Iterator[tuple[Service, Service]]:
    yield from pair(node, "rest", tmp)


@pytest.fixture(scope="module")
def grpc_pair(node: str, tmp: Path) -> Iterator[tuple[Service, Service]]:
    yield from pair(node, "grpc", tmp)


# ------------------------------------------------------------------------------ the /metrics pages

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(service: Service) -> tuple[dict[str, tuple[str, str]], Series]:
    """The wirelab_server_* families ({name: (type, help)}) and their samples."""
    text = httpx.get(f"http://127.0.0.1:{service.metrics_port}/metrics", timeout=5).text
    families: dict[str, tuple[str, str]] = {}
    samples: Series = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("wirelab_server_"):
            continue
        families[family.name] = (family.type, family.documentation)
        for s in family.samples:
            labels = {k: _label(family.name, k, v) for k, v in s.labels.items()}
            samples[(s.name, frozenset(labels.items()))] = s.value
    return families, samples


def _label(family: str, name: str, value: str) -> str:
    # A bound as a number: Python writes 1 GiB as 1.073741824e+09, prom-client as 1073741824.
    if name == "le":
        return repr(float(value))
    return "*" if (family, name) in RUNTIME_LABELS else value


def settled(python: Service, js: Service, calls: int) -> tuple[Series, Series]:
    """Both pages once each has recorded ``calls`` calls (servers record asynchronously)."""
    deadline = time.monotonic() + 5
    while True:
        (py_families, py), (js_families, nd) = scrape(python), scrape(js)
        counted = [
            sum(v for (name, _), v in page.items() if name == "wirelab_server_requests_total")
            for page in (py, nd)
        ]
        if counted == [calls, calls] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert counted == [calls, calls]
    assert py_families == js_families
    assert set(js_families) == set(SERVER)
    return py, nd


def compare_pages(py: Series, nd: Series, exempt: set[tuple[str, str]]) -> None:
    """Same series (names and label sets, so the same buckets), same values but for ``exempt``
    (sample name, kind) pairs and the durations' sums and buckets, which are measured times
    (their counts are compared)."""
    assert sorted(map(str, set(py) - set(nd))) == []
    assert sorted(map(str, set(nd) - set(py))) == []
    timed = ("_seconds_sum", "_seconds_bucket")
    differing = {
        key: (py[key], nd[key])
        for key in py
        if not key[0].endswith(timed)
        and not any(key[0].startswith(family) for family in VALUE_EXEMPT)
        and (key[0], dict(key[1]).get("kind", "")) not in exempt
        and py[key] != nd[key]
    }
    assert differing == {}


# ---------------------------------------------------------------------------------------- REST


def test_rest_replies_and_metrics_match(rest_pair: tuple[Service, Service]) -> None:
    python, js = rest_pair
    bases = [f"http://127.0.0.1:{s.port}" for s in (python, js)]
    order = {
        "order": {
            "order_id": "o-7",
            "customer_id": "c-1",
            "items": [
                {"sku": "a", "quantity": 3, "unit_price_cents": 1999},
                {"sku": "b", "quantity": 1, "unit_price_cents": -500},
            ],
            "attributes": {"gift": "yes", "é": "ü"},
            "note": "  three\twords\u3000here é ",
        },
        "count_words": True,
    }
    blob = core.payload(70_000)[::-1]
    calls = 0

    def both(method: str, path: str, **kw: Any) -> list[httpx.Response]:
        nonlocal calls
        calls += 1
        # A list body is sent as a stream of its pieces (chunked), a fresh iterator per server.
        pieces = kw.pop("pieces", None)
        return [
            httpx.request(method, b + path, timeout=10, **kw)
            if pieces is None
            else httpx.request(method, b + path, timeout=10, content=iter(pieces), **kw)
            for b in bases
        ]

    def same(method: str, path: str, **kw: Any) -> httpx.Response:
        py, nd = both(method, path, **kw)
        assert (py.status_code, py.content) == (nd.status_code, nd.content), path
        return py

    assert same("POST", "/v1/orders", json=order).json()["total_cents"] == 5497
    same("POST", "/v1/orders", json={})
    same(
        "POST",
        "/v1/orders",
        json={"order": {"items": [{"quantity": 1024, "unit_price_cents": 2**52}]}},
    )
    # Integers past 2^53 (JSON.parse would round them) read exactly by both, and what overflows
    # int64 refused by both with the same status and words.
    for text in (
        '{"order":{"items":[{"quantity":1,"unit_price_cents":9007199254740993}]}}',
        '{"order":{"items":[{"quantity":3,"unit_price_cents":3074457345618258602}]}}',
        '{"order":{"items":[{"quantity":1.0,"unit_price_cents":1.2345678901234567e18}]}}',
        '{"order":{"items":[{"quantity":9007199254740993,"unit_price_cents":1}]}}',
        '{"order":{"items":[{"quantity":1,"unit_price_cents":-9223372036854775809}]}}',
        '{"order":{"items":[{"quantity":2,"unit_price_cents":4611686018427387904}]}}',
        '{"work_ms":1180591620717411303424}',
    ):
        same("POST", "/v1/orders", content=text, headers={"content-type": "application/json"})
    for bad, status in (
        ({"work_ms": -1}, 400),
        ({"work_ms": 10**9}, 413),
        ({"work_ms": 1.5}, 422),
        ({"count_words": "yes"}, 422),
        ({"order": {"items": [{"quantity": -1}]}}, 400),
    ):
        py, nd = both("POST", "/v1/orders", json=bad)
        assert py.status_code == nd.status_code == status, bad
        assert set(py.json()) == set(nd.json()) == {"detail"}
    assert same("GET", "/v1/stream", params={"count": 3, "size": 10}).text.count("\n") == 3
    py, nd = both("GET", "/v1/stream", params={"count": -1})
    assert py.status_code == nd.status_code == 400
    for path in ("/v1/blobs", "/v1/blobs/stream"):
        py, nd = both("GET", path, params={"size": 70_000, "chunk_size": 30_000})
        assert py.content == nd.content == core.payload(70_000)
        for header in ("x-wirelab-size", "x-wirelab-sha256"):
            assert py.headers[header] == nd.headers[header]
    same("GET", "/v1/blobs/json", params={"size": 5000})
    same("POST", "/v1/blobs", content=blob)
    same("POST", "/v1/blobs/json", json={"data": base64.b64encode(blob).decode()})
    same("POST", "/v1/blobs/stream", pieces=[blob[:30_000], blob[30_000:]])
    py, nd = both("GET", "/nope")
    assert py.status_code == nd.status_code == 404
    frames = ['{"seq":1,"payload":"aGk="}', '{"seq":2}', '{"seq":18446744073709551615}']
    answers = []
    for base in bases:
        with connect(base.replace("http", "ws") + "/v1/pingpong") as ws:
            for frame in frames:
                ws.send(frame)
            answers.append([ws.recv() for _ in frames])
    calls += 1
    assert answers[0] == answers[1]
    assert answers[0][2] == '{"seq":18446744073709551615,"payload":""}'
    # A seq of 1.0 is a float to both, no integer: the connection closed with 1007.
    closes = []
    for base in bases:
        with connect(base.replace("http", "ws") + "/v1/pingpong") as ws:
            ws.send('{"seq":1.0}')
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv()
            assert closed.value.rcvd is not None
            closes.append((closed.value.rcvd.code, closed.value.rcvd.reason))
    calls += 1
    assert closes[0] == closes[1] == (1007, "seq must be an integer")

    py_page, node_page = settled(python, js, calls)
    # A streamed body's pieces (and so its message count) depend on each server's reads; error
    # details are each runtime's own words, so the bytes of the bodies that carry them differ.
    exempt = {
        ("wirelab_server_messages_received_total", "upload_chunked"),
        ("wirelab_server_response_bytes_sum", "unary"),
        ("wirelab_server_response_bytes_sum", "server_stream"),
        ("wirelab_server_response_bytes_bucket", "unary"),
        ("wirelab_server_response_bytes_bucket", "server_stream"),
    }
    compare_pages(py_page, node_page, exempt)


# ---------------------------------------------------------------------------------------- gRPC


def test_grpc_replies_and_metrics_match(grpc_pair: tuple[Service, Service]) -> None:
    python, js = grpc_pair
    channels = [grpc.insecure_channel(f"127.0.0.1:{s.port}") for s in (python, js)]
    stubs = [pb_grpc.WireLabStub(c) for c in channels]
    calls = 0

    def both(name: str, request: Any) -> list[Any]:
        nonlocal calls
        calls += 1
        return [getattr(stub, name)(request, timeout=10) for stub in stubs]

    def refused(name: str, request: Any) -> grpc.StatusCode:
        nonlocal calls
        calls += 1
        codes = []
        for stub in stubs:
            with pytest.raises(grpc.RpcError) as info:
                reply = getattr(stub, name)(request, timeout=10)
                # A server stream fails when read; a unary call already raised above.
                list(reply)
            codes.append(info.value.code())
        assert codes[0] == codes[1], name
        return codes[0]

    order = pb.Order(
        order_id="o-7",
        customer_id="c-1",
        items=[
            pb.LineItem(sku="a", quantity=3, unit_price_cents=3074457345618258602),
            pb.LineItem(sku="b", quantity=0, unit_price_cents=-1),
        ],
        attributes={"gift": "yes"},
        note="  three\twords\u3000here é ",
    )
    py, nd = both("ProcessOrder", pb.OrderRequest(order=order, count_words=True))
    assert py == nd
    assert py.total_cents == 9223372036854775806
    py, nd = both("ProcessOrder", pb.OrderRequest())
    assert py == nd
    assert py.HasField("order") and nd.HasField("order")
    bad_order = pb.OrderRequest(
        order=pb.Order(items=[pb.LineItem(quantity=4, unit_price_cents=2**62)])
    )
    assert refused("ProcessOrder", bad_order) == grpc.StatusCode.INVALID_ARGUMENT
    assert (
        refused("ProcessOrder", pb.OrderRequest(work_ms=10**9))
        == grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    py, nd = both("StreamMessages", pb.StreamRequest(count=3, size=10))
    assert list(py) == list(nd)
    assert (
        refused("StreamMessages", pb.StreamRequest(count=10**9))
        == grpc.StatusCode.RESOURCE_EXHAUSTED
    )
    py, nd = both("Download", pb.BlobRequest(size=70_000))
    assert py == nd
    assert py.sha256 == core.digest(70_000)
    py, nd = both("DownloadStream", pb.BlobRequest(size=70_000, chunk_size=30_000))
    assert (
        dict(py.initial_metadata())["x-wirelab-sha256"]
        == dict(nd.initial_metadata())["x-wirelab-sha256"]
    )
    assert list(py) == list(nd)
    blob = core.payload(70_000)[::-1]
    py, nd = both("Upload", pb.Blob(data=blob))
    assert py == nd
    calls += 1
    chunked = [
        s.UploadStream(iter([pb.Chunk(data=blob[:30_000]), pb.Chunk(data=blob[30_000:])]))
        for s in stubs
    ]
    assert chunked[0] == chunked[1]
    calls += 1
    pings = [pb.Ping(seq=1, payload=b"hi"), pb.Ping(seq=2**64 - 1)]
    pongs = [list(s.PingPong(iter(pings))) for s in stubs]
    assert pongs[0] == pongs[1]
    for channel in channels:
        channel.close()

    py_page, node_page = settled(python, js, calls)
    compare_pages(py_page, node_page, set())

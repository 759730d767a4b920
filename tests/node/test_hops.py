"""Topologies across runtimes, as real processes on free loopback ports: a Python A relaying to a
Node.js B and a Node.js A relaying to a Python B (docs/node.md), per protocol. Each chain gives
B's own reply, bad input stops at A, and both A's pages carry the same wirelab_client_* families,
label sets, bucket bounds and counts for their calls to B (named ``b`` on both sides)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.node.test_conformance import start_node
from tests.services.test_integration import Service, start

pytestmark = pytest.mark.integration

ORDER = {
    "order": {
        "order_id": "hop-1",
        "customer_id": "c",
        "items": [{"sku": "a", "quantity": 2, "unit_price_cents": 4611686018427387903}],
        "attributes": {"é": "ü"},
        "note": "  four words\u3000across\x1fhops ",
    },
    "count_words": True,
}
BAD = {"order": {"items": [{"quantity": -1}]}}
Page = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hops")


@contextmanager
def chains(node: str, protocol: str, tmp: Path) -> Iterator[dict[str, Service]]:
    """{"b-python", "b-node", "a-python" (-> b-node), "a-node" (-> b-python)}, all stopped after."""
    module = "wirelab.rest" if protocol == "rest" else "wirelab.rpc"
    scheme = "http" if protocol == "rest" else "grpc"
    running: dict[str, Service] = {}
    try:
        running["b-python"] = start(module, tmp)
        running["b-node"] = start_node(node, protocol, tmp)

        def relay(to: str) -> dict[str, str]:
            target = f"{scheme}://127.0.0.1:{running[to].port}#b"
            return {"WIRELAB_DOWNSTREAM": target, "WIRELAB_LOCAL_WORK": "off"}

        running["a-python"] = start(module, tmp, relay("b-node"))
        running["a-node"] = start_node(node, protocol, tmp, relay("b-python"))
        yield running
    finally:
        for name, service in running.items():
            assert service.stop() == 0, (name, service.log.read_text())


def client_page(service: Service, calls: int) -> tuple[dict[str, tuple[str, str]], Page]:
    """The wirelab_client_* families ({name: (type, help)}) and samples of ``service``'s page
    once it has counted ``calls`` calls to its downstream."""
    deadline = time.monotonic() + 5
    while True:
        text = httpx.get(f"http://127.0.0.1:{service.metrics_port}/metrics", timeout=5).text
        families: dict[str, tuple[str, str]] = {}
        samples: Page = {}
        for family in text_string_to_metric_families(text):
            if family.name.startswith("wirelab_client_"):
                families[family.name] = (family.type, family.documentation)
                for s in family.samples:
                    labels = {k: repr(float(v)) if k == "le" else v for k, v in s.labels.items()}
                    samples[(s.name, frozenset(labels.items()))] = s.value
        counted = sum(v for (n, _), v in samples.items() if n == "wirelab_client_requests_total")
        if counted >= calls or time.monotonic() > deadline:
            return families, samples
        time.sleep(0.1)


def compare(python: Service, js: Service, calls: int) -> None:
    (py_families, py), (js_families, nd) = client_page(python, calls), client_page(js, calls)
    assert py_families == js_families
    assert sorted(map(str, set(py) ^ set(nd))) == []
    timed = ("_seconds_sum", "_seconds_bucket")
    differing = {k: (py[k], nd[k]) for k in py if not k[0].endswith(timed) and py[k] != nd[k]}
    assert differing == {}
    ok = ("wirelab_client_requests_total", "ok")
    assert [v for (n, lb), v in py.items() if (n, dict(lb).get("outcome")) == ok] == [calls]


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_chains_across_runtimes_give_bs_reply_and_the_same_client_metrics(
    node: str,
    tmp: Path,
    protocol: str,
) -> None:
    with chains(node, protocol, tmp) as services:
        if protocol == "rest":
            urls = {n: f"http://127.0.0.1:{s.port}/v1/orders" for n, s in services.items()}
            replies = {n: httpx.post(u, json=ORDER, timeout=10) for n, u in urls.items()}
            assert {n: r.status_code for n, r in replies.items()} == dict.fromkeys(urls, 200)
            assert len({r.content for r in replies.values()}) == 1, replies
            assert replies["a-node"].json()["total_cents"] == 9223372036854775806
            assert replies["a-node"].json()["word_count"] == 4
            for a in ("a-python", "a-node"):
                refused = httpx.post(urls[a], json=BAD, timeout=10)
                assert refused.status_code == 400, refused.text
        else:
            request = pb.OrderRequest()
            order = ORDER["order"]
            assert isinstance(order, dict)
            request.order.order_id = order["order_id"]
            request.order.note = order["note"]
            request.order.items.add(sku="a", quantity=2, unit_price_cents=4611686018427387903)
            request.count_words = True
            got = {}
            for name, service in services.items():
                with grpc.insecure_channel(f"127.0.0.1:{service.port}") as channel:
                    stub = pb_grpc.WireLabStub(channel)
                    got[name] = stub.ProcessOrder(request, timeout=10).SerializeToString()
                    if name.startswith("a-"):
                        bad = pb.OrderRequest(work_ms=10**9)
                        with pytest.raises(grpc.RpcError) as info:
                            stub.ProcessOrder(bad, timeout=10)
                        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert len(set(got.values())) == 1, got
        compare(services["a-python"], services["a-node"], 1)

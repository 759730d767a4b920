"""Traces across runtimes, as real processes on free loopback ports (docs/traces.md): a Python edge
relaying to a Node.js B and a Node.js edge relaying to a Python B, per protocol, every process
exporting over OTLP/HTTP to a receiver in this test. Each order is one trace of three spans, the
edge's server span, its client span and B's server span, each the child of the one before it
across the runtimes' own propagation (traceparent in HTTP headers, in gRPC metadata); and an
edge that does not sample an order keeps its B, which samples every trace it starts, from
keeping any of it. The Node edge's latency histograms name its order's trace as their exemplar,
on a page prometheus_client's OpenMetrics parser reads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc
from wirelab_perf.overhead import otlp_sink

from tests.node.test_conformance import start_node
from tests.services.test_integration import Service, start

pytestmark = pytest.mark.integration

ORDER = {
    "order": {
        "order_id": "traced",
        "items": [{"sku": "a", "quantity": 2, "unit_price_cents": 3}],
        "note": "three words here",
    },
    "count_words": True,
}
NAMES = {"rest": "POST /v1/orders", "grpc": "/wirelab.v1.WireLab/ProcessOrder"}


@dataclass(frozen=True)
class Span:
    service: str
    trace: str
    id: str
    parent: str
    name: str
    kind: int
    attributes: dict[str, Any]


class Receiver:
    """Keeps every span an OTLP receiver (wirelab_perf.overhead.otlp_sink) is sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: list[Span] = []

    def export(self, request: ExportTraceServiceRequest) -> None:
        with self.lock:
            for resource_spans in request.resource_spans:
                resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for s in scope_spans.spans:
                        attributes = {a.key: _value(a.value) for a in s.attributes}
                        self.spans.append(
                            Span(
                                resource["service.name"],
                                s.trace_id.hex(),
                                s.span_id.hex(),
                                s.parent_span_id.hex(),
                                s.name,
                                s.kind,
                                attributes,
                            )
                        )

    def take(self) -> list[Span]:
        with self.lock:
            taken, self.spans = self.spans, []
        return taken


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value"))


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[Receiver, str]]:
    kept = Receiver()
    with otlp_sink(kept.export) as endpoint:
        yield kept, endpoint


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


@contextmanager
def chains(
    node: str, protocol: str, tmp: Path, endpoint: str, edge_ratio: str
) -> Iterator[dict[str, Service]]:
    """{"b-python", "b-node", "a-python" (-> b-node), "a-node" (-> b-python)}, each traced under
    its own name (``<protocol>-<name>``) and exporting to ``endpoint``, the edges sampling at
    ``edge_ratio`` and the Bs every trace they would start; all stopped (their batched spans
    sent) when the block ends."""
    module = "wirelab.rest" if protocol == "rest" else "wirelab.rpc"
    scheme = "http" if protocol == "rest" else "grpc"
    running: dict[str, Service] = {}

    def traced(name: str, ratio: str, downstream: str | None = None) -> dict[str, str]:
        env = {
            "WIRELAB_TRACES": "on",
            "WIRELAB_TRACE_SAMPLE_RATIO": ratio,
            "WIRELAB_TRACES_ENDPOINT": endpoint,
            "WIRELAB_SERVICE_NAME": f"{protocol}-{name}",
        }
        if downstream is not None:
            target = f"{scheme}://127.0.0.1:{running[downstream].port}#b"
            env |= {"WIRELAB_DOWNSTREAM": target, "WIRELAB_LOCAL_WORK": "off"}
        return env

    try:
        running["b-python"] = start(module, tmp, traced("b-python", "1"))
        running["b-node"] = start_node(node, protocol, tmp, traced("b-node", "1"))
        running["a-python"] = start(module, tmp, traced("a-python", edge_ratio, "b-node"))
        running["a-node"] = start_node(
            node, protocol, tmp, traced("a-node", edge_ratio, "b-python")
        )
        yield running
    finally:
        # Stopped, each exports what it still holds (SIGTERM's drain), then exits 0.
        for name, service in running.items():
            assert service.stop() == 0, (name, service.log.read_text())


def order(protocol: str, service: Service) -> None:
    if protocol == "rest":
        url = f"http://127.0.0.1:{service.port}/v1/orders"
        answered = httpx.post(url, json=ORDER, timeout=10)
        assert answered.status_code == 200, answered.text
        assert answered.json()["word_count"] == 3
        return
    with grpc.insecure_channel(f"127.0.0.1:{service.port}") as channel:
        stub: Any = pb_grpc.WireLabStub(channel)
        request = pb.OrderRequest(count_words=True)
        request.order.order_id = "traced"
        request.order.note = "three words here"
        assert stub.ProcessOrder(request, timeout=10).word_count == 3


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_an_order_across_runtimes_is_one_trace_with_a_span_per_hop(
    node: str, protocol: str, tmp: Path, receiver: tuple[Receiver, str]
) -> None:
    kept, endpoint = receiver
    kept.take()
    with chains(node, protocol, tmp, endpoint, "1") as running:
        order(protocol, running["a-python"])
        order(protocol, running["a-node"])
        exemplars = node_exemplars(running["a-node"])
    spans = kept.take()
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace, []).append(span)
    assert len(traces) == 2, [(s.service, s.name) for s in spans]
    for edge, b in (("python", "node"), ("node", "python")):
        (trace,) = [t for t in traces.values() if any(s.service.endswith(f"a-{edge}") for s in t)]
        by_role = {(s.service.removeprefix(f"{protocol}-"), s.kind): s for s in trace}
        assert len(trace) == 3 and len(by_role) == 3, [(s.service, s.kind) for s in trace]
        server = by_role[(f"a-{edge}", OtlpSpan.SPAN_KIND_SERVER)]
        client = by_role[(f"a-{edge}", OtlpSpan.SPAN_KIND_CLIENT)]
        downstream = by_role[(f"b-{b}", OtlpSpan.SPAN_KIND_SERVER)]
        assert server.parent == ""  # the edge began the trace: no traceparent came with the order
        assert client.parent == server.id and downstream.parent == client.id
        for span, runtime in ((server, edge), (client, edge), (downstream, b)):
            assert span.name == NAMES[protocol], span
            assert span.attributes["wirelab.runtime"] == runtime
            assert span.attributes["wirelab.protocol"] == protocol
            assert span.attributes["wirelab.kind"] == "unary"
            assert span.attributes["wirelab.service"] == span.service
        if protocol == "grpc":
            assert downstream.attributes["rpc.grpc.status_code"] == 0
        else:
            assert downstream.attributes["http.response.status_code"] == 200
        if edge == "node":
            assert exemplars == {
                "wirelab_server_request_duration_seconds": [server.trace],
                "wirelab_client_request_duration_seconds": [server.trace],
            }


def node_exemplars(service: Service) -> dict[str, list[str]]:
    """The trace ids on ``service``'s latency histograms, from its page as OpenMetrics."""
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    url = f"http://127.0.0.1:{service.metrics_port}/metrics"
    page = httpx.get(url, headers={"accept": accept}, timeout=5)
    assert page.headers["content-type"].startswith("application/openmetrics-text")
    found: dict[str, list[str]] = {}
    for family in text_string_to_metric_families(page.text):  # type: ignore[no-untyped-call]
        for sample in family.samples:
            if sample.exemplar is not None:
                found.setdefault(family.name, []).append(sample.exemplar.labels["trace_id"])
    return found


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_an_edge_that_does_not_sample_an_order_keeps_its_other_runtimes_b_from_it(
    node: str, protocol: str, tmp: Path, receiver: tuple[Receiver, str]
) -> None:
    kept, endpoint = receiver
    kept.take()
    with chains(node, protocol, tmp, endpoint, "0") as running:
        for edge in ("a-python", "a-node"):
            order(protocol, running[edge])
            order(protocol, running[edge])
        # The Bs export what they keep: an order sent to each directly is a trace of its own.
        order(protocol, running["b-python"])
        order(protocol, running["b-node"])
    spans = kept.take()
    assert sorted(s.service for s in spans) == [f"{protocol}-b-node", f"{protocol}-b-python"]
    assert all(s.parent == "" and s.kind == OtlpSpan.SPAN_KIND_SERVER for s in spans)

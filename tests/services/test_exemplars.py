"""Exemplars (docs/traces.md#exemplars): with traces on, the server's duration histogram and a
relay's client histogram carry the trace id of each sampled call on the bucket the call fell in,
in the OpenMetrics page only; unsampled calls and services with traces off carry none."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import grpc
import httpx
import pytest
from aio_pika.abc import AbstractIncomingMessage
from fastapi.testclient import TestClient
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics
from prometheus_client import metrics as library_metrics
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from wirelab import exposition
from wirelab.amqp import wire
from wirelab.amqp.consumer import OrderConsumer
from wirelab.hops import build_relay
from wirelab.hops.outgoing import families
from wirelab.hops.via_amqp import AmqpDownstream, Broker
from wirelab.metrics import SAMPLED, Sampled, ServerMetrics
from wirelab.rest.app import create_app
from wirelab.rpc.server import build_aio, build_sync
from wirelab.settings import Settings
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.services.conftest import settings
from tests.services.served import in_thread
from tests.services.test_amqp import ORDER, Channel, Delivery, Exchange, _connected
from tests.services.test_exposition import _exercised
from tests.services.test_integration import free_port, start
from tests.services.test_traces import ALWAYS, PARENT, UNSAMPLED, Traced, _order, _session

DURATION = "wirelab_server_request_duration_seconds"
CLIENT_DURATION = "wirelab_client_request_duration_seconds"
# What Prometheus 3.14 sends by default (config.DefaultScrapeProtocols).
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.5,text/plain;version=0.0.4;"
    "q=0.25,*/*;q=0.1"
)
TRACE_ID = PARENT.split("-")[1]


@pytest.fixture(autouse=True)
def no_created_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the services run (wirelab.serving): no _created samples; restored afterwards."""
    monkeypatch.setattr(library_metrics, "_use_created", library_metrics._use_created)
    disable_created_metrics()  # type: ignore[no-untyped-call]


def exemplars(registry: CollectorRegistry, family: str) -> list[tuple[dict[str, str], Any]]:
    """(labels, exemplar) of every bucket of ``family`` that has one, read back from the
    OpenMetrics page as Prometheus reads it; each checked to lie in its bucket, the first one
    whose count the call raised."""
    page = exposition.page(registry, openmetrics=True)().decode()
    found = []
    for metric in text_string_to_metric_families(page):  # type: ignore[no-untyped-call]
        if metric.name != family:
            continue
        below: dict[tuple[Any, ...], tuple[float, float]] = {}
        for sample in metric.samples:
            if not sample.name.endswith("_bucket"):
                continue
            series = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
            lower, count_below = below.get(series, (0.0, 0.0))
            le = float(sample.labels["le"])
            if sample.exemplar is not None:
                assert lower < sample.exemplar.value <= le or sample.exemplar.value == 0.0
                assert sample.value > count_below  # a call was counted in this bucket
                found.append((sample.labels, sample.exemplar))
            below[series] = (le, sample.value)
    return found


def trace_ids(registry: CollectorRegistry, family: str = DURATION) -> list[str]:
    return [e.labels["trace_id"] for _, e in exemplars(registry, family)]


@contextmanager
def current(trace_id: str | None) -> Iterator[None]:
    """A call's Sampled (``trace_id`` None: its trace was not kept), current in the block."""
    token = SAMPLED.set(Sampled(trace_id))
    try:
        yield
    finally:
        SAMPLED.reset(token)


def traced_metrics(protocol: str, mode: str) -> tuple[ServerMetrics, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = ServerMetrics(protocol, registry, mode)
    metrics.keep_exemplars()  # as wirelab.serving.instruments does with traces on
    return metrics, registry


# The metrics alone -------------------------------------------------------------------------


def test_a_sampled_call_is_its_buckets_exemplar_and_others_leave_it() -> None:
    metrics, registry = traced_metrics("grpc", "aio")
    with current(TRACE_ID):  # a duration past every bound: the +Inf bucket
        metrics.start("unary", started=0.0).finish("ok", "OK")
    metrics.start("unary").finish("ok", "OK")  # no trace in this context: no exemplar
    with current(None):  # a call whose trace was not kept
        metrics.start("unary").finish("ok", "OK")
    ((labels, exemplar),) = exemplars(registry, DURATION)
    assert labels["le"] == "+Inf" and labels["kind"] == "unary"
    assert exemplar.labels == {"trace_id": TRACE_ID} and exemplar.timestamp is not None


def test_a_calls_first_kept_span_names_its_trace() -> None:
    """A call's exemplar is the trace its first kept span began or continued; a span that
    starts a trace of its own later in the call does not change it."""
    tracer = Traced(settings(**ALWAYS), "rest", "rest").tracing.tracer
    with current(None):
        with (
            tracer.start_as_current_span("call") as call,
            tracer.start_as_current_span("another trace", context=Context()),
        ):
            pass
        sampled = SAMPLED.get()
        assert sampled is not None
        assert sampled.trace_id == format(call.get_span_context().trace_id, "032x")


def test_without_exemplars_kept_no_call_carries_one() -> None:
    registry = CollectorRegistry()
    metrics = ServerMetrics("rest", registry, "async")
    with current(TRACE_ID):
        metrics.start("unary").finish("ok", "200")
    assert metrics.enqueue == metrics._queue.extend  # the calls' path as it always was
    assert trace_ids(registry) == []


def test_the_openmetrics_page_is_the_librarys_with_its_exemplars() -> None:
    m, registry = _exercised("rest")
    m.keep_exemplars()
    with current(TRACE_ID):
        m.start("upload").finish("ok", "200")
    Histogram("wirelab_h", "a histogram", registry=registry).observe(0.2, {"trace_id": "ab"})
    page = exposition.TextPage(registry, openmetrics=True)
    assert page() + b"# EOF\n" == openmetrics_latest(registry)  # type: ignore[no-untyped-call]
    assert b' # {trace_id="' + TRACE_ID.encode() + b'"} ' in page()
    assert b"# {" not in exposition.TextPage(registry)()  # the text format has no exemplars


# The endpoint ------------------------------------------------------------------------------


def _serve(registry: CollectorRegistry, openmetrics: bool) -> tuple[Any, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = exposition.start_server("127.0.0.1", port, registry, openmetrics=openmetrics)
    return server, f"http://127.0.0.1:{port}/metrics"


def _get(url: str, accept: str) -> tuple[str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.headers["Content-Type"], reply.read().decode()


@pytest.mark.parametrize("traces", [True, False])
def test_the_endpoint_serves_openmetrics_to_prometheus_only_with_traces_on(traces: bool) -> None:
    metrics, registry = traced_metrics("rest", "async")
    with current(TRACE_ID):
        metrics.start("unary").finish("ok", "200")
    server, url = _serve(registry, traces)
    try:
        kind, page = _get(url, PROMETHEUS_ACCEPT)
        plain_kind, plain = _get(url, "text/plain;version=0.0.4")
    finally:
        server.shutdown()
        server.server_close()
    assert plain_kind == exposition.CONTENT_TYPE and "# {" not in plain
    if not traces:
        assert kind == exposition.CONTENT_TYPE and "# {" not in page
        return
    assert kind == exposition.OPENMETRICS_CONTENT_TYPE
    assert page.endswith("# EOF\n") and page.count("# EOF") == 1
    assert f'# {{trace_id="{TRACE_ID}"}}' in page
    assert "process_cpu_seconds" in page  # the default registry's collectors follow


@pytest.mark.parametrize(
    ("accept", "asks"),
    [
        (PROMETHEUS_ACCEPT, True),
        ("application/openmetrics-text", True),
        ("application/openmetrics-text; version=0.0.1", False),
        ("application/openmetrics-text; version=one", False),
        ("text/plain;version=0.0.4;q=0.25,*/*;q=0.1", False),
        ("", False),
    ],
)
def test_openmetrics_is_what_the_accept_header_asks_for(accept: str, asks: bool) -> None:
    assert exposition.asks_openmetrics(accept) is asks


# The services, traced at ratio 1 -----------------------------------------------------------

ORDER_JSON = {"order_id": "o-1", "items": [{"sku": "a", "quantity": 1, "unit_price_cents": 1}]}


def _rest_orders(url: str, *headers: dict[str, str]) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:  # one keep-alive connection
        for each in headers:
            answered = client.post("/v1/orders", json={"order": ORDER_JSON}, headers=each)
            assert answered.status_code == 200, answered.text


def test_rest_orders_carry_their_trace_and_an_unsampled_one_none() -> None:
    config = settings(**ALWAYS)
    metrics, registry = traced_metrics("rest", "async")
    traced = Traced(config, "rest", "rest")
    with in_thread(create_app(config, metrics, traced.tracing)) as url:
        _rest_orders(url, {"traceparent": PARENT})
        one = trace_ids(registry)
        _rest_orders(url, *[{"traceparent": UNSAMPLED}] * 20)
    assert one == [TRACE_ID]
    assert trace_ids(registry) == [TRACE_ID]  # 20 unsampled orders later, still the one


def test_a_websocket_session_is_one_observation_naming_its_trace() -> None:
    """The latency histogram observes a session once, not each ping, so the session's exemplar
    is its span's trace, as a call's is; an unsampled session leaves none."""
    config = settings(**ALWAYS)
    metrics, registry = traced_metrics("rest", "async")
    traced = Traced(config, "rest", "rest")
    with TestClient(create_app(config, metrics, traced.tracing)) as client:
        _session(client, {"traceparent": UNSAMPLED})
        assert exemplars(registry, DURATION) == []
        _session(client, {"traceparent": PARENT})
    found = [(labels["kind"], e.labels["trace_id"]) for labels, e in exemplars(registry, DURATION)]
    assert found == [("bidi", TRACE_ID)]
    count = registry.get_sample_value(f"{DURATION}_count", {"protocol": "rest", "kind": "bidi"})
    assert count == 2  # two sessions of two pings each


def test_a_rest_relays_client_histogram_carries_the_orders_trace() -> None:
    b = Traced(settings(**ALWAYS), "rest", "rest-b")
    with in_thread(create_app(settings(**ALWAYS), None, b.tracing)) as b_url:
        config = settings(**ALWAYS, downstream=(b_url,))
        metrics, registry = traced_metrics("rest", "async")
        a = Traced(config, "rest", "rest")
        with in_thread(create_app(config, metrics, a.tracing)) as a_url:
            _rest_orders(a_url, {"traceparent": PARENT}, {"traceparent": UNSAMPLED})
    assert trace_ids(registry) == [TRACE_ID]
    assert trace_ids(registry, CLIENT_DURATION) == [TRACE_ID]


async def _grpc_service(config: Settings, traced: Traced, registry: CollectorRegistry) -> Any:
    metrics = ServerMetrics("grpc", registry, "aio")
    metrics.keep_exemplars()
    relay = build_relay(config, "grpc", registry, traced.tracing)
    server, _, port = await build_aio(config, metrics, 0, relay, traced.tracing)
    await server.start()
    return server, relay, f"grpc://127.0.0.1:{port}"


async def test_grpc_calls_carry_their_trace_though_grpc_records_them_elsewhere() -> None:
    """The one-message path (ProcessOrder) and the general one (StreamMessages), each recorded
    in grpc's done callback, outside the call's context."""
    config, registry = settings(**ALWAYS), CollectorRegistry()
    server, _, url = await _grpc_service(config, Traced(config, "grpc", "grpc"), registry)
    try:
        await _order(url, (("traceparent", PARENT),))
        for _ in range(5):
            await _order(url, (("traceparent", UNSAMPLED),))
        async with grpc.aio.insecure_channel(url.removeprefix("grpc://")) as channel:
            stub: Any = pb_grpc.WireLabStub(channel)
            call = stub.StreamMessages(
                pb.StreamRequest(count=2, size=8), metadata=[("traceparent", PARENT)]
            )
            assert len([m async for m in call]) == 2
        # grpc records a call in its done callback, which can run after the client has its last
        # message: the stream's record is awaited before the server stops (a loaded machine
        # stopped it first once, and the stream was never recorded).
        labels = {"protocol": "grpc", "kind": "server_stream"}
        for _ in range(500):
            if registry.get_sample_value(f"{DURATION}_count", labels):
                break
            await asyncio.sleep(0.01)
    finally:
        await server.stop(0)
    kinds = {labels["kind"]: e.labels["trace_id"] for labels, e in exemplars(registry, DURATION)}
    assert kinds == {"unary": TRACE_ID, "server_stream": TRACE_ID}


async def test_a_grpc_relays_client_histogram_carries_the_orders_trace() -> None:
    b_config = settings(**ALWAYS)
    b_server, _, b_url = await _grpc_service(
        b_config, Traced(b_config, "grpc", "grpc-b"), CollectorRegistry()
    )
    config, registry = settings(**ALWAYS, downstream=(b_url,)), CollectorRegistry()
    server, relay, url = await _grpc_service(config, Traced(config, "grpc", "grpc"), registry)
    try:
        await _order(url, (("traceparent", PARENT),))
        await _order(url, (("traceparent", UNSAMPLED),))
    finally:
        await server.stop(0)
        await relay.close()
        await b_server.stop(0)
    assert trace_ids(registry) == [TRACE_ID]
    assert trace_ids(registry, CLIENT_DURATION) == [TRACE_ID]


def test_the_thread_pool_servers_calls_carry_their_trace() -> None:
    config, registry = settings(**ALWAYS, grpc_server="sync"), CollectorRegistry()
    metrics = ServerMetrics("grpc", registry, "sync")
    metrics.keep_exemplars()
    server, _, port = build_sync(config, metrics, 0, Traced(config, "grpc", "grpc").tracing)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub: Any = pb_grpc.WireLabStub(channel)
            request = pb.OrderRequest(order=ORDER.order, count_words=True)
            for parent in (PARENT, *[UNSAMPLED] * 5):
                stub.ProcessOrder(request, timeout=10, metadata=[("traceparent", parent)])
    finally:
        server.stop(0)
    assert trace_ids(registry) == [TRACE_ID]


# The REST service as it runs (uvicorn with the lab's protocol, or Granian over h2c) ------------


@pytest.mark.integration
@pytest.mark.parametrize("http", ["1.1", "2"])
def test_the_rest_service_keeps_one_calls_trace_from_the_next_on_a_connection(
    http: str, tmp_path: Path
) -> None:
    """The trace id a sampled order notes in its context must not reach the unsampled orders
    after it on the same connection: each server runs a request in a context of its own."""
    traced = {
        "WIRELAB_REST_HTTP": http,
        "WIRELAB_TRACES": "on",
        "WIRELAB_TRACE_SAMPLE_RATIO": "1",
        # Nothing listens there: the spans are dropped, the exemplars are what is checked.
        "WIRELAB_TRACES_ENDPOINT": f"http://127.0.0.1:{free_port()}",
    }
    service = start("wirelab.rest", tmp_path, traced)
    try:
        url = f"http://127.0.0.1:{service.port}/v1/orders"
        with httpx.Client(http1=http == "1.1", http2=http == "2", timeout=10) as client:
            for parent in (PARENT, *[UNSAMPLED] * 10):
                answered = client.post(
                    url, json={"order": ORDER_JSON}, headers={"traceparent": parent}
                )
                assert answered.status_code == 200 and answered.http_version == f"HTTP/{http}"
        metrics = f"http://127.0.0.1:{service.metrics_port}/metrics"
        page = httpx.get(metrics, headers={"Accept": PROMETHEUS_ACCEPT}, timeout=10).text
    finally:
        assert service.stop() == 0
    found = [
        sample.exemplar.labels["trace_id"]
        for metric in text_string_to_metric_families(page)  # type: ignore[no-untyped-call]
        if metric.name == DURATION
        for sample in metric.samples
        if sample.exemplar is not None
    ]
    assert found == [TRACE_ID]


# The AMQP arm: the edge's call through the broker and the consumer's handling ----------------


async def test_an_amqp_order_carries_its_trace_at_the_edges_call_and_the_consumer() -> None:
    """The consumer, run as aio-pika runs it (a task per delivery), records each order with the
    trace its message brought, an unsampled one none; the edge's call through the broker is its
    client histogram's exemplar."""
    edge = Traced(settings(**ALWAYS), "grpc", "amqp")
    consumer_traced = Traced(settings(**ALWAYS), "amqp", "amqp-product")
    registry, edge_registry = CollectorRegistry(), CollectorRegistry()
    metrics = ServerMetrics("amqp", registry, "asyncio")
    metrics.keep_exemplars()
    consumer = OrderConsumer(
        settings().limits, metrics, "amqp-product", consumer_traced.tracing.tracer
    )
    consumer.channel = cast(Any, Channel(Exchange()))
    for parent in (PARENT, UNSAMPLED):
        delivery = Delivery(ORDER.SerializeToString(), headers={"traceparent": parent})
        await asyncio.create_task(consumer.handle(cast(AbstractIncomingMessage, delivery)))
    assert trace_ids(registry) == [TRACE_ID]
    address = wire.Address.parse("amqp://127.0.0.1:1/amqp-product")
    broker = Broker(address.connection("u", "p"), [], edge.tracing.tracer)
    to_queue = Exchange()
    _connected(broker, to_queue)
    downstream = AmqpDownstream(address, broker, False, families(edge_registry))
    try:
        with edge.tracing.tracer.start_as_current_span("edge", kind=SpanKind.SERVER) as served:
            call = await downstream.send(ORDER, 5)
            ((order, _, _),) = to_queue.published
            # The consumer's reply, in the order's trace as its headers carry it.
            reply = pb.OrderReply(word_count=3).SerializeToString()
            headers = {"traceparent": order.headers["traceparent"]}
            answer = Delivery(reply, correlation_id=order.correlation_id, headers=headers)
            await broker._reply(cast(AbstractIncomingMessage, answer))
            await call.reply()
    finally:
        broker.connection = address.connection("u", "p")
        await broker.close()
    edge_trace = format(served.get_span_context().trace_id, "032x")
    assert trace_ids(edge_registry, CLIENT_DURATION) == [edge_trace]

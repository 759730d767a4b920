"""Traces (wirelab.traces, docs/traces.md): off, nothing of OpenTelemetry's SDK is loaded; on, one
order relayed over gRPC or AMQP is one trace, each hop's spans parented across the transport by
the W3C context it carries (gRPC metadata, AMQP message headers; REST's headers on the REST
service), each span with the lab's labels, and the head sampling ratio is obeyed downstream."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast

import grpc
import grpc.aio
import httpx
import pytest
from aio_pika.abc import AbstractIncomingMessage
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from wirelab import traces
from wirelab.amqp import wire
from wirelab.amqp.consumer import OrderConsumer
from wirelab.hops import build_relay
from wirelab.hops.via_amqp import AmqpDownstream, Broker
from wirelab.metrics import SAMPLED, ServerMetrics
from wirelab.rest.app import create_app
from wirelab.rpc.kinds import METHOD_KINDS
from wirelab.rpc.server import build_aio, build_sync
from wirelab.settings import Settings
from wirelab.traces.asgi import TracingMiddleware
from wirelab.traces.spans import Starter
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.services.conftest import settings
from tests.services.served import in_thread
from tests.services.test_amqp import ORDER, Channel, Delivery, Exchange, _connected

# Every trace kept: which spans exist is then up to the code, not to chance.
ALWAYS = {"traces": True, "trace_sample_ratio": 1.0}
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SMALL = {"order_id": "o-1", "items": [{"sku": "a", "quantity": 1, "unit_price_cents": 1}]}


@pytest.fixture(autouse=True)
def own_sampled() -> Iterator[None]:
    """The test thread's wirelab.metrics.SAMPLED as it was before each test: a kept span started
    in this thread (Starter.serve called directly) notes its trace id there, and a later test's
    TestClient runs its app in a copy of this thread's context, so its calls would take that
    trace id for their own exemplars."""
    token = SAMPLED.set(None)
    yield
    SAMPLED.reset(token)


class Traced:
    """A service's tracing with its spans kept in memory."""

    def __init__(
        self, config: Settings, protocol: str, service: str, kind_of: traces.KindOf | None = None
    ) -> None:
        self.exporter = InMemorySpanExporter()
        made = traces.start(config, protocol, kind_of, service=service, exporter=self.exporter)
        assert made is not None
        self.tracing = made

    def spans(self) -> list[ReadableSpan]:
        self.tracing.provider.force_flush()
        return list(self.exporter.get_finished_spans())

    def one(self, kind: SpanKind, name: str | None = None) -> ReadableSpan:
        found = [s for s in self.spans() if s.kind == kind and name in (None, s.name)]
        assert len(found) == 1, [(s.name, s.kind) for s in self.spans()]
        return found[0]


def _child_of(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None and parent.context is not None
    return bool(child.parent.span_id == parent.context.span_id)


def _trace(spans: Sequence[ReadableSpan]) -> set[int]:
    return {s.context.trace_id for s in spans if s.context is not None}


def fresh_python(code: str) -> str:
    """What ``code`` prints, run in an interpreter of its own: what it imports, and a global
    tracer provider it sets, stay there."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_off_loads_nothing_of_the_sdk() -> None:
    """WIRELAB_TRACES=off (the default): both services are built without importing
    OpenTelemetry's SDK or an instrumentation, so tracing off costs nothing."""
    code = (
        "import sys, asyncio\n"
        "from wirelab.settings import Settings\n"
        "from wirelab.rest.app import create_app\n"
        "from wirelab.rpc.server import build_aio\n"
        "from wirelab.traces import start\n"
        "assert start(Settings(), 'rest') is None\n"
        "create_app(Settings())\n"
        "async def grpc():\n"
        "    server, _, _ = await build_aio(Settings(), None, 0)\n"
        "    await server.stop(0)\n"
        "asyncio.run(grpc())\n"
        "loaded = [m for m in sys.modules if m.startswith(('opentelemetry.sdk',"
        " 'opentelemetry.instrumentation', 'opentelemetry.exporter'))]\n"
        "print(loaded)\n"
    )
    assert fresh_python(code).strip() == "[]"


def test_fastapi_makes_no_spans_of_its_own() -> None:
    """The REST service's spans are the lab's alone: with a global tracer provider set (a user's
    OpenTelemetry setup), FastAPI's own telemetry, on by default since 0.165, makes no span of a
    call through the service's app, where it does through a bare FastAPI app beside it."""
    code = (
        "from fastapi import FastAPI\n"
        "from fastapi.testclient import TestClient\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from wirelab.rest.app import create_app\n"
        "from wirelab.settings import Settings\n"
        "spans = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(spans))\n"
        "trace.set_tracer_provider(provider)\n"
        "bare = FastAPI()\n"
        "bare.post('/v1/orders')(lambda: {})\n"
        f"order = {SMALL!r}\n"
        "counts = []\n"
        "for app in (create_app(Settings()), bare):\n"
        "    with TestClient(app) as client:\n"
        "        assert client.post('/v1/orders', json=order).status_code == 200\n"
        "    counts.append(len(spans.get_finished_spans()))\n"
        "    spans.clear()\n"
        "print(*counts)\n"
    )
    printed = fresh_python(code)
    ours, bare = printed.split()
    assert (ours, int(bare) > 0) == ("0", True), printed


@pytest.mark.parametrize(("text", "ok"), [("0", True), ("0.25", True), ("1", True), ("1.5", False)])
def test_the_ratio_is_a_share(text: str, ok: bool) -> None:
    knob = next(k for k in traces_knobs() if k.name == "trace_sample_ratio")
    if ok:
        assert knob.parse(text) == float(text)
    else:
        with pytest.raises(ValueError, match="WIRELAB_TRACE_SAMPLE_RATIO must be a number from 0"):
            knob.parse(text)


def traces_knobs() -> list[Any]:
    from wirelab.contract.knobs import KNOBS

    return [k for k in KNOBS if k.name in {"traces", "trace_sample_ratio", "traces_endpoint"}]


# REST -------------------------------------------------------------------------------------


def test_a_rest_call_continues_its_callers_trace_with_the_labs_labels() -> None:
    traced = Traced(settings(**ALWAYS), "rest", "rest-b")
    app = create_app(settings(**ALWAYS), None, traced.tracing)
    order = {"order_id": "o-1", "items": [{"sku": "a", "quantity": 1, "unit_price_cents": 1}]}
    with TestClient(app) as client:
        answered = client.post("/v1/orders", json={"order": order}, headers={"traceparent": PARENT})
        assert answered.status_code == 200
        assert client.get("/healthz").status_code == 200  # untraced
    server = traced.one(SpanKind.SERVER)
    assert server.name == "POST /v1/orders"
    assert server.context is not None and server.parent is not None
    assert f"{server.context.trace_id:032x}" == PARENT.split("-")[1]
    assert f"{server.parent.span_id:016x}" == PARENT.split("-")[2]
    assert dict(server.attributes or {}) | {
        "wirelab.protocol": "rest",
        "wirelab.kind": "unary",
        "wirelab.service": "rest-b",
        "wirelab.runtime": "python",
    } == dict(server.attributes or {})
    assert server.resource.attributes["service.name"] == "rest-b"


@contextmanager
def rest_hop(config: Settings, traced: Traced) -> Iterator[str]:
    """A REST service (a relay when ``config`` has downstreams) on uvicorn in a thread of its
    own, on a free loopback port, traced by ``traced``."""
    with in_thread(create_app(config, None, traced.tracing)) as url:
        yield url


def _rest_order(url: str, headers: dict[str, str] | None = None) -> None:
    order = {"order_id": "o-1", "items": [{"sku": "a", "quantity": 1, "unit_price_cents": 1}]}
    answered = httpx.post(f"{url}/v1/orders", json={"order": order}, headers=headers, timeout=10)
    assert answered.status_code == 200, answered.text


@pytest.mark.parametrize("client", ["aiohttp", "httpx"])
def test_a_rest_relay_call_is_one_trace_across_both_hops(client: str) -> None:
    b = Traced(settings(**ALWAYS), "rest", "rest-b")
    with rest_hop(settings(**ALWAYS), b) as b_url:
        relay = settings(**ALWAYS, downstream=(b_url,), rest_client=client)
        a = Traced(relay, "rest", "rest")
        with rest_hop(relay, a) as a_url:
            _rest_order(a_url)
    a_server, a_client = a.one(SpanKind.SERVER), a.one(SpanKind.CLIENT)
    b_server = b.one(SpanKind.SERVER)
    assert len(_trace([a_server, a_client, b_server])) == 1
    assert _child_of(a_client, a_server) and _child_of(b_server, a_client)
    assert a_client.name == "POST /v1/orders"
    assert (a_client.attributes or {})["http.response.status_code"] == 200
    assert (b_server.attributes or {})["wirelab.service"] == "rest-b"


def test_an_unsampled_rest_edge_keeps_its_downstream_unsampled() -> None:
    b = Traced(settings(**ALWAYS), "rest", "rest-b")
    with rest_hop(settings(**ALWAYS), b) as b_url:
        never = settings(traces=True, trace_sample_ratio=0.0, downstream=(b_url,))
        a = Traced(never, "rest", "rest")
        with rest_hop(never, a) as a_url:
            _rest_order(a_url)
            _rest_order(a_url)
    assert a.spans() == [] and b.spans() == []


# A caller's "not sampled" traceparent, the trace id of PARENT.
UNSAMPLED = PARENT[:-2] + "00"


def _session(client: TestClient, headers: dict[str, str]) -> None:
    """A WebSocket session of two pings on ``client``'s REST service."""
    with client.websocket_connect("/v1/pingpong", headers=headers) as ws:
        for seq in (1, 2):
            ws.send_text(f'{{"seq": {seq}}}')
            assert ws.receive_json() == {"seq": seq, "payload": ""}


def test_a_websocket_session_is_one_span_in_its_callers_trace() -> None:
    """A session of pings is one server span, named for its upgrade request, its parent the
    upgrade's ``traceparent``, with the HTTP attributes, the metrics' kind and the handshake's
    101; a session on a path that is no route is refused (403, kind other); /healthz untraced."""
    traced = Traced(settings(**ALWAYS), "rest", "rest")
    with TestClient(create_app(settings(**ALWAYS), None, traced.tracing)) as client:
        _session(client, {"traceparent": PARENT})
        with pytest.raises(WebSocketDisconnect), client.websocket_connect("/v1/nowhere"):
            pass
        assert client.get("/healthz").status_code == 200
    spans = {s.name: s for s in traced.spans()}
    assert sorted(spans) == ["GET /v1/nowhere", "GET /v1/pingpong"]
    session = spans["GET /v1/pingpong"]
    assert session.kind == SpanKind.SERVER
    assert session.context is not None and session.parent is not None
    assert f"{session.context.trace_id:032x}" == PARENT.split("-")[1]
    assert f"{session.parent.span_id:016x}" == PARENT.split("-")[2]
    assert dict(session.attributes or {}) == {
        "http.request.method": "GET",
        "url.path": "/v1/pingpong",
        "url.scheme": "http",
        "http.route": "/v1/pingpong",
        "network.protocol.version": "1.1",
        "http.response.status_code": 101,
        "wirelab.kind": "bidi",
        "wirelab.protocol": "rest",
        "wirelab.service": "rest",
        "wirelab.runtime": "python",
    }
    assert session.status.status_code == StatusCode.UNSET
    refused = dict(spans["GET /v1/nowhere"].attributes or {})
    assert refused["http.response.status_code"] == 403 and refused["wirelab.kind"] == "other"


@pytest.mark.parametrize(
    ("ratio", "headers"), [(1.0, {"traceparent": PARENT[:-2] + "00"}), (0.0, {})]
)
def test_an_unsampled_websocket_session_makes_no_span(
    ratio: float, headers: dict[str, str]
) -> None:
    config = settings(traces=True, trace_sample_ratio=ratio)
    traced = Traced(config, "rest", "rest")
    with TestClient(create_app(config, None, traced.tracing)) as client:
        _session(client, headers)
    assert traced.spans() == []


@pytest.mark.parametrize("close", [True, False])
def test_a_websocket_session_that_fails_is_an_error(close: bool) -> None:
    """A session the app ends with an exception, or closes as an internal error (1011), is an
    error span; it was accepted, 101."""

    async def failing(websocket: WebSocket) -> None:
        await websocket.accept()
        if close:
            await websocket.close(code=1011)
            return
        raise RuntimeError("the app failed")

    traced = Traced(settings(**ALWAYS), "rest", "rest")
    assert traced.tracing is not None
    app = TracingMiddleware(
        Starlette(routes=[WebSocketRoute("/ws", failing)]),
        traced.tracing.starter,
        {},
        {"/ws": "bidi"},
    )
    expected = WebSocketDisconnect if close else RuntimeError
    with TestClient(app) as client, pytest.raises(expected), client.websocket_connect("/ws") as ws:
        ws.receive_text()
    span = traced.one(SpanKind.SERVER, "GET /ws")
    assert (span.attributes or {})["http.response.status_code"] == 101
    assert span.status.status_code == StatusCode.ERROR


def test_a_rest_relay_sends_its_callers_unsampled_flag_on() -> None:
    """A relay that keeps every trace it begins follows a caller that sampled none, and so does
    its downstream: no span anywhere (without the relay's context made current, its client
    would send no traceparent and the downstream would begin a trace of its own)."""
    b = Traced(settings(**ALWAYS), "rest", "rest-b")
    with rest_hop(settings(**ALWAYS), b) as b_url:
        relay = settings(**ALWAYS, downstream=(b_url,))
        a = Traced(relay, "rest", "rest")
        with rest_hop(relay, a) as a_url:
            _rest_order(a_url, {"traceparent": UNSAMPLED})
            _rest_order(a_url)  # and a call without one is kept, through both hops
    assert len(a.spans()) == 2 and len(b.spans()) == 1
    (kept,) = _trace(a.spans() + b.spans())
    assert kept != int(PARENT.split("-")[1], 16)


# gRPC -------------------------------------------------------------------------------------


@asynccontextmanager
async def grpc_hop(config: Settings, traced: Traced) -> AsyncIterator[str]:
    """A gRPC service (a relay when ``config`` has downstreams) traced by ``traced``."""
    registry = CollectorRegistry()
    relay = build_relay(config, "grpc", registry, traced.tracing)
    metrics = ServerMetrics("grpc", registry, "aio")
    server, _, port = await build_aio(config, metrics, 0, relay, traced.tracing)
    await server.start()
    try:
        yield f"grpc://127.0.0.1:{port}"
    finally:
        await server.stop(0)
        if relay is not None:
            await relay.close()


async def _order(url: str, metadata: tuple[tuple[str, str], ...] = ()) -> pb.OrderReply:
    async with grpc.aio.insecure_channel(url.removeprefix("grpc://")) as channel:
        stub: Any = pb_grpc.WireLabStub(channel)
        request = pb.OrderRequest(order=ORDER.order, count_words=True)
        reply: pb.OrderReply = await stub.ProcessOrder(request, timeout=10, metadata=metadata)
        return reply


async def test_a_grpc_relay_call_is_one_trace_across_both_hops() -> None:
    kind_of = traces.grpc_kind(METHOD_KINDS)
    b, a = Traced(settings(**ALWAYS), "grpc", "grpc-b", kind_of), None
    async with grpc_hop(settings(**ALWAYS), b) as b_url:
        relay = settings(**ALWAYS, downstream=(b_url,))
        a = Traced(relay, "grpc", "grpc", kind_of)
        async with grpc_hop(relay, a) as a_url:
            assert (await _order(a_url)).word_count == 3
    a_server, a_client = a.one(SpanKind.SERVER), a.one(SpanKind.CLIENT)
    b_server = b.one(SpanKind.SERVER)
    assert len(_trace([a_server, a_client, b_server])) == 1
    assert a_server.parent is None  # the edge began it: no traceparent came with the call
    assert _child_of(a_client, a_server) and _child_of(b_server, a_client)
    for span, service in ((a_server, "grpc"), (a_client, "grpc"), (b_server, "grpc-b")):
        assert span.name == "/wirelab.v1.WireLab/ProcessOrder"
        labels = {k: v for k, v in (span.attributes or {}).items() if k.startswith("wirelab.")}
        assert labels == {
            "wirelab.protocol": "grpc",
            "wirelab.kind": "unary",
            "wirelab.service": service,
            "wirelab.runtime": "python",
        }


async def test_a_grpc_stream_is_one_span_of_its_kind_in_its_callers_trace() -> None:
    b = Traced(settings(**ALWAYS), "grpc", "grpc-b")
    async with grpc_hop(settings(**ALWAYS), b) as url:
        channel = grpc.aio.insecure_channel(url.removeprefix("grpc://"))
        stub: Any = pb_grpc.WireLabStub(channel)
        request = pb.StreamRequest(count=3, size=8)
        call = stub.StreamMessages(request, metadata=[("traceparent", PARENT)])
        assert len([m async for m in call]) == 3
        await channel.close()
    span = b.one(SpanKind.SERVER)
    assert span.name == "/wirelab.v1.WireLab/StreamMessages"
    assert (span.attributes or {})["wirelab.kind"] == "server_stream"
    assert (span.attributes or {})["rpc.grpc.status_code"] == 0
    assert span.context is not None and f"{span.context.trace_id:032x}" == PARENT.split("-")[1]


def _served(starter: Starter, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names Starter.serve is asked for from now on, in order."""
    served: list[str] = []

    def serve(name: str, carrier: Any) -> Any:
        served.append(name)
        return Starter.serve(starter, name, carrier)

    monkeypatch.setattr(starter, "serve", serve)
    return served


def _kept_at_the_ratio(kept: int, served: list[str], ratio: float) -> None:
    """``kept`` spans of 400 calls (20 at ratio 0), serve asked only for those (the decision
    made once, before it)."""
    assert kept == len(served)
    if ratio == 0:
        assert kept == 0
    else:
        assert 150 < kept < 250, kept  # half of 400, give or take five standard deviations


@pytest.mark.parametrize(("ratio", "calls"), [(0.0, 20), (0.5, 400)])
async def test_the_aio_lookup_decides_and_a_skipped_call_runs_no_tracing_code(
    ratio: float, calls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measured aio server's lookup asks the sampler (rpc.measure._SampledLookup): a new
    trace it does not keep runs the untraced handler, so the traced hook never starts for it;
    one it keeps starts its span on the lookup's draw, so new traces are kept at the ratio, not
    at its square (0.25 here, if the hook drew again)."""
    config = settings(traces=True, trace_sample_ratio=ratio)
    b = Traced(config, "grpc", "grpc-b")
    served = _served(b.tracing.starter, monkeypatch)
    request = pb.OrderRequest(order=ORDER.order, count_words=True)
    async with grpc_hop(config, b) as url, grpc.aio.insecure_channel(url[7:]) as channel:
        stub: Any = pb_grpc.WireLabStub(channel)
        for _ in range(calls):
            await stub.ProcessOrder(request, timeout=10)
    _kept_at_the_ratio(len(b.spans()), served, ratio)


@pytest.mark.parametrize(("ratio", "calls"), [(0.0, 20), (0.5, 400)])
def test_the_rest_middleware_decides_first_and_a_skipped_call_makes_no_span(
    ratio: float, calls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REST's middleware asks the sampler before anything else (wirelab.traces.asgi): a new
    trace it does not keep, in a service without downstreams, never reaches Starter.serve; one
    it keeps starts its span on that same draw, so new traces are kept at the ratio, not at its
    square (0.25 here, if serve drew again)."""
    config = settings(traces=True, trace_sample_ratio=ratio)
    traced = Traced(config, "rest", "rest")
    served = _served(traced.tracing.starter, monkeypatch)
    with TestClient(create_app(config, None, traced.tracing)) as client:
        for _ in range(calls):
            assert client.post("/v1/orders", json={"order": SMALL}).status_code == 200
    _kept_at_the_ratio(len(traced.spans()), served, ratio)


def test_the_thread_pool_server_traces_its_calls_too() -> None:
    config = settings(**ALWAYS, grpc_server="sync")
    b = Traced(config, "grpc", "grpc-b")
    server, _, port = build_sync(config, None, 0, b.tracing)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub: Any = pb_grpc.WireLabStub(channel)
            request = pb.OrderRequest(order=ORDER.order, count_words=True)
            stub.ProcessOrder(request, timeout=10, metadata=[("traceparent", PARENT)])
    finally:
        server.stop(0)
    span = b.one(SpanKind.SERVER)
    assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT.split("-")[2]
    assert (span.attributes or {})["wirelab.kind"] == "unary"


async def test_the_edges_sampling_decision_holds_downstream() -> None:
    """Head sampling: an edge at ratio 0 keeps no trace, and its downstream, at ratio 1, follows
    the unsampled ``traceparent`` it is sent rather than starting a trace of its own."""
    b = Traced(settings(**ALWAYS), "grpc", "grpc-b")
    async with grpc_hop(settings(**ALWAYS), b) as b_url:
        never = settings(traces=True, trace_sample_ratio=0.0, downstream=(b_url,))
        a = Traced(never, "grpc", "grpc")
        async with grpc_hop(never, a) as a_url:
            await _order(a_url)
            await _order(a_url)
    assert a.spans() == [] and b.spans() == []


async def test_a_grpc_relay_sends_its_callers_unsampled_flag_on() -> None:
    b = Traced(settings(**ALWAYS), "grpc", "grpc-b")
    async with grpc_hop(settings(**ALWAYS), b) as b_url:
        relay = settings(**ALWAYS, downstream=(b_url,))
        a = Traced(relay, "grpc", "grpc")
        async with grpc_hop(relay, a) as a_url:
            await _order(a_url, (("traceparent", UNSAMPLED),))
            assert a.spans() == [] and b.spans() == []
            await _order(a_url)  # without one, kept through both hops
    assert len(a.spans()) == 2 and len(b.spans()) == 1


async def test_a_grpc_service_without_downstreams_follows_its_callers_flag() -> None:
    """A service that calls nothing makes no context current for an unsampled call: it still
    keeps none of a caller's unsampled trace, and keeps a sampled one."""
    b = Traced(settings(**ALWAYS), "grpc", "grpc-b")
    async with grpc_hop(settings(**ALWAYS), b) as url:
        await _order(url, (("traceparent", UNSAMPLED),))
        assert b.spans() == []
        await _order(url, (("traceparent", PARENT),))
    span = b.one(SpanKind.SERVER)
    assert span.context is not None and f"{span.context.trace_id:032x}" == PARENT.split("-")[1]


# AMQP -------------------------------------------------------------------------------------


def _delivered(message: Any) -> Delivery:
    """A published message as its consumer receives it."""
    return Delivery(
        message.body,
        correlation_id=message.correlation_id,
        reply_to=message.reply_to,
        headers=dict(message.headers),
    )


async def test_an_amqp_order_and_its_reply_are_one_trace_through_the_message_headers() -> None:
    """The edge's publish, the consumer's handling and its reply's publish, and the reply's
    receipt at the edge: one trace, each leg the child of the one before it."""
    edge = Traced(settings(**ALWAYS), "grpc", "amqp")
    consumer_traced = Traced(settings(**ALWAYS), "amqp", "amqp-product")
    address = wire.Address.parse("amqp://127.0.0.1:1/amqp-product")
    broker = Broker(address.connection("u", "p"), [], edge.tracing.tracer)
    to_queue = Exchange()
    _connected(broker, to_queue)
    downstream = AmqpDownstream(address, broker, False, None)
    consumer = OrderConsumer(
        settings().limits, None, "amqp-product", consumer_traced.tracing.tracer
    )
    to_replies = Exchange()
    consumer.channel = cast(Any, Channel(to_replies))
    try:
        with edge.tracing.tracer.start_as_current_span("edge", kind=SpanKind.SERVER) as served:
            call = await downstream.send(ORDER, 5)
            ((order, queue, _),) = to_queue.published
            assert queue == "amqp-product" and "traceparent" in order.headers
            await consumer.handle(cast(AbstractIncomingMessage, _delivered(order)))
            ((reply, _, _),) = to_replies.published
            assert "traceparent" in reply.headers
            await broker._reply(cast(AbstractIncomingMessage, _delivered(reply)))
            assert (await call.reply()).word_count == 3
        assert served.get_span_context().trace_id
    finally:
        broker.connection = address.connection("u", "p")
        await broker.close()
    edge_span = edge.one(SpanKind.SERVER, "edge")
    publish = edge.one(SpanKind.PRODUCER, "publish amqp-product")
    process = consumer_traced.one(SpanKind.CONSUMER, "process amqp-product")
    answer = consumer_traced.one(SpanKind.PRODUCER)
    received = edge.one(SpanKind.CONSUMER)
    legs = [edge_span, publish, process, answer, received]
    assert len(_trace(legs)) == 1
    for child, parent in zip(legs[1:], legs, strict=False):
        assert _child_of(child, parent), (child.name, parent.name)
    assert answer.name == f"publish {broker.reply_to}"
    assert received.name == f"receive {broker.reply_to}"
    attributes = dict(process.attributes or {})
    assert attributes["messaging.system"] == "rabbitmq"
    assert attributes["messaging.destination.name"] == "amqp-product"
    assert attributes["messaging.message.conversation_id"] == call.correlation
    assert attributes["wirelab.protocol"] == "amqp"
    assert attributes["wirelab.service"] == "amqp-product"
    assert attributes["wirelab.kind"] == "unary"


async def test_without_a_tracer_amqp_messages_carry_no_context() -> None:
    consumer = OrderConsumer(settings().limits, None, "amqp-product")
    replies = Exchange()
    consumer.channel = cast(Any, Channel(replies))
    await consumer.handle(cast(AbstractIncomingMessage, Delivery(ORDER.SerializeToString())))
    ((reply, _, _),) = replies.published
    assert "traceparent" not in reply.headers


# The span starter ------------------------------------------------------------------------


def _starter(ratio: float) -> traces.Tracing:
    made = traces.start(
        settings(traces=True, trace_sample_ratio=ratio), "grpc", exporter=InMemorySpanExporter()
    )
    assert made is not None
    return made


def test_a_new_trace_is_kept_as_the_sdks_sampler_would_keep_it() -> None:
    """The starter decides without the SDK; on the same trace id the SDK's TraceIdRatioBased
    decides alike, and a kept trace's span is the SDK's, on that id."""
    from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

    tracing = _starter(0.25)
    sdk = TraceIdRatioBased(0.25)
    kept = 0
    for _ in range(2000):
        span = tracing.starter.start("/wirelab.v1.WireLab/ProcessOrder", None)
        trace_id = span.get_span_context().trace_id
        decided = sdk.should_sample(None, trace_id, "x").decision == Decision.RECORD_AND_SAMPLE
        assert span.is_recording() == decided == span.get_span_context().trace_flags.sampled
        kept += decided
        span.end()
    assert 300 < kept < 700  # a quarter of 2,000, give or take


@pytest.mark.parametrize("sampled", [True, False])
def test_a_callers_decision_is_followed_on_its_trace(sampled: bool) -> None:
    from opentelemetry import propagate

    tracing = _starter(0.0 if sampled else 1.0)
    flags = "01" if sampled else "00"
    parent = propagate.extract({"traceparent": PARENT[:-2] + flags})
    span = tracing.starter.start("/wirelab.v1.WireLab/ProcessOrder", parent)
    assert span.is_recording() == sampled
    assert f"{span.get_span_context().trace_id:032x}" == PARENT.split("-")[1]
    span.end()


def _server(ratio: float, relays: bool) -> traces.Tracing:
    downstream = ("grpc://127.0.0.1:1",) if relays else ()
    config = settings(traces=True, trace_sample_ratio=ratio, downstream=downstream)
    made = traces.start(config, "grpc", exporter=InMemorySpanExporter())
    assert made is not None
    return made


@pytest.mark.parametrize("relays", [False, True])
def test_an_unsampled_call_has_a_context_only_where_a_downstream_reads_it(relays: bool) -> None:
    """Ratio 0: a relay's call makes current a span that carries its new trace's context,
    flagged not sampled, for its downstream calls; a service without downstreams makes
    nothing at all, and its calls' code sees no span."""
    from opentelemetry import context, trace

    served = _server(0.0, relays).starter.serve("/wirelab.v1.WireLab/ProcessOrder", None)
    if not relays:
        assert served is None
        assert not trace.get_current_span().get_span_context().is_valid
        return
    assert served is not None
    span, token = served
    try:
        assert trace.get_current_span() is span and not span.is_recording()
        assert span.get_span_context().is_valid and not span.get_span_context().trace_flags.sampled
    finally:
        context.detach(token)
    assert not trace.get_current_span().get_span_context().is_valid


def test_a_kept_call_without_downstreams_is_current_while_it_runs() -> None:
    """A kept call's span is current (an exemplar reads its trace id), also in a service
    without downstreams, and no longer once its token is detached."""
    from opentelemetry import context, trace

    served = _server(1.0, relays=False).starter.serve("/wirelab.v1.WireLab/ProcessOrder", None)
    assert served is not None
    span, token = served
    assert trace.get_current_span() is span and span.is_recording()
    context.detach(token)
    span.end()
    assert not trace.get_current_span().get_span_context().is_valid


def test_a_service_without_downstreams_decides_as_the_sdks_sampler() -> None:
    """Without downstreams an unsampled call draws only the bits its decision reads (no trace
    id, no span); replaying the same draws, the SDK's TraceIdRatioBased decides each call
    alike on the trace id they make, and a kept call's span is the SDK's on that id."""
    import random

    from opentelemetry import context
    from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

    starter = _server(0.25, relays=False).starter
    sdk = TraceIdRatioBased(0.25)
    kept = 0
    for seed in range(2000):
        random.seed(seed)
        served = starter.serve("/wirelab.v1.WireLab/ProcessOrder", None)
        random.seed(seed)
        low = random.getrandbits(64)
        trace_id = random.getrandbits(64) << 64 | low
        decided = sdk.should_sample(None, trace_id, "x").decision == Decision.RECORD_AND_SAMPLE
        assert (served is not None) == decided
        if served is not None:
            span, token = served
            assert span.is_recording() and span.get_span_context().trace_id == trace_id
            context.detach(token)
            span.end()
            kept += 1
    assert 300 < kept < 700  # a quarter of 2,000, give or take

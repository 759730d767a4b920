"""Relay hops (wirelab.hops): an edge service that sends each order on to downstream services,
on both protocols, against real servers on loopback ports (docs/topologies.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from functools import partial
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
import uvicorn
from prometheus_client import CollectorRegistry
from wirelab import settings as knobs
from wirelab.contract import CLIENT_IDLE_SECONDS
from wirelab.core import split_note
from wirelab.hops import DEADLINE_HEADER, build_relay, via_rest
from wirelab.metrics import ServerMetrics
from wirelab.rest.app import create_app
from wirelab.rpc.server import build_aio
from wirelab.serving import instruments
from wirelab.settings import Settings
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.services.conftest import SMALL, settings, settled, value
from tests.services.served import in_thread

ORDER: dict[str, Any] = {
    "order_id": "o-1",
    "customer_id": "c-1",
    "items": [{"sku": "a", "quantity": 2, "unit_price_cents": 150}],
    "attributes": {"k": "v"},
    "note": "three little words",
}
PEER = "127.0.0.1"
# Room for 2 s of work: a downstream slower than the deadline by a margin no busy machine erases.
SLOW = settings(limits=dataclasses.replace(SMALL, max_work_ms=5000))
# An edge that relays only, so the deadline is spent downstream.
RELAY = dataclasses.replace(SLOW, local_work=False)


@dataclasses.dataclass
class Hop:
    """One running service: where it listens and the registry its metrics go to."""

    url: str
    registry: CollectorRegistry


def _served(registry: CollectorRegistry, protocol: str, outcome: str = "ok") -> float:
    return sum(
        s.value
        for m in registry.collect()
        if m.name == "wirelab_server_requests"
        for s in m.samples
        if s.name.endswith("_total")
        and s.labels["kind"] == "unary"
        and s.labels["outcome"] == outcome
        and s.labels["protocol"] == protocol
    )


def _outgoing(registry: CollectorRegistry, protocol: str, outcome: str) -> float:
    labels = {"protocol": protocol, "kind": "unary", "call": "ProcessOrder", "peer": PEER}
    return value(registry, "wirelab_client_requests_total", **labels, outcome=outcome)


# ------------------------------------------------------------------------------------- REST


@contextmanager
def rest_service(config: Settings) -> Iterator[Hop]:
    """The REST app on uvicorn in a thread of its own, on a free loopback port."""
    registry = CollectorRegistry()
    with in_thread(create_app(config, ServerMetrics("rest", registry, "async"))) as url:
        yield Hop(url, registry)


def _rest_order(
    hop: Hop, work_ms: int = 0, headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {"order": ORDER, "work_ms": work_ms, "count_words": True}
    return httpx.post(f"{hop.url}/v1/orders", json=body, headers=headers, timeout=10)


@pytest.fixture(scope="module")
def rest_b() -> Iterator[Hop]:
    with rest_service(SLOW) as hop:
        yield hop


# Bound and never listening for the whole module, so a connection to it is refused: a port
# closed again at once could be taken by a test running beside this one (a flake under -n 2).
_NOT_LISTENING = socket.socket()
_NOT_LISTENING.bind(("127.0.0.1", 0))


def _closed_port() -> int:
    return int(_NOT_LISTENING.getsockname()[1])


# The relay's HTTP client (WIRELAB_REST_CLIENT): every REST relay case runs with each.
@pytest.fixture(params=["aiohttp", "httpx"])
def client(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_rest_a_answers_with_b_reply_and_both_hops_count_it(rest_b: Hop, client: str) -> None:
    direct = _rest_order(rest_b)
    before = _served(rest_b.registry, "rest")
    config = settings(downstream=(rest_b.url,), local_work=False, rest_client=client)
    with rest_service(config) as a:
        relayed = _rest_order(a)
        assert relayed.status_code == 200, relayed.text
        assert relayed.json() == direct.json()
        assert _served(rest_b.registry, "rest") == before + 1
        assert _served(a.registry, "rest") == 1
        assert _outgoing(a.registry, "rest", "ok") == 1
        duration = "wirelab_client_request_duration_seconds_count"
        labels = {"protocol": "rest", "kind": "unary", "call": "ProcessOrder", "peer": PEER}
        assert value(a.registry, duration, **labels) == 1
        assert value(a.registry, "wirelab_client_response_bytes_sum", **labels) == len(
            direct.content
        )


def test_rest_bad_input_stops_at_the_edge(rest_b: Hop, client: str) -> None:
    before = _served(rest_b.registry, "rest") + _served(rest_b.registry, "rest", "client_error")
    with rest_service(settings(downstream=(rest_b.url,), rest_client=client)) as a:
        refused = _rest_order(a, work_ms=10**6)
        assert refused.status_code == 413
        assert "work_ms" in refused.json()["detail"]
        bad_deadline = _rest_order(a, headers={DEADLINE_HEADER: "soon"})
        assert bad_deadline.status_code == 400
        assert DEADLINE_HEADER in bad_deadline.json()["detail"]
        assert sum(_outgoing(a.registry, "rest", o) for o in ("ok", "client_error")) == 0
    after = _served(rest_b.registry, "rest") + _served(rest_b.registry, "rest", "client_error")
    assert after == before


def test_rest_downstream_down_is_502_naming_it(client: str) -> None:
    down = f"http://127.0.0.1:{_closed_port()}"
    with rest_service(settings(downstream=(down,), rest_client=client)) as a:
        answer = _rest_order(a)
        assert answer.status_code == 502
        assert answer.json()["detail"].startswith(f"downstream {PEER} is unavailable")
        assert _outgoing(a.registry, "rest", "connection_error") == 1
        assert _served(a.registry, "rest", "server_error") == 1


def test_rest_slow_downstream_is_504_within_the_budget(rest_b: Hop, client: str) -> None:
    config = dataclasses.replace(
        RELAY, downstream=(rest_b.url,), downstream_timeout_seconds=0.3, rest_client=client
    )
    with rest_service(config) as a:
        started = time.perf_counter()
        answer = _rest_order(a, work_ms=2000)
        assert time.perf_counter() - started < 1.5
        assert answer.status_code == 504
        assert "did not answer in time" in answer.json()["detail"]
        assert _outgoing(a.registry, "rest", "timeout") == 1
        assert _served(a.registry, "rest", "timeout") == 1


def test_rest_the_callers_deadline_bounds_the_downstream_call(rest_b: Hop, client: str) -> None:
    config = dataclasses.replace(RELAY, downstream=(rest_b.url,), rest_client=client)
    with rest_service(config) as a:
        started = time.perf_counter()
        answer = _rest_order(a, work_ms=2000, headers={DEADLINE_HEADER: "300"})
        assert time.perf_counter() - started < 1.5
        assert answer.status_code == 504
        assert _outgoing(a.registry, "rest", "timeout") == 1


async def _client_port(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that answers with the port its caller's connection comes from."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    port = str(scope["client"][1]).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": port})


def test_rest_relays_drop_a_connection_before_the_server_would(client: str) -> None:
    """An order sent on a connection the server is closing for idleness gets no reply, a 502 a
    POST cannot retry: the relay's client closes an idle connection first (via_rest.py)."""
    assert uvicorn.Config(_client_port).timeout_keep_alive > CLIENT_IDLE_SECONDS

    async def ports(url: str, idle: float) -> list[bytes]:
        pooled = via_rest.CLIENTS[client](idle=idle)
        try:
            answered = []
            for pause in (0, 0, idle + 0.5):
                await asyncio.sleep(pause)
                status, body, _ = await pooled.post(url, b"{}", {}, timeout=10)
                assert status == 200
                answered.append(body)
            return answered
        finally:
            await pooled.close()

    with in_thread(_client_port) as url:
        first, kept, after_idle = asyncio.run(ports(url, idle=1.0))
    assert first == kept != after_idle


# ------------------------------------------------------------------------------------- gRPC


@asynccontextmanager
async def grpc_service(config: Settings) -> AsyncIterator[Hop]:
    registry = CollectorRegistry()
    relay = build_relay(config, "grpc", registry)
    server, _, port = await build_aio(config, ServerMetrics("grpc", registry, "aio"), 0, relay)
    await server.start()
    try:
        yield Hop(f"grpc://127.0.0.1:{port}", registry)
    finally:
        await server.stop(0)
        if relay is not None:
            await relay.close()


def _grpc_request(work_ms: int = 0) -> pb.OrderRequest:
    items = [pb.LineItem(**i) for i in ORDER["items"]]
    order = pb.Order(**{**ORDER, "items": items})
    return pb.OrderRequest(order=order, work_ms=work_ms, count_words=True)


async def _grpc_order(hop: Hop, work_ms: int = 0, timeout: float = 10) -> pb.OrderReply:
    async with grpc.aio.insecure_channel(hop.url.removeprefix("grpc://")) as channel:
        stub: Any = pb_grpc.WireLabStub(channel)
        reply: pb.OrderReply = await stub.ProcessOrder(_grpc_request(work_ms), timeout=timeout)
        return reply


async def _grpc_status(hop: Hop, work_ms: int = 0, timeout: float = 10) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await _grpc_order(hop, work_ms, timeout)
    return raised.value


async def test_grpc_a_answers_with_b_reply_and_both_hops_count_it() -> None:
    async with grpc_service(settings()) as b:
        direct = await _grpc_order(b)
        async with grpc_service(settings(downstream=(b.url,), local_work=False)) as a:
            assert await _grpc_order(a) == direct
            # A gRPC call is recorded just after its reply is sent (conftest.settled).
            assert await settled(lambda: _served(b.registry, "grpc"), 2) == 2
            assert await settled(lambda: _served(a.registry, "grpc"), 1) == 1
            assert _outgoing(a.registry, "grpc", "ok") == 1
            labels = {"protocol": "grpc", "kind": "unary", "call": "ProcessOrder", "peer": PEER}
            sent = value(a.registry, "wirelab_client_request_bytes_sum", **labels)
            assert sent == _grpc_request().ByteSize()


@pytest.mark.parametrize("balancing", ["round_robin", "pick_first"])
async def test_grpc_one_service_behind_several_addresses(balancing: str) -> None:
    """``grpc://a+b+c#peer``: the cluster's replicas each behind a proxy of its own (under
    netem, docs/network.md). round_robin spreads the orders over every address, pick_first keeps
    to the first (the pitfall arm, as with one name of several addresses); one peer label."""
    async with (
        grpc_service(settings()) as b1,
        grpc_service(settings()) as b2,
        grpc_service(settings()) as b3,
    ):
        bs = (b1, b2, b3)
        via = "+".join(b.url.removeprefix("grpc://").replace("127.0.0.1", "localhost") for b in bs)
        relay = dataclasses.replace(RELAY, downstream=(f"grpc://{via}#grpc-b",))
        async with grpc_service(dataclasses.replace(relay, grpc_balancing=balancing)) as a:
            for _ in range(9):
                await _grpc_order(a)

            def served() -> list[float]:
                return [_served(b.registry, "grpc") for b in bs]

            await settled(lambda: sum(served()), 9)
            # round_robin sends on as each connection becomes ready: [4, 3, 2] is as fair.
            assert served() == [9, 0, 0] if balancing == "pick_first" else all(served())
            peer = {"protocol": "grpc", "kind": "unary", "call": "ProcessOrder", "peer": "grpc-b"}
            assert value(a.registry, "wirelab_client_requests_total", **peer, outcome="ok") == 9


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("grpc://localhost:1+localhost:2", "several addresses name their service with #peer"),
        ("grpc://localhost:1+localhost#b", "'localhost' is not host:port"),
        ("grpc://localhost:1+nowhere.invalid:2#b", "nowhere.invalid does not resolve"),
    ],
)
async def test_grpc_several_addresses_that_cannot_be_dialled_are_refused(
    target: str, said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        build_relay(settings(downstream=(target,)), "grpc", None)


async def test_grpc_bad_input_stops_at_the_edge() -> None:
    async with grpc_service(settings()) as b, grpc_service(settings(downstream=(b.url,))) as a:
        refused = await _grpc_status(a, work_ms=10**6)
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert _served(b.registry, "grpc") + _served(b.registry, "grpc", "client_error") == 0


async def test_grpc_downstream_down_is_unavailable_naming_it() -> None:
    config = settings(downstream=(f"grpc://127.0.0.1:{_closed_port()}",))
    async with grpc_service(config) as a:
        failed = await _grpc_status(a)
        assert failed.code() == grpc.StatusCode.UNAVAILABLE
        assert (failed.details() or "").startswith(f"downstream {PEER} is unavailable")
        assert _outgoing(a.registry, "grpc", "connection_error") == 1


async def test_grpc_slow_downstream_is_deadline_exceeded_within_the_budget() -> None:
    async with grpc_service(SLOW) as b:
        config = dataclasses.replace(RELAY, downstream=(b.url,), downstream_timeout_seconds=0.3)
        async with grpc_service(config) as a:
            started = time.perf_counter()
            failed = await _grpc_status(a, work_ms=2000)
            assert time.perf_counter() - started < 1.5
            assert failed.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "did not answer in time" in (failed.details() or "")
            assert _outgoing(a.registry, "grpc", "timeout") == 1


async def test_grpc_the_callers_deadline_bounds_the_downstream_call() -> None:
    async with (
        grpc_service(SLOW) as b,
        grpc_service(dataclasses.replace(RELAY, downstream=(b.url,))) as a,
    ):
        await _grpc_order(a)  # A's channel to B is open: the deadline is spent on the call only
        failed = await _grpc_status(a, work_ms=2000, timeout=0.3)
        assert failed.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        await asyncio.sleep(0.5)
        # The deadline reached B as grpc-timeout: its call ended at the deadline, not with a reply.
        assert _served(b.registry, "grpc") == 1
        assert (
            _served(b.registry, "grpc", "timeout") + _served(b.registry, "grpc", "cancelled") == 1
        )


# ---------------------------------------------------------------------------------- fan-out


# Long enough that the unit stage's two workers (tests/run) cannot blur in turn and at once.
WORK_MS = 200


async def _fan_out_seconds(protocol: str, urls: Sequence[str], fanout: str) -> float:
    """Seconds one order takes through an edge with local work and ``urls`` downstreams."""
    config = settings(downstream=tuple(urls), fanout=fanout)
    if protocol == "grpc":
        async with grpc_service(config) as a:
            started = time.perf_counter()
            await _grpc_order(a, work_ms=WORK_MS)
            return time.perf_counter() - started
    with rest_service(config) as a:
        started = time.perf_counter()
        assert _rest_order(a, work_ms=WORK_MS).status_code == 200
        return time.perf_counter() - started


@asynccontextmanager
async def _three(protocol: str) -> AsyncIterator[list[Hop]]:
    if protocol == "grpc":
        async with (
            grpc_service(settings()) as one,
            grpc_service(settings()) as two,
            grpc_service(settings()) as three,
        ):
            yield [one, two, three]
    else:
        with (
            rest_service(settings()) as one,
            rest_service(settings()) as two,
            rest_service(settings()) as three,
        ):
            yield [one, two, three]


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
async def test_fan_out_in_turn_or_at_once(protocol: str) -> None:
    """The order-chain shape: 200 ms here and 200 ms at each of three downstreams is an 800 ms
    floor in turn, 200 ms at once. Floors only: a busy machine makes calls slower, never faster;
    at once must still beat in turn by one downstream's work (by two, with 100 ms of work, it
    failed once in eight unit runs on a loaded 2-core machine)."""
    async with _three(protocol) as downstreams:
        urls = [d.url for d in downstreams]
        in_turn = await _fan_out_seconds(protocol, urls, "sequential")
        at_once = await _fan_out_seconds(protocol, urls, "parallel")
        assert in_turn >= 4 * WORK_MS / 1000
        assert WORK_MS / 1000 <= at_once < in_turn - WORK_MS / 1000
        for d in downstreams:
            assert await settled(partial(_served, d.registry, protocol), 2) == 2


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
async def test_split_counts_the_note_across_downstreams(protocol: str) -> None:
    """The primary/replica study's pattern: each downstream counts a piece of the note, the
    edge adds the counts up; the reply is the one a single service gives."""
    async with _three(protocol) as downstreams:
        config = settings(
            downstream=tuple(d.url for d in downstreams), fanout="split", local_work=False
        )
        if protocol == "grpc":
            direct_grpc = await _grpc_order(downstreams[0])
            async with grpc_service(config) as a:
                assert await _grpc_order(a) == direct_grpc
        else:
            direct_rest = _rest_order(downstreams[0]).json()
            with rest_service(config) as a:
                assert _rest_order(a).json() == direct_rest
        # The direct call, then one piece each.
        for d, expected in zip(downstreams, (2, 1, 1), strict=True):
            assert await settled(partial(_served, d.registry, protocol), expected) == expected


@pytest.mark.parametrize(
    ("note", "parts"),
    [
        ("the quick brown fox jumps over the lazy dog", 3),
        ("", 3),
        ("one", 4),
        ("x\u2003y\tz  w", 2),
        ("a b", 1),
        ("  leading and trailing  ", 5),
    ],
)
def test_split_note_cuts_only_between_words(note: str, parts: int) -> None:
    pieces = split_note(note, parts)
    assert len(pieces) == parts
    assert "".join(pieces) == note
    assert sum(len(p.split()) for p in pieces) == len(note.split())


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("protocol", "overrides", "said"),
    [
        ("rest", {"downstream": ("grpc://b:50051",)}, "must be http://"),
        ("rest", {"downstream": ("http://b:8000+c:8000#b",)}, "only a gRPC downstream takes"),
        ("grpc", {"downstream": ("http://b:8000",)}, "must be grpc://"),
        ("rest", {"downstream": ("http://b:8000",), "rest_handlers": "sync"}, "async server"),
        ("grpc", {"downstream": ("grpc://b:50051",), "grpc_server": "sync"}, "async server"),
    ],
)
def test_contradicting_knobs_are_refused(
    protocol: str, overrides: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        build_relay(settings(**overrides), protocol, None)


def test_downstream_knobs_come_from_the_environment() -> None:
    environ = {
        "WIRELAB_DOWNSTREAM": "grpc://p:50051, grpc://c:50051,grpc://s:50051",
        "WIRELAB_FANOUT": "parallel",
        "WIRELAB_LOCAL_WORK": "off",
        "WIRELAB_DOWNSTREAM_TIMEOUT_SECONDS": "3",
        "WIRELAB_GRPC_BALANCING": "round_robin",
    }
    config = knobs.load([], environ=environ)
    assert config.downstream == ("grpc://p:50051", "grpc://c:50051", "grpc://s:50051")
    assert (config.fanout, config.local_work, config.grpc_balancing) == (
        "parallel",
        False,
        "round_robin",
    )
    assert config.downstream_timeout_seconds == 3.0
    assert knobs.load([], environ={}).downstream == ()


@pytest.mark.parametrize("fanout", ["sequential", "parallel", "split"])
def test_a_hop_reports_how_it_calls_its_downstreams(fanout: str, client: str) -> None:
    """The runner's work floor depends on it (wirelab_bench.topology.work_floor_ms), and the
    relay's client library can decide a run's outcome (docs/topologies.md)."""
    hop = settings(downstream=("http://b:8000",), fanout=fanout, rest_client=client)
    metrics = instruments(hop, "rest", "async")
    assert metrics is not None
    info = {"protocol": "rest", "concurrency": "async"}
    labels = {**info, "fanout": fanout, "client": client}
    assert value(metrics.registry, "wirelab_server_info", **labels) == 1
    alone = instruments(settings(fanout=fanout, rest_client=client), "rest", "async")
    assert alone is not None
    assert value(alone.registry, "wirelab_server_info", **info, fanout="none", client="none") == 1
    for downstream, library in (("grpc://b:50051", "grpcio"), ("amqp://mq:5672/q", "aio-pika")):
        grpc_hop = instruments(settings(downstream=(downstream,), fanout=fanout), "grpc", "aio")
        assert grpc_hop is not None
        labels = {"protocol": "grpc", "concurrency": "aio", "fanout": fanout, "client": library}
        assert value(grpc_hop.registry, "wirelab_server_info", **labels) == 1

"""The AMQP arm in-process (docs/broker.md): addresses, the consumer's handling of each delivery
and its metrics, the caller's request/reply, the relay it builds and the knobs. Stand-ins play the
broker here; tests/e2e/test_amqp_arm.py runs the same code against RabbitMQ."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import pytest
from aio_pika.abc import AbstractIncomingMessage
from aio_pika.exceptions import DeliveryError
from pamqp.commands import Basic
from prometheus_client import CollectorRegistry
from wirelab import settings as knobs
from wirelab.amqp import wire
from wirelab.amqp.consumer import OrderConsumer
from wirelab.hops import DownstreamError, build_relay
from wirelab.hops.confirm import FireAndForget, confirmation
from wirelab.hops.outgoing import families
from wirelab.hops.via_amqp import AmqpDownstream, Broker
from wirelab.metrics import ServerMetrics
from wirelab.v1 import wirelab_pb2 as pb

from tests.services.conftest import SMALL, requests, settings, value

ORDER = pb.OrderRequest(
    order=pb.Order(
        order_id="o-1",
        items=[pb.LineItem(sku="a", quantity=2, unit_price_cents=150)],
        note="three little words",
    ),
    count_words=True,
)


@dataclasses.dataclass
class Delivery:
    """A delivered message as the consumer sees it, recording what it did with it."""

    body: bytes
    correlation_id: str | None = "c-1"
    reply_to: str | None = "replies"
    headers: dict[str, Any] = dataclasses.field(default_factory=dict)
    acked: bool = False
    rejected: bool | None = None  # requeue, when rejected

    async def ack(self) -> None:
        self.acked = True

    async def reject(self, requeue: bool = False) -> None:
        self.rejected = requeue


class Exchange:
    """The default exchange: publishes are kept (or refused, as with a lost connection)."""

    def __init__(self, refuse: BaseException | None = None) -> None:
        self.published: list[tuple[Any, str, bool]] = []
        self.refuse = refuse
        self.on_publish: Callable[[Any, str], None] | None = None

    async def publish(self, message: Any, routing_key: str, mandatory: bool = True) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.published.append((message, routing_key, mandatory))
        if self.on_publish is not None:
            self.on_publish(message, routing_key)


@dataclasses.dataclass
class Channel:
    default_exchange: Exchange
    is_closed: bool = False


def _consumer(
    registry: CollectorRegistry | None, exchange: Exchange | None = None
) -> tuple[OrderConsumer, Exchange]:
    metrics = None if registry is None else ServerMetrics("amqp", registry, "asyncio")
    consumer = OrderConsumer(SMALL, metrics)
    exchange = exchange or Exchange()
    consumer.channel = cast(Any, Channel(exchange))
    return consumer, exchange


async def _handle(consumer: OrderConsumer, delivery: Delivery) -> None:
    await consumer.handle(cast(AbstractIncomingMessage, delivery))
    if consumer.metrics is not None:
        consumer.metrics.flush()


def _answer(exchange: Exchange) -> tuple[str, str, bytes]:
    """The one reply sent: its status, message and body."""
    ((message, routing_key, mandatory),) = exchange.published
    assert (routing_key, mandatory) == ("replies", False)
    assert message.correlation_id == "c-1"
    headers = message.headers
    return headers[wire.STATUS_HEADER], headers.get(wire.MESSAGE_HEADER, ""), message.body


# Addresses ----------------------------------------------------------------------------------


def test_an_address_names_a_broker_and_a_queue() -> None:
    a = wire.Address.parse("amqp://rabbitmq:5672/amqp-product")
    assert (a.host, a.port, a.queue) == ("rabbitmq", 5672, "amqp-product")
    assert a.broker == "rabbitmq:5672"
    assert wire.Address.parse("amqp://127.0.0.1/q").port == 5672
    url = a.connection_url("us/er", "p@ss:word")
    assert url.startswith("amqp://us%2Fer:p%40ss%3Aword@rabbitmq:5672/?")
    assert "fail_fast=no" in url


@pytest.mark.parametrize(
    "url", ["http://rabbitmq:5672/q", "amqp://rabbitmq:5672", "amqp://rabbitmq/", "amqp://b/a/b"]
)
def test_a_bad_address_is_refused_with_its_form(url: str) -> None:
    with pytest.raises(ValueError, match="amqp://broker:port/queue"):
        wire.Address.parse(url)


# The consumer -------------------------------------------------------------------------------


async def test_an_order_is_worked_answered_then_acked_and_counted(
    registry: CollectorRegistry,
) -> None:
    consumer, exchange = _consumer(registry)
    body = pb.OrderRequest(order=ORDER.order, work_ms=50, count_words=True).SerializeToString()
    delivery = Delivery(body)
    started = time.perf_counter()
    await _handle(consumer, delivery)
    assert time.perf_counter() - started >= 0.05  # the order's work_ms, awaited
    status, said, answer = _answer(exchange)
    reply = pb.OrderReply.FromString(answer)
    assert (status, said) == ("OK", "")
    assert (reply.order_id, reply.total_cents, reply.word_count) == ("o-1", 300, 3)
    assert delivery.acked and delivery.rejected is None
    labels = {"protocol": "amqp", "kind": "unary"}
    assert requests(registry, "amqp", "unary", "ok", "ack") == 1
    assert value(registry, "wirelab_server_request_bytes_sum", **labels) == len(body)
    assert value(registry, "wirelab_server_response_bytes_sum", **labels) == len(answer)
    assert value(registry, "wirelab_server_request_duration_seconds_sum", **labels) >= 0.05
    assert value(registry, "wirelab_server_requests_in_flight", **labels) == 0


@pytest.mark.parametrize(
    ("body", "expected", "said"),
    [
        (b"\xff\xff not protobuf", "INVALID_ARGUMENT", "not an OrderRequest"),
        (
            pb.OrderRequest(order=ORDER.order, work_ms=10**6).SerializeToString(),
            "RESOURCE_EXHAUSTED",  # over a limit, as the gRPC service answers it
            "work_ms=1000000 is over the limit",
        ),
    ],
    ids=["undecodable", "over-a-limit"],
)
async def test_bad_input_is_dead_lettered_answered_and_counted(
    registry: CollectorRegistry, body: bytes, expected: str, said: str
) -> None:
    consumer, exchange = _consumer(registry)
    delivery = Delivery(body)
    await _handle(consumer, delivery)
    status, message, answer = _answer(exchange)
    assert status == expected and said in message and answer == b""
    assert delivery.rejected is False and not delivery.acked  # to the dead-letter queue
    assert requests(registry, "amqp", "unary", "client_error", "dead_letter") == 1
    # The consumer goes on serving.
    good = Delivery(ORDER.SerializeToString())
    await _handle(consumer, good)
    assert good.acked and requests(registry, "amqp", "unary", "ok", "ack") == 1


async def test_an_order_over_the_order_limit_is_refused_before_it_is_decoded(
    registry: CollectorRegistry,
) -> None:
    consumer, exchange = _consumer(registry)
    delivery = Delivery(b"\x0a" * (SMALL.max_order_bytes + 1))
    await _handle(consumer, delivery)
    status, message, _ = _answer(exchange)
    assert status == "RESOURCE_EXHAUSTED"
    assert message == f"order is over the limit of {SMALL.max_order_bytes} bytes"
    assert delivery.rejected is False
    assert requests(registry, "amqp", "unary", "client_error", "dead_letter") == 1


async def test_a_failure_in_handling_is_dead_lettered_as_nack(
    registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("wirelab.core.process_order_async", broken)
    consumer, exchange = _consumer(registry)
    delivery = Delivery(ORDER.SerializeToString())
    await _handle(consumer, delivery)
    status, message, _ = _answer(exchange)
    assert (status, message) == ("INTERNAL", "RuntimeError: a bug")
    assert delivery.rejected is False
    assert requests(registry, "amqp", "unary", "server_error", "nack") == 1


async def test_an_order_whose_reply_cannot_be_sent_is_left_for_redelivery(
    registry: CollectorRegistry,
) -> None:
    consumer, _ = _consumer(registry, Exchange(refuse=ConnectionError("broker gone")))
    delivery = Delivery(ORDER.SerializeToString())
    await _handle(consumer, delivery)
    # Neither acked nor rejected: the broker requeues it when the channel goes.
    assert not delivery.acked and delivery.rejected is None
    assert requests(registry, "amqp", "unary", "cancelled", "requeue") == 1


async def test_an_order_without_reply_to_is_worked_and_acked_with_metrics_off() -> None:
    consumer, exchange = _consumer(None)
    delivery = Delivery(ORDER.SerializeToString(), reply_to=None)
    await _handle(consumer, delivery)
    assert delivery.acked and exchange.published == []


# The caller ---------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    """A Broker whose broker never answers: it keeps trying in the background."""
    address = wire.Address.parse(f"amqp://127.0.0.1:{_closed_port()}/q")
    connection = address.connection("u", "p")
    made = Broker(connection, [])
    yield made
    made.connection = connection  # a test may have put a stand-in there
    await made.close()


@dataclasses.dataclass
class Connected:
    connected: asyncio.Event
    is_closed: bool = False


def _connected(broker: Broker, exchange: Exchange) -> None:
    """Stand-ins for the broker's connection and channel: calls go to ``exchange``."""
    ready = asyncio.Event()
    ready.set()
    broker.connection = cast(Any, Connected(ready))
    broker.channel = cast(Any, Channel(exchange))


def _downstream(broker: Broker, registry: CollectorRegistry) -> AmqpDownstream:
    address = wire.Address.parse("amqp://rabbitmq:5672/amqp-product")
    return AmqpDownstream(address, broker, True, families(registry))


def _client(registry: CollectorRegistry, outcome: str, peer: str = "amqp-product") -> float:
    return value(
        registry,
        "wirelab_client_requests_total",
        protocol="amqp",
        kind="unary",
        call="ProcessOrder",
        peer=peer,
        outcome=outcome,
    )


async def test_without_a_broker_a_call_fails_at_once_as_unavailable(
    broker: Broker, registry: CollectorRegistry
) -> None:
    downstream = _downstream(broker, registry)
    started = time.perf_counter()
    with pytest.raises(DownstreamError) as failed:
        await downstream.order(ORDER, timeout=5)
    assert time.perf_counter() - started < 1
    assert (failed.value.peer, failed.value.reason) == ("amqp-product", "unavailable")
    assert "no connection to the broker" in failed.value.message
    assert _client(registry, "connection_error") == 1
    assert broker.pending == {}


def _replying(broker: Broker, exchange: Exchange, status: str, body: bytes, said: str) -> None:
    """The consumer's part: each published order gets this reply on the caller's queue."""

    def reply(message: Any, queue: str) -> None:
        assert queue == "amqp-product" and message.reply_to == broker.reply_to
        answer = wire.reply(body, message.correlation_id, status, said)
        asyncio.get_running_loop().create_task(broker._reply(cast(Any, answer)))

    exchange.on_publish = reply


async def test_a_reply_answers_the_call_that_published_it(
    broker: Broker, registry: CollectorRegistry
) -> None:
    exchange = Exchange()
    _connected(broker, exchange)
    expected = pb.OrderReply(order_id="o-1", total_cents=300)
    _replying(broker, exchange, "OK", expected.SerializeToString(), "")
    reply = await _downstream(broker, registry).order(ORDER, timeout=5)
    assert reply == expected
    ((message, _, mandatory),) = exchange.published
    assert mandatory and message.body == ORDER.SerializeToString()
    assert message.delivery_mode == 2  # persistent
    assert 0 < int(message.expiration) <= 5000  # the budget, in milliseconds, as a TTL
    assert _client(registry, "ok") == 1 and broker.pending == {}
    sent = value(
        registry,
        "wirelab_client_request_bytes_sum",
        protocol="amqp",
        kind="unary",
        call="ProcessOrder",
        peer="amqp-product",
    )
    assert sent == ORDER.ByteSize()


async def test_a_refusal_is_a_failed_downstream_counted_by_its_status(
    broker: Broker, registry: CollectorRegistry
) -> None:
    exchange = Exchange()
    _connected(broker, exchange)
    _replying(broker, exchange, "INVALID_ARGUMENT", b"", "not an OrderRequest")
    with pytest.raises(DownstreamError, match="INVALID_ARGUMENT not an OrderRequest") as failed:
        await _downstream(broker, registry).order(ORDER, timeout=5)
    assert failed.value.reason == "failed"
    assert _client(registry, "client_error") == 1


async def test_no_reply_within_the_budget_is_a_timeout(
    broker: Broker, registry: CollectorRegistry
) -> None:
    _connected(broker, Exchange())
    with pytest.raises(DownstreamError, match=r"no reply within 0\.200 s") as failed:
        await _downstream(broker, registry).order(ORDER, timeout=0.2)
    assert failed.value.reason == "timeout"
    assert _client(registry, "timeout") == 1 and broker.pending == {}


@pytest.mark.parametrize(
    ("refusal", "outcome"),
    [
        (DeliveryError(None, Basic.Return(312, "NO_ROUTE", "", "amqp-product")), "failure"),
        (ConnectionError("reset"), "connection_error"),
    ],
    ids=["unroutable", "connection"],
)
async def test_a_publish_the_broker_does_not_confirm_is_unavailable(
    broker: Broker, registry: CollectorRegistry, refusal: BaseException, outcome: str
) -> None:
    _connected(broker, Exchange(refuse=refusal))
    with pytest.raises(DownstreamError) as failed:
        await _downstream(broker, registry).order(ORDER, timeout=5)
    assert failed.value.reason == "unavailable"
    assert _client(registry, outcome) == 1


async def test_calls_waiting_when_the_connection_is_lost_fail_then_not_at_their_deadline(
    broker: Broker, registry: CollectorRegistry
) -> None:
    exchange = Exchange()
    _connected(broker, exchange)

    def lose(*_: object) -> None:
        asyncio.get_running_loop().call_soon(broker._lost)

    exchange.on_publish = lose
    started = time.perf_counter()
    with pytest.raises(DownstreamError, match="connection to the broker was lost"):
        await _downstream(broker, registry).order(ORDER, timeout=5)
    assert time.perf_counter() - started < 1
    assert _client(registry, "connection_error") == 1


# The relay and the knobs --------------------------------------------------------------------


async def test_a_grpc_edge_builds_one_broker_for_all_its_queues() -> None:
    urls = tuple(f"amqp://127.0.0.1:{_closed_port()}/q-{n}" for n in range(1))
    urls = (urls[0], urls[0].replace("q-0", "q-1"))
    relay = build_relay(settings(downstream=urls), "grpc", CollectorRegistry())
    assert relay is not None
    try:
        peers = [d.peer for d in relay.downstreams]
        assert peers == ["q-0", "q-1"]
        shared = {id(cast(AmqpDownstream, d).broker) for d in relay.downstreams}
        assert len(shared) == 1
    finally:
        await relay.close()


@pytest.mark.parametrize(
    ("protocol", "downstream", "said"),
    [
        ("rest", ("amqp://b:5672/q",), "must be http://"),
        ("grpc", ("amqp://b:5672/q", "grpc://c:50051"), "must be grpc://"),
        ("grpc", ("amqp://b:5672/q", "amqp://c:5672/r"), "share one broker"),
        ("grpc", ("amqp://b:5672",), "amqp://broker:port/queue"),
    ],
)
async def test_contradicting_amqp_downstreams_are_refused(
    protocol: str, downstream: tuple[str, ...], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        build_relay(settings(downstream=downstream), protocol, None)


def test_the_amqp_knobs_come_from_the_environment() -> None:
    defaults = knobs.load([], environ={})
    assert (defaults.amqp_consume, defaults.amqp_user, defaults.amqp_password) == (
        "",
        "wirelab",
        "wirelab",
    )
    assert (defaults.amqp_persistent, defaults.amqp_prefetch) == (True, 512)
    config = knobs.load(
        [],
        environ={
            "WIRELAB_AMQP_CONSUME": "amqp://rabbitmq:5672/amqp-product",
            "WIRELAB_AMQP_PERSISTENT": "off",
            "WIRELAB_AMQP_PREFETCH": "16",
        },
    )
    assert config.amqp_consume == "amqp://rabbitmq:5672/amqp-product"
    assert (config.amqp_persistent, config.amqp_prefetch) == (False, 16)


# The fire-and-forget shape ------------------------------------------------------------------


def _fire_and_forget(broker: Broker, registry: CollectorRegistry, timeout: float) -> Any:
    urls = ("amqp://rabbitmq:5672/amqp-product", "amqp://rabbitmq:5672/amqp-customer")
    measured = families(registry)
    queues = [AmqpDownstream(wire.Address.parse(u), broker, True, measured) for u in urls]
    return FireAndForget(queues, True, True, timeout, confirmed=confirmation(registry))


async def _reply_to(broker: Broker, message: Any) -> None:
    answer = wire.reply(pb.OrderReply().SerializeToString(), message.correlation_id, "OK", "")
    await broker._reply(cast(Any, answer))


def _confirmed(registry: CollectorRegistry) -> float:
    labels = {"protocol": "amqp", "kind": "unary", "call": "ProcessOrder"}
    return value(registry, "wirelab_client_confirmation_seconds_count", **labels)


async def test_fire_and_forget_accepts_once_every_queue_has_the_order_then_times_confirmation(
    broker: Broker, registry: CollectorRegistry
) -> None:
    exchange = Exchange()
    _connected(broker, exchange)
    relay = _fire_and_forget(broker, registry, timeout=5)
    own = pb.OrderReply(order_id="o-1", total_cents=300)
    answer = await relay.order(ORDER, own, 0, None)
    # Answered with this hop's own reply once both publishes were confirmed, before any reply.
    assert answer == own
    assert sorted(q for _, q, _ in exchange.published) == ["amqp-customer", "amqp-product"]
    assert _confirmed(registry) == 0 and len(relay.waiting) == 1
    await asyncio.sleep(0.05)
    for message, _, _ in exchange.published:
        await _reply_to(broker, message)
    await asyncio.gather(*relay.waiting)
    assert _confirmed(registry) == 1
    sum_ = "wirelab_client_confirmation_seconds_sum"
    labels = {"protocol": "amqp", "kind": "unary", "call": "ProcessOrder"}
    assert value(registry, sum_, **labels) >= 0.05  # until the last reply, not the acceptance
    assert _client(registry, "ok") == _client(registry, "ok", "amqp-customer") == 1


async def test_fire_and_forget_fails_an_order_a_queue_did_not_take_and_confirms_none(
    broker: Broker, registry: CollectorRegistry
) -> None:
    exchange = Exchange()
    _connected(broker, exchange)
    relay = _fire_and_forget(broker, registry, timeout=0.3)
    refused = relay.downstreams[1]
    refused.queue = "no-such-queue"
    real_publish = exchange.publish

    async def publish(message: Any, routing_key: str, mandatory: bool = True) -> None:
        if routing_key == "no-such-queue":
            raise DeliveryError(None, Basic.Return(312, "NO_ROUTE", "", routing_key))
        await real_publish(message, routing_key, mandatory)

    exchange.publish = publish  # type: ignore[method-assign]
    with pytest.raises(DownstreamError, match="the broker refused it") as failed:
        await relay.order(ORDER, pb.OrderReply(), 0, None)
    assert failed.value.reason == "unavailable"
    # The queue that took it is still waited for: here no reply comes, so a timeout.
    await asyncio.gather(*relay.waiting)
    assert _confirmed(registry) == 0
    assert _client(registry, "timeout") == 1


async def test_closing_a_fire_and_forget_edge_stops_waiting_for_confirmations(
    broker: Broker, registry: CollectorRegistry
) -> None:
    _connected(broker, Exchange())
    relay = _fire_and_forget(broker, registry, timeout=30)
    await relay.order(ORDER, pb.OrderReply(), 0, None)
    waiting = set(relay.waiting)
    broker.connection = cast(Any, Connected(asyncio.Event(), is_closed=True))
    await relay.close()
    assert all(t.cancelled() for t in waiting) and broker.pending == {}
    assert _client(registry, "cancelled") == 1


@pytest.mark.parametrize(
    "overrides",
    [{"local_work": False}, {"fanout": "split"}],
    ids=["relay-only", "split"],
)
async def test_a_fire_and_forget_edge_needs_its_own_reply(overrides: dict[str, Any]) -> None:
    config = settings(downstream=("amqp://b:5672/q",), amqp_shape="fire-and-forget", **overrides)
    with pytest.raises(ValueError, match="fire-and-forget edge answers with its own reply"):
        build_relay(config, "grpc", None)


async def test_the_shape_knob_builds_a_fire_and_forget_edge() -> None:
    url = f"amqp://127.0.0.1:{_closed_port()}/q"
    config = settings(downstream=(url,), amqp_shape="fire-and-forget")
    relay = build_relay(config, "grpc", CollectorRegistry())
    try:
        assert isinstance(relay, FireAndForget)
        assert relay.problem() == "no connection to the broker yet"
    finally:
        assert relay is not None
        await relay.close()
    environ = {"WIRELAB_AMQP_SHAPE": "fire-and-forget"}
    assert knobs.load([], environ=environ).amqp_shape == "fire-and-forget"

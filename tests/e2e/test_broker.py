"""compose's amqp profile booted (docs/broker.md): RabbitMQ, on the pinned image or its stand-in,
healthy and not root; reachable from the host with the credentials compose was given and not as
guest; a durable queue through publisher confirms, deliveries held unacked, then acked; and the
broker's own counters and per-queue depth following each step in Prometheus."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pika
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from tests.e2e.lab import Lab, profile_lab, wait_for
from tests.e2e.prom import Prometheus

pytestmark = pytest.mark.topology

SERVICES = ["rabbitmq", "prometheus"]
# Not compose's defaults: the broker must take its user from WIRELAB_AMQP_USER/_PASSWORD.
USER, PASSWORD = "wirelab-e2e", f"pw-{uuid.uuid4().hex[:12]}"
QUEUE = "wirelab.e2e"
MESSAGES = 40
# The broker refreshes its queue statistics every 5 s and Prometheus scrapes it every 5 s.
SETTLE = 40.0


@dataclass
class BrokerLab:
    lab: Lab
    prometheus: Prometheus
    amqp_host: str
    amqp_port: int
    ui_url: str


@pytest.fixture(scope="module")
def broker_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerLab]:
    """The broker and Prometheus alone: the host is the only client."""
    credentials = {"WIRELAB_AMQP_USER": USER, "WIRELAB_AMQP_PASSWORD": PASSWORD}
    with profile_lab(tmp_path_factory.mktemp("amqp"), "amqp", SERVICES, **credentials) as lab:
        host, port = (
            lab.compose("port", "rabbitmq", "5672", timeout=30).stdout.strip().rsplit(":", 1)
        )
        yield BrokerLab(
            lab, Prometheus(lab.url("prometheus", 9090)), host, int(port),
            lab.url("rabbitmq", 15672),
        )  # fmt: skip


def _connect(broker: BrokerLab, user: str, password: str) -> pika.BlockingConnection:
    return pika.BlockingConnection(
        pika.ConnectionParameters(
            host=broker.amqp_host,
            port=broker.amqp_port,
            credentials=pika.PlainCredentials(user, password),
            connection_attempts=1,
            socket_timeout=10,
            blocked_connection_timeout=30,
        )
    )


def _value(prometheus: Prometheus, expr: str) -> float | None:
    result = prometheus.query(expr)
    return float(result[0]["value"][1]) if result else None


def _settles(broker: BrokerLab, wanted: dict[str, float]) -> None:
    """Wait until every expression of ``wanted`` has its value in Prometheus; say which did not."""
    seen: dict[str, float | None] = {}

    def all_there() -> bool:
        seen.update({expr: _value(broker.prometheus, expr) for expr in wanted})
        return seen == wanted

    try:
        wait_for("the broker's metrics in Prometheus", all_there, timeout=SETTLE)
    except AssertionError:
        pytest.fail(f"Prometheus has {seen}, the test expected {wanted}")


def test_the_broker_is_healthy_runs_as_rabbitmq_and_both_jobs_scrape_it(
    broker_lab: BrokerLab,
) -> None:
    container = broker_lab.lab.container("rabbitmq")
    health = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Health.Status}}", container],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip()  # fmt: skip
    assert health == "healthy"
    # PID 1 is the broker itself (upstream's entrypoint steps down to this user with gosu).
    owner = subprocess.run(
        ["docker", "exec", container, "stat", "-c", "%U", "/proc/1"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip()  # fmt: skip
    assert owner == "rabbitmq"

    def broker_targets_up() -> list[dict[str, str]] | None:
        found = [
            t
            for t in broker_lab.prometheus.targets()
            if t["labels"]["job"] in {"rabbitmq", "rabbitmq-queues"}
        ]
        up = [t["labels"] for t in found if t["health"] == "up"]
        return up if len(up) == len(found) == 2 else None

    labels = wait_for("both broker targets up", broker_targets_up, timeout=SETTLE)
    assert {(t["job"], t["service"]) for t in labels} == {
        ("rabbitmq", "rabbitmq"),
        ("rabbitmq-queues", "rabbitmq"),
    }


def test_guest_cannot_log_in_and_the_configured_user_can(broker_lab: BrokerLab) -> None:
    with pytest.raises(pika.exceptions.AMQPConnectionError):
        _connect(broker_lab, "guest", "guest").close()
    _connect(broker_lab, USER, PASSWORD).close()
    with httpx.Client(base_url=broker_lab.ui_url, timeout=10) as ui:
        assert ui.get("/api/whoami", auth=("guest", "guest")).status_code == 401
        me = ui.get("/api/whoami", auth=(USER, PASSWORD))
        assert me.status_code == 200 and me.json()["name"] == USER


def _publish(channel: BlockingChannel, bodies: list[bytes]) -> None:
    """Persistent messages, each confirmed by the broker (basic_publish raises on a nack or,
    with mandatory, an unroutable message)."""
    channel.confirm_delivery()
    for body in bodies:
        channel.basic_publish(
            exchange="",
            routing_key=QUEUE,
            body=body,
            properties=pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent),
            mandatory=True,
        )


def _take(channel: BlockingChannel, count: int) -> tuple[list[bytes], int]:
    """``count`` deliveries from the queue, not acked yet: their bodies and the last tag."""
    bodies: list[bytes] = []
    tag = 0
    for method, _, body in channel.consume(QUEUE, inactivity_timeout=10):
        assert method is not None, f"only {len(bodies)} of {count} messages were delivered"
        bodies.append(body)
        tag = method.delivery_tag
        if len(bodies) == count:
            break
    channel.cancel()
    return bodies, tag


def test_confirmed_persistent_messages_are_delivered_acked_and_counted(
    broker_lab: BrokerLab,
) -> None:
    queue = f'{{queue="{QUEUE}"}}'
    sent = [f"order-{n}".encode() for n in range(MESSAGES)]
    connection = _connect(broker_lab, USER, PASSWORD)
    try:
        channel = connection.channel()
        assert channel.queue_declare(QUEUE, durable=True).method.queue == QUEUE
        _publish(channel, sent)
        assert channel.queue_declare(QUEUE, passive=True).method.message_count == MESSAGES
        _settles(broker_lab, {
            f"rabbitmq_detailed_queue_messages_ready{queue}": MESSAGES,
            f"rabbitmq_detailed_queue_messages_unacked{queue}": 0,
            "sum(rabbitmq_global_messages_received_total)": MESSAGES,
            "sum(rabbitmq_global_messages_confirmed_total)": MESSAGES,
            "sum(rabbitmq_connections)": 1,
        })  # fmt: skip

        got, last_tag = _take(channel, MESSAGES)
        assert got == sent
        _settles(broker_lab, {
            f"rabbitmq_detailed_queue_messages_ready{queue}": 0,
            f"rabbitmq_detailed_queue_messages_unacked{queue}": MESSAGES,
            "sum(rabbitmq_global_messages_delivered_total)": MESSAGES,
            "sum(rabbitmq_global_messages_acknowledged_total)": 0,
        })  # fmt: skip

        channel.basic_ack(delivery_tag=last_tag, multiple=True)
        assert channel.queue_declare(QUEUE, passive=True).method.message_count == 0
    finally:
        connection.close()
    _settles(broker_lab, {
        f"rabbitmq_detailed_queue_messages{queue}": 0,
        "sum(rabbitmq_global_messages_acknowledged_total)": MESSAGES,
        "sum(rabbitmq_connections)": 0,
    })  # fmt: skip

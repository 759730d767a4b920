"""The order chain's AMQP arm booted (order-chain with the amqp profile; docs/broker.md): orders
through a gRPC edge and RabbitMQ to three queue consumers, counted alike hop by hop; malformed
messages dead-lettered and counted while the consumer goes on; nothing lost when the broker's
process is killed mid-run; a consumer started while the broker is down is not ready, then serves;
`make bench` measures the arm beside the gRPC arm and `make report` reads the run."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import grpc
import pika
import pytest
from wirelab.amqp import wire
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.config.queries import all_queries
from tests.e2e.bench_run import bench, bench_env, report
from tests.e2e.lab import Lab, healthy, profile_lab, wait_for
from tests.e2e.prom import Prometheus

pytestmark = pytest.mark.topology

QUEUES = ("amqp-product", "amqp-customer", "amqp-shipping")
# The REST and gRPC arms beside it: the runner measures the three, and the AMQP and gRPC arms'
# edges (both gRPC servers) must stay apart in every figure.
OTHER_ARMS = [
    f"{p}{s}" for p in ("rest", "grpc") for s in ("", "-product", "-customer", "-shipping")
]
SERVICES = ["rabbitmq", *QUEUES, "amqp", *OTHER_ARMS, "prometheus"]
ORDERS = 60  # a few seconds of orders, bounded by count
WORK_MS = 5
CALL_TIMEOUT = 10.0
# What a caller may hear while the broker is away: an answer, or an explicit error naming why.
EXPLICIT = {"OK", "UNAVAILABLE", "DEADLINE_EXCEEDED"}


@dataclass
class Arm:
    lab: Lab
    prometheus: Prometheus
    edge: str  # host:port of the gRPC edge
    amqp_host: str
    amqp_port: int


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Arm]:
    """The broker, the edge, its three consumers and Prometheus: the host sends the orders."""
    folder = tmp_path_factory.mktemp("amqp-arm")
    with profile_lab(folder, "amqp", SERVICES, topology="order-chain") as lab:
        edge = lab.compose("port", "amqp", "50051", timeout=30).stdout.strip()
        address = lab.compose("port", "rabbitmq", "5672", timeout=30).stdout.strip()
        host, port = address.rsplit(":", 1)
        yield Arm(lab, Prometheus(lab.url("prometheus", 9090)), edge, host, int(port))


def send_orders(arm: Arm, count: int) -> Counter[str]:
    """``count`` orders through the edge, 6 at a time; the status name of each."""
    with grpc.insecure_channel(arm.edge) as channel:
        stub = pb_grpc.WireLabStub(channel)

        def call(n: int) -> str:
            order = pb.Order(
                order_id=f"o-{n}", items=[pb.LineItem(sku="s", quantity=1, unit_price_cents=7)]
            )
            request = pb.OrderRequest(order=order, work_ms=WORK_MS)
            try:
                stub.ProcessOrder(request, timeout=CALL_TIMEOUT)
            except grpc.RpcError as exc:
                return str(exc.code().name)
            return "OK"

        with ThreadPoolExecutor(6) as pool:
            return Counter(pool.map(call, range(count)))


def _totals(arm: Arm, expr: str, by: str) -> dict[str, float]:
    """The grouped values of ``expr`` once two reads 2 s apart agree (1 s scrapes; the services
    count a call by the next scrape)."""
    last: dict[str, float] = {}

    def stable() -> dict[str, float] | None:
        nonlocal last
        now = arm.prometheus.values(expr, by)
        same = now == last and bool(now)
        last = now
        return now if same else None

    return wait_for(f"{expr} to settle", stable, timeout=60, every=2)


def _edge_calls(arm: Arm) -> dict[str, float]:
    """Orders the edge has answered, by status."""
    return _totals(
        arm, 'sum by (code) (wirelab_server_requests_total{job="amqp", kind="unary"})', "code"
    )


def _acked(arm: Arm) -> dict[str, float]:
    """Orders each consumer acknowledged."""
    return _totals(
        arm,
        'sum by (service) (wirelab_server_requests_total{job="hops", protocol="amqp", code="ack"})',
        "service",
    )


def _channel(arm: Arm) -> pika.BlockingConnection:
    return pika.BlockingConnection(
        pika.ConnectionParameters(
            host=arm.amqp_host,
            port=arm.amqp_port,
            credentials=pika.PlainCredentials("wirelab", "wirelab"),
            connection_attempts=1,
            socket_timeout=10,
        )
    )


def test_orders_cross_the_broker_and_counts_agree_hop_by_hop(arm: Arm) -> None:
    before = _edge_calls(arm).get("OK", 0.0)
    acked_before = _acked(arm)
    assert send_orders(arm, ORDERS) == Counter({"OK": ORDERS})
    assert _edge_calls(arm).get("OK", 0.0) - before == ORDERS
    sent = _totals(
        arm,
        'sum by (peer) (wirelab_client_requests_total{job="amqp", protocol="amqp", outcome="ok"})',
        "peer",
    )
    acked = _acked(arm)
    for queue in QUEUES:
        assert sent.get(queue, 0.0) >= ORDERS, (queue, sent)
        assert acked.get(queue, 0.0) - acked_before.get(queue, 0.0) == ORDERS, (queue, acked)
    # The client and the server side of each hop counted the same orders.
    assert {q: sent[q] for q in QUEUES} == {q: acked[q] for q in QUEUES}


def test_the_amqp_arms_queries_return_data(arm: Arm) -> None:
    """The Topology dashboard's AMQP arm panels (and whatever else needs this arm): rules
    evaluate every 10 s over 30 s windows and the broker refreshes its figures every 5 s, so
    re-checked for 60 s, orders sent before each round."""
    wanted = [q for q in all_queries() if q.expect_data and q.needs == "amqp"]
    assert wanted, "tests/config/queries.py marks no query as needing the AMQP arm"
    missing: list[str] = []

    def all_have_data() -> bool:
        send_orders(arm, 12)
        missing[:] = [q.source for q in wanted if not arm.prometheus.query(q.expr)]
        return not missing

    try:
        wait_for("every AMQP arm query to return data", all_have_data, timeout=60, every=5)
    except AssertionError:
        pytest.fail("queries without data:\n" + "\n".join(missing))


def test_bench_measures_the_three_arms_and_the_report_reads_them(arm: Arm, tmp_path: Path) -> None:
    """`make bench` with a seconds-long order-chain scenario over the REST, gRPC and AMQP arms,
    from the host: parity through the three edges, each row counted from its own edge (the two
    gRPC servers' series kept apart), three downstream calls per order on every arm; then `make
    report` without an error."""
    scenario = tmp_path / "order-chain-arms.toml"
    scenario.write_text(
        f'topology = "order-chain"\nprotocols = ["rest", "grpc", "amqp"]\nkinds = ["unary"]\n'
        f'work_ms = {WORK_MS}\nloads = [{{ users = 2, label = "smoke" }}]\n'
        "warmup_s = 0.5\nduration_s = 3\ncooldown_s = 0\n"
    )
    lab = arm.lab
    env = bench_env(
        lab,
        tmp_path,
        rest_url=lab.url("rest", 8000),
        rest_metrics_url=lab.url("rest", 9100) + "/metrics",
        grpc_target=lab.url("grpc", 50051).removeprefix("http://"),
        grpc_metrics_url=lab.url("grpc", 9100) + "/metrics",
        amqp_target=arm.edge,
        amqp_metrics_url=lab.url("amqp", 9100) + "/metrics",
        prometheus_url=lab.url("prometheus", 9090),
    )
    run_dir, manifest, tidy = bench(lab, env, scenario)
    assert {"unary", "unary (amqp)"} <= set(manifest["parity"]), manifest["parity"]
    assert len(manifest["topology"]["peers"]["amqp"]) == len(QUEUES), manifest["topology"]
    assert set(tidy["protocol"]) == {"rest", "grpc", "amqp"}
    assert (tidy["errors"] == 0).all(), tidy.to_string()
    for _, row in tidy.iterrows():
        # Each edge served about what Locust sent it (window edges split a call or two), not
        # the sum of both arms' orders.
        served = row["server_requests_per_s"] * row["window_s"]
        assert served == pytest.approx(row["requests"], rel=0.15, abs=3), row.to_dict()
        assert row["hop_calls_per_order"] == pytest.approx(3, rel=0.15), row.to_dict()
        assert row["server_source"] == "scrape", row.to_dict()
    report(env, run_dir)


def test_malformed_messages_are_dead_lettered_and_counted_and_the_consumer_goes_on(
    arm: Arm,
) -> None:
    bad = [b"\xff not protobuf", pb.OrderRequest(work_ms=10**9).SerializeToString()]
    connection = _channel(arm)
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        dead_before = channel.queue_declare(wire.DEAD_LETTER_QUEUE, passive=True)
        for body in bad:
            channel.basic_publish("", "amqp-product", body, mandatory=True)
        expr = (
            'sum(wirelab_server_requests_total{service="amqp-product", protocol="amqp", '
            'outcome="client_error", code="dead_letter"})'
        )
        wait_for(
            "two dead-lettered orders counted",
            lambda: arm.prometheus.values(expr, "") == {"": 2.0},
            timeout=30,
        )
        dead = channel.queue_declare(wire.DEAD_LETTER_QUEUE, passive=True)
        assert dead.method.message_count - dead_before.method.message_count == len(bad)
    finally:
        connection.close()
    assert send_orders(arm, 10) == Counter({"OK": 10})


def test_nothing_is_lost_when_the_brokers_process_is_killed_mid_run(arm: Arm) -> None:
    """Every order ends with an answer (success or an explicit error), the edge counts each
    once, and every order answered OK was acknowledged by all three consumers."""
    edge_before = sum(_edge_calls(arm).values())
    acked_before = _acked(arm)
    with ThreadPoolExecutor(1) as background:
        during = background.submit(send_orders, arm, 6 * ORDERS)
        time.sleep(1.0)
        container = arm.lab.kill("rabbitmq")
        statuses = during.result(timeout=6 * ORDERS * CALL_TIMEOUT)
    assert set(statuses) <= EXPLICIT, statuses
    assert statuses["OK"] > 0 and statuses["UNAVAILABLE"] > 0, statuses
    edge = _edge_calls(arm)
    assert sum(edge.values()) - edge_before == 6 * ORDERS, edge
    assert edge.get("OK", 0.0) >= statuses["OK"], edge
    acked = _acked(arm)
    for queue in QUEUES:
        assert acked[queue] - acked_before.get(queue, 0.0) >= statuses["OK"], (queue, acked)
    # The broker comes back under its restart policy; consumers and the edge reconnect.
    wait_for(f"{container} healthy again", partial(healthy, container), timeout=120, every=2)
    wait_for("orders answered again", lambda: send_orders(arm, 6)["OK"] == 6, 60, every=2)
    assert send_orders(arm, ORDERS) == Counter({"OK": ORDERS})


def _edge_with(arm: Arm, **env: str) -> None:
    """Recreate the edge with these variables (none: as compose.yaml has it); it may get another
    host port."""
    for name in ("WIRELAB_AMQP_SHAPE",):
        arm.lab.env.pop(name, None)
    arm.lab.env |= env
    arm.lab.compose("up", "-d", "--wait", "--no-deps", "amqp", timeout=180)
    arm.edge = arm.lab.compose("port", "amqp", "50051", timeout=30).stdout.strip()


def test_fire_and_forget_accepts_orders_then_confirms_each(arm: Arm) -> None:
    """WIRELAB_AMQP_SHAPE=fire-and-forget: every order answered once the queues have it, then
    confirmed by all three consumers, each confirmation timed at the edge."""
    acked_before = _acked(arm)
    _edge_with(arm, WIRELAB_AMQP_SHAPE="fire-and-forget")
    try:
        assert send_orders(arm, ORDERS) == Counter({"OK": ORDERS})
        expr = 'sum(wirelab_client_confirmation_seconds_count{job="amqp", protocol="amqp"})'
        wait_for(
            f"{ORDERS} confirmations timed",
            lambda: arm.prometheus.values(expr, "") == {"": float(ORDERS)},
            timeout=30,
        )
        acked = _acked(arm)
        for queue in QUEUES:
            assert acked[queue] - acked_before.get(queue, 0.0) == ORDERS, (queue, acked)
    finally:
        _edge_with(arm)


def _health(arm: Arm, service: str, check: str) -> subprocess.CompletedProcess[str]:
    """``service``'s own container healthcheck (``python -m wirelab.probe <check>``), run now."""
    container = arm.lab.container(service)
    return subprocess.run(
        ["docker", "exec", container, "python", "-m", "wirelab.probe", check],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _consumer_health(arm: Arm, service: str) -> subprocess.CompletedProcess[str]:
    return _health(arm, service, "amqp")


def test_a_consumer_started_while_the_broker_is_down_is_not_ready_then_serves(arm: Arm) -> None:
    arm.lab.compose("stop", "rabbitmq", timeout=120)
    try:
        arm.lab.compose("restart", "amqp-shipping", timeout=120)
        # Its healthcheck reaches /healthz (once the process listens) and hears why not.
        wait_for(
            "the restarted consumer to say it has no broker",
            lambda: (
                "503 not connected to the broker yet"
                in _consumer_health(arm, "amqp-shipping").stderr
            ),
            timeout=60,
            every=2,
        )
        assert set(send_orders(arm, 6)) == {"UNAVAILABLE"}
        # The edge says so too: its health follows its link to the broker.
        edge = _health(arm, "amqp", "grpc")
        assert edge.returncode == 1, edge
        assert edge.stderr.rstrip().endswith("not serving: NOT_SERVING"), edge
    finally:
        arm.lab.compose("start", "rabbitmq", timeout=120)
    container = arm.lab.container("rabbitmq")
    wait_for(f"{container} healthy again", partial(healthy, container), timeout=120, every=2)
    wait_for(
        "the consumer ready",
        lambda: _consumer_health(arm, "amqp-shipping").returncode == 0,
        timeout=60,
        every=2,
    )
    wait_for("orders answered again", lambda: send_orders(arm, 6)["OK"] == 6, 60, every=2)

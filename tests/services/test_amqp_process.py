"""The AMQP arm's processes without a broker (the broker's own are in tests/e2e/test_amqp_arm.py):
a consumer starts, says it is not ready and why, and stops on SIGTERM; a gRPC edge refuses orders
at once, naming the queue; a bad address stops a consumer with one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
import httpx
import pytest
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.services.test_integration import free_port, launch

pytestmark = pytest.mark.integration


def _nowhere() -> str:
    """A queue on a broker that is not there: a loopback port nobody listens on."""
    return f"amqp://127.0.0.1:{free_port()}/amqp-product"


def test_a_consumer_without_its_broker_starts_not_ready_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    metrics_port = free_port()
    environ = {
        **os.environ,
        "WIRELAB_HOST": "127.0.0.1",
        "WIRELAB_METRICS_PORT": str(metrics_port),
        "WIRELAB_AMQP_CONSUME": _nowhere(),
    }
    log = tmp_path / "consumer.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wirelab.amqp"], env=environ, stdout=out, stderr=out
        )
    try:
        base = f"http://127.0.0.1:{metrics_port}"
        deadline = time.monotonic() + 20
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                health = httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert (health.status_code, health.text) == (503, "not connected to the broker yet")
        check = [sys.executable, "-m", "wirelab.probe", "amqp"]
        assert subprocess.run(check, env=environ, capture_output=True).returncode == 1
        page = httpx.get(f"{base}/metrics", timeout=5).text
        info = 'client="none",concurrency="asyncio",fanout="none",protocol="amqp"'
        assert f"wirelab_server_info{{{info}}} 1.0" in page
        assert 'code="dead_letter",kind="unary",outcome="client_error",protocol="amqp"' in page
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0, log.read_text()


def test_a_bad_consume_address_stops_the_consumer_with_one_line() -> None:
    environ = {**os.environ, "WIRELAB_AMQP_CONSUME": "amqp://rabbitmq:5672"}
    done = subprocess.run(
        [sys.executable, "-m", "wirelab.amqp"], env=environ, capture_output=True, timeout=30
    )
    assert done.returncode == 2
    assert done.stderr.decode().strip() == (
        "python -m wirelab.amqp: WIRELAB_AMQP_CONSUME: an AMQP address is "
        "amqp://broker:port/queue: 'amqp://rabbitmq:5672'"
    )


def _grpc_health(environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    check = [sys.executable, "-m", "wirelab.probe", "grpc"]
    return subprocess.run(check, env=environ, capture_output=True, text=True)


def _not_serving(environ: dict[str, str], _: int) -> bool:
    """The edge listens and its health service answers NOT_SERVING."""
    health = _grpc_health(environ)
    return health.returncode == 1 and health.stderr.rstrip().endswith("not serving: NOT_SERVING")


def test_a_grpc_edge_without_its_broker_is_not_serving_and_refuses_orders_at_once(
    tmp_path: Path,
) -> None:
    edge = launch(
        [sys.executable, "-m", "wirelab.rpc"],
        "grpc",
        tmp_path,
        _not_serving,
        {"WIRELAB_DOWNSTREAM": _nowhere()},
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{edge.port}") as channel:
            stub = pb_grpc.WireLabStub(channel)
            started = time.perf_counter()
            with pytest.raises(grpc.RpcError) as refused:
                stub.ProcessOrder(pb.OrderRequest(order=pb.Order(order_id="o")), timeout=10)
            assert time.perf_counter() - started < 2
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert refused.value.details() == (
            "downstream amqp-product is unavailable: no connection to the broker yet"
        )
        labels = 'call="ProcessOrder",kind="unary",outcome="connection_error",peer="amqp-product"'
        assert edge.wait_for(f'wirelab_client_requests_total{{{labels},protocol="amqp"}}', 1) == 1
    finally:
        assert edge.stop() == 0, edge.log.read_text()

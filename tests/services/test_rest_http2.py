"""The REST service on Granian (WIRELAB_REST_HTTP=2): the routes and metrics over h2c and h2."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.services.test_integration import Service, free_port, start

pytestmark = pytest.mark.integration

ORDER = {"order": {"order_id": "h2", "items": [{"sku": "a", "quantity": 2, "unit_price_cents": 5}]}}
LIMITS = {"WIRELAB_MAX_ORDER_BYTES": "1000", "WIRELAB_REST_MAX_HEADER_BYTES": "8192"}


def h2c() -> httpx.Client:
    """HTTP/2 over cleartext with prior knowledge: no HTTP/1.1 upgrade round trip."""
    return httpx.Client(http1=False, http2=True, timeout=10)


def ok(service: Service, kind: str) -> float:
    labels = f'kind="{kind}",outcome="ok",protocol="rest"'
    return service.metric(f'wirelab_server_requests_total{{code="200",{labels}}}')


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http2")


@pytest.fixture(scope="module")
def h2(tmp: Path) -> Iterator[Service]:
    service = start("wirelab.rest", tmp, {"WIRELAB_REST_HTTP": "2", **LIMITS})
    yield service
    assert service.stop() == 0


def test_routes_answer_over_h2c_and_are_measured(h2: Service) -> None:
    base = f"http://127.0.0.1:{h2.port}"
    with h2c() as client:
        reply = client.post(f"{base}/v1/orders", json=ORDER)
        lines = client.get(f"{base}/v1/stream", params={"count": 3, "size": 4}).text.splitlines()
    assert reply.http_version == "HTTP/2"
    assert reply.json()["total_cents"] == 10 and len(lines) == 3
    assert h2.wait_for('wirelab_server_requests_total{code="200",kind="unary"', 1) == 1
    assert ok(h2, "unary") == 1 and ok(h2, "server_stream") == 1
    streamed = 'wirelab_server_messages_sent_total{kind="server_stream",protocol="rest"}'
    assert h2.metric(streamed) == 3
    # The same port speaks HTTP/1.1 too (healthchecks, HTTP/1.1 clients).
    assert httpx.get(f"{base}/healthz").http_version == "HTTP/1.1"
    info = 'wirelab_server_info{client="none",concurrency="async-h2",fanout="none",protocol="rest"}'
    assert h2.metric(info) == 1


def test_limits_hold_over_h2c(h2: Service) -> None:
    base = f"http://127.0.0.1:{h2.port}"
    before = h2.metric('wirelab_server_requests_total{code="413",kind="unary"')
    with h2c() as client:
        # Under the stream's flow-control window, so the client reads the answer whole.
        big = client.post(f"{base}/v1/orders", content=b"{" + b" " * 1500 + b"}")
        header = client.get(f"{base}/healthz", headers={"x-big": "a" * 10_000})
    assert big.status_code == 413 and "over the limit" in big.json()["detail"]
    assert h2.wait_for('wirelab_server_requests_total{code="413",kind="unary"', before + 1) == (
        before + 1
    )
    assert header.status_code == 431
    assert httpx.get(f"{base}/healthz", headers={"x-big": "a" * 10_000}).status_code == 431


def test_sigterm_drains_a_call_in_flight(tmp: Path) -> None:
    service = start("wirelab.rest", tmp, {"WIRELAB_REST_HTTP": "2"})
    got: list[httpx.Response] = []

    def call() -> None:
        # HTTP/1.1: httpx's HTTP/2 client fails a stream still open when Granian's GOAWAY is
        # followed by a PING (h2's "RECV_PING in state CLOSED"); curl over h2c gets its 200.
        slow = {**ORDER, "work_ms": 700}
        got.append(httpx.post(f"http://127.0.0.1:{service.port}/v1/orders", json=slow, timeout=10))

    caller = threading.Thread(target=call)
    caller.start()
    in_flight = 'wirelab_server_requests_in_flight{kind="unary",protocol="rest"}'
    assert service.wait_for(in_flight, 1) == 1
    assert service.stop() == 0
    caller.join(10)
    assert got and got[0].status_code == 200
    log = service.log.read_text()
    assert "Traceback" not in log and "grace period over" not in log


def test_tls_offers_h2_by_alpn(tmp: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: the test makes its self-signed certificate with it")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    tls = {"WIRELAB_REST_HTTP": "2", "WIRELAB_REST_TLS_CERT": str(cert)}
    tls["WIRELAB_REST_TLS_KEY"] = str(key)
    port, metrics_port = free_port(), free_port()
    env = {**os.environ, **tls, "WIRELAB_HOST": "127.0.0.1", "WIRELAB_REST_PORT": str(port)}
    env["WIRELAB_METRICS_PORT"] = str(metrics_port)
    proc = subprocess.Popen([sys.executable, "-m", "wirelab.rest"], env=env)
    try:
        with httpx.Client(http2=True, verify=False, timeout=2) as client:
            deadline = time.monotonic() + 20
            while True:
                try:
                    reply = client.post(f"https://127.0.0.1:{port}/v1/orders", json=ORDER)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline and proc.poll() is None
                    time.sleep(0.2)
        assert reply.status_code == 200 and reply.http_version == "HTTP/2"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0


@pytest.mark.parametrize(
    "argv",
    [["--rest-tls-cert", "c.pem", "--rest-tls-key", "k.pem"], ["--rest-http", "2",
     "--rest-tls-cert", "c.pem"]],
)  # fmt: skip
def test_tls_knobs_that_cannot_work_are_refused(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wirelab.rest", "--rest-port", "0", *argv],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert done.returncode == 2 and "TLS" in done.stderr

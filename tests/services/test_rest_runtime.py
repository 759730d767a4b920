"""The REST process under heavy and faulty clients: memory bounded, refusals and cancels counted."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect as ws_connect
from wirelab import core

from tests.services.test_integration import Service, start

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
BLOB = 64 * MIB
BUDGET = 2 * BLOB


def _peak_rss(service: Service) -> int:
    """The process's high-water resident set (VmHWM), in bytes."""
    status = Path(f"/proc/{service.proc.pid}/status").read_text()
    line = next(ln for ln in status.splitlines() if ln.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    env = {"WIRELAB_PAYLOAD_BUDGET_BYTES": str(BUDGET), "WIRELAB_MAX_PAYLOAD_BYTES": str(BLOB)}
    service = start("wirelab.rest", tmp_path_factory.mktemp("rest-runtime"), env)
    yield service
    assert service.stop() == 0


def _slow_body(release: threading.Event) -> Iterator[bytes]:
    # The headers (with the length) go first; the body waits until every call has been
    # answered or admitted, so the admitted ones are all in flight at once.
    piece = core.payload(MIB)
    release.wait(10)
    for _ in range(BLOB // MIB):
        yield piece


def test_concurrent_uploads_past_the_budget_are_refused_and_memory_stays_bounded(
    rest: Service,
) -> None:
    url = f"http://127.0.0.1:{rest.port}/v1/blobs"
    before = _peak_rss(rest)
    release = threading.Event()
    calls = 6

    def upload() -> int:
        headers = {"content-length": str(BLOB), "content-type": "application/octet-stream"}
        with httpx.Client(timeout=60) as client:
            return client.post(url, content=_slow_body(release), headers=headers).status_code

    with ThreadPoolExecutor(calls) as pool:
        futures = [pool.submit(upload) for _ in range(calls)]
        time.sleep(1.0)  # every call has sent its headers and been admitted or refused
        release.set()
        statuses = sorted(f.result() for f in futures)
    assert statuses == [200] * (BUDGET // BLOB) + [503] * (calls - BUDGET // BLOB)
    assert rest.wait_for(_requests_line("upload", "client_error", "503"), 4) == 4
    assert rest.metric('wirelab_server_payload_budget_bytes{protocol="rest"}') == BUDGET
    assert rest.metric('wirelab_server_payload_in_flight_bytes{protocol="rest"}') == 0
    # Two 64 MiB bodies held at once; without the budget the six took it past 500 MB.
    grew = _peak_rss(rest) - before
    assert grew < BUDGET + 64 * MIB, f"peak RSS grew by {grew / MIB:.0f} MiB"


def _requests_line(kind: str, outcome: str, code: str) -> str:
    labels = f'code="{code}",kind="{kind}",outcome="{outcome}",protocol="rest"'
    return f"wirelab_server_requests_total{{{labels}}}"


def _raw(service: Service, request: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", service.port))
    sock.sendall(request)
    return sock


def test_clients_gone_mid_upload_body_are_cancelled(rest: Service) -> None:
    head = b"POST /v1/blobs HTTP/1.1\r\nhost: x\r\n"
    # Half-close: part of the announced body, then the client's side of the connection ends.
    sock = _raw(rest, head + b"content-length: 1000000\r\n\r\n" + b"a" * 1000)
    sock.shutdown(socket.SHUT_WR)
    assert sock.recv(1024) == b""
    sock.close()
    # A slow body, then the connection closes.
    sock = _raw(rest, head + b"content-length: 1000000\r\n\r\n" + b"a" * 1000)
    time.sleep(0.3)
    sock.close()
    # Broken chunked framing: uvicorn answers 400 and closes; the app's call is cut off.
    sock = _raw(rest, head + b"transfer-encoding: chunked\r\n\r\n10\r\n" + b"a" * 16 + b"\r\n")
    time.sleep(0.3)
    sock.sendall(b"zz\r\n")
    sock.recv(1024)
    sock.close()
    assert rest.wait_for(_requests_line("upload", "cancelled", "499"), 3) == 3
    assert rest.metric(_requests_line("upload", "server_error", "500")) == 0
    assert "Traceback" not in rest.log.read_text()


def test_an_order_stops_working_when_its_client_has_gone(rest: Service) -> None:
    # Before: the order worked its 20 s to the end after the client left and was counted 200.
    body = b'{"order": {"order_id": "gone"}, "work_ms": 20000}'
    head = b"POST /v1/orders HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    sock = _raw(rest, head + b"content-length: %d\r\n\r\n" % len(body) + body)
    in_flight = 'wirelab_server_requests_in_flight{kind="unary",protocol="rest"}'
    assert rest.wait_for(in_flight, 1) == 1  # the order is working
    sock.close()
    assert rest.wait_for(_requests_line("unary", "cancelled", "499"), 1) == 1
    assert rest.metric(in_flight) == 0
    assert "Traceback" not in rest.log.read_text()


def test_websocket_client_dropping_tcp_is_cancelled(rest: Service) -> None:
    url = f"ws://127.0.0.1:{rest.port}/v1/pingpong"
    with ws_connect(url) as ws:
        ws.send('{"seq": 1, "payload": ""}')
        assert ws.recv(timeout=5) == '{"seq":1,"payload":""}'
        ws.socket.close()  # no close frame: the TCP connection just ends
    assert rest.wait_for(_requests_line("bidi", "cancelled", "499"), 1) == 1
    assert rest.metric(_requests_line("bidi", "ok", "101")) == 0


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (f"/v1/blobs/stream?size={BLOB}&chunk_size=4096", "download_chunked"),
        ("/v1/stream?count=100000&size=4096&interval_ms=0", "server_stream"),
    ],
)
def test_streams_stop_when_the_client_has_gone(rest: Service, path: str, kind: str) -> None:
    sent = f'wirelab_server_response_bytes_sum{{kind="{kind}",protocol="rest"}}'
    before = rest.metric(sent)
    sock = _raw(rest, f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    got = 0
    while got < MIB:
        got += len(sock.recv(65536))
    sock.close()
    # Before, the whole stream was produced and recorded ok/200: 64 MiB, or 550 MB of NDJSON.
    assert rest.wait_for(_requests_line(kind, "cancelled", "499"), 1) == 1
    assert rest.metric(_requests_line(kind, "ok", "200")) == 0
    assert rest.metric(sent) - before < 8 * MIB


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    env = {
        "WIRELAB_REST_HEADER_TIMEOUT_SECONDS": "1",
        "WIRELAB_REST_BODY_TIMEOUT_SECONDS": "1",
        "WIRELAB_REST_MAX_CONCURRENT_CALLS": "2",
    }
    service = start("wirelab.rest", tmp_path_factory.mktemp("rest-bounded"), env)
    yield service
    assert service.stop() == 0


def _answer(sock: socket.socket, within: float) -> bytes:
    """Everything the server sends until it closes the connection, which must be ``within`` s."""
    sock.settimeout(within)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    return data


def _paced(service: Service, request: bytes) -> bytes:
    """The server's answer to ``request`` sent in small paced pieces, stopping once answered."""
    sock = _raw(service, b"")
    for at in range(0, len(request), 16384):
        if select.select([sock], [], [], 0.01)[0]:
            break  # answered
        sock.sendall(request[at : at + 16384])
    return _answer(sock, 5)


_REFUSED = _requests_line("other", "client_error", "431")


def test_oversize_headers_are_refused_at_once(bounded: Service) -> None:
    # Before: a 128 MiB header was read for 23.6 s and accepted. The default bound is 64 KiB.
    started = time.monotonic()
    before = bounded.metric(_REFUSED)
    answer = _paced(bounded, b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 4 * MIB)
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert time.monotonic() - started < 2
    assert bounded.wait_for(_REFUSED, before + 1) == before + 1


@pytest.mark.parametrize("size", [70_000, 120_000])
@pytest.mark.parametrize("where", ["header", "url"])
def test_headers_past_the_limit_are_refused_and_counted(
    bounded: Service, where: str, size: int
) -> None:
    # Before: headers that ended within the read that took them past 64 KiB were not counted,
    # so 70,000-120,000 bytes were served; a URL that long got uvicorn's bare 400, uncounted.
    line = b"GET /v1/stream?count=0&x=" + b"a" * (size if where == "url" else 0)
    header = b"x-big: " + b"a" * (size if where == "header" else 0)
    before = bounded.metric(_REFUSED)
    answer = _paced(bounded, line + b" HTTP/1.1\r\nhost: x\r\n" + header + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert bounded.wait_for(_REFUSED, before + 1) == before + 1


@pytest.mark.parametrize("where", ["header", "url"])
def test_headers_within_the_limit_are_served(bounded: Service, where: str) -> None:
    size = 60_000  # with the request line and the other headers, under 65,536 bytes
    line = b"GET /v1/stream?count=0&x=" + b"a" * (size if where == "url" else 0)
    header = b"x-big: " + b"a" * (size if where == "header" else 0)
    request = line + b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n" + header + b"\r\n\r\n"
    assert _paced(bounded, request).startswith(b"HTTP/1.1 200 ")


@pytest.mark.parametrize(
    ("sent", "calls"), [(b"", 0), (b"GET /healthz HTTP/1.1\r\nhost: x\r\n", 1)]
)
def test_unfinished_headers_time_out(bounded: Service, sent: bytes, calls: int) -> None:
    # Before: connections that never finished their headers were held for as long as they lasted.
    # A request that began is counted; a connection that sent nothing made no call.
    timed_out = _requests_line("other", "timeout", "408")
    before = bounded.metric(timed_out)
    sock = _raw(bounded, sent)
    started = time.monotonic()
    assert _answer(sock, 5).startswith(b"HTTP/1.1 408 ")
    assert 0.9 < time.monotonic() - started < 3
    assert bounded.wait_for(timed_out, before + calls) == before + calls


@pytest.mark.parametrize(("path", "kind"), [("/v1/blobs", "upload"), ("/v1/orders", "unary")])
def test_a_stalled_body_times_out_and_is_counted(bounded: Service, path: str, kind: str) -> None:
    # Before: a half-sent body was held forever; then an order's was counted 400 (FastAPI's
    # answer to a body it could not read) though the wire had 408.
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n".encode()
    sock = _raw(bounded, head + b'{"order":')
    started = time.monotonic()
    assert _answer(sock, 5).startswith(b"HTTP/1.1 408 ")
    assert 0.9 < time.monotonic() - started < 3
    assert bounded.wait_for(_requests_line(kind, "timeout", "408"), 1) == 1
    assert bounded.metric(_requests_line(kind, "client_error", "400")) == 0


def test_slow_but_steady_calls_are_not_cut_off(bounded: Service) -> None:
    base = f"http://127.0.0.1:{bounded.port}"

    def steady() -> Iterator[bytes]:
        for _ in range(4):
            time.sleep(0.5)
            yield b"x" * 100

    assert httpx.post(f"{base}/v1/blobs/stream", content=steady(), timeout=10).json()["size"] == 400
    # A response longer than the body timeout: its request ended long before.
    params = {"count": 5, "size": 1, "interval_ms": 400}
    lines = httpx.get(f"{base}/v1/stream", params=params, timeout=10).text.splitlines()
    assert len(lines) == 5
    # A WebSocket session outlives the header timeout of the request that opened it.
    with ws_connect(f"ws://127.0.0.1:{bounded.port}/v1/pingpong") as ws:
        time.sleep(1.5)
        ws.send('{"seq": 2, "payload": ""}')
        assert ws.recv(timeout=5) == '{"seq":2,"payload":""}'


def test_calls_past_the_concurrency_cap_get_503(bounded: Service) -> None:
    base = f"http://127.0.0.1:{bounded.port}"
    slow = {"order": {"order_id": "slow"}, "work_ms": 1500}
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(httpx.post, f"{base}/v1/orders", json=slow, timeout=10) for _ in "ab"]
        time.sleep(0.5)  # both are in the app
        refused = httpx.post(f"{base}/v1/orders", json={"order": {}}, timeout=5)
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200  # exempt
        assert [f.result().status_code for f in held] == [200, 200]
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert "concurrent calls" in refused.json()["detail"]
    assert bounded.wait_for(_requests_line("unary", "client_error", "503"), 1) == 1
    assert httpx.post(f"{base}/v1/orders", json={"order": {}}, timeout=5).status_code == 200

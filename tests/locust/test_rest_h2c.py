"""The REST user over HTTP/2 (--rest-http h2c): its response reader, every REST kind against the
REST service on Granian, and a clear failure against a server that speaks HTTP/1.1 only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from wirelab.contract import CALLS, KINDS_BY_PROTOCOL
from wirelab_locust.h2 import H2Response

from tests.locust.conftest import ALL_KINDS, LocustRun, Services, total
from tests.locust.test_headless import assert_metrics_match_locust
from tests.services.test_integration import Service, start


def _streamed(pieces: list[bytes]) -> H2Response:
    def answer(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"x-wirelab-size": "9"}, content=iter(pieces))

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        request = client.build_request("GET", "http://lab/v1/stream")
        return H2Response(client.send(request, stream=True))


def test_the_reader_reads_lines_and_sizes_across_frames_as_geventhttpclient_does() -> None:
    lines = _streamed([b'{"seq": 0}\n{"se', b'q": 1}', b"\n", b"tail"])
    assert lines.status_code == 200 and lines.get("x-wirelab-size") == "9"
    assert lines.get("x-missing", "none") == "none"
    assert lines.readline(b"\n") == b'{"seq": 0}\n'
    assert lines.readline(b"\n") == b'{"seq": 1}\n'
    assert lines.readline(b"\n") == b"tail"  # the last line needs no separator
    assert lines.readline(b"\n") == b""
    blob = _streamed([b"abc", b"defg", b"h"])
    assert blob.read(5) == b"abcde" and blob.read(5) == b"fgh" and blob.read(5) == b""


@pytest.fixture(scope="module")
def granian(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start("wirelab.rest", tmp_path_factory.mktemp("h2c"), {"WIRELAB_REST_HTTP": "2"})
    yield service
    assert service.stop() == 0


@pytest.mark.integration
def test_every_rest_kind_over_h2c_against_granian(
    granian: Service, services: Services, locust_run: LocustRun
) -> None:
    rest = Services(f"http://127.0.0.1:{granian.port}", services.grpc)
    run = locust_run.start(
        rest,
        *("-u", "4", "-r", "4", "-t", "5s", "--protocols", "rest", "--rest-http", "h2c"),
        *("--mix", ALL_KINDS, "--payload-bytes", "65536", "--chunk-bytes", "16384"),
        *("--stream-count", "5", "--ping-count", "3"),
    )
    run.wait_stopped()
    counts = assert_metrics_match_locust(run)
    assert set(counts) == {("rest", k) for k in KINDS_BY_PROTOCOL["rest"]}
    assert all(n > 0 for n in counts.values()), counts
    assert all(int(r["Failure Count"]) == 0 for r in run.stats_rows()), run.log()
    # The server counted each call the client did (bidi's WebSocket runs on HTTP/1.1), plus at
    # most one per user: a call in flight when Locust stopped its user is the server's only.
    for kind in ("unary", "server_stream", "upload_chunked", "download"):
        served = granian.metric(
            f'wirelab_server_requests_total{{code="200",kind="{kind}",outcome="ok"'
        )
        assert counts[("rest", kind)] <= served <= counts[("rest", kind)] + 4, kind


@pytest.mark.integration
def test_h2c_against_a_server_that_speaks_http_1_1_only_fails_every_call_clearly(
    services: Services, locust_run: LocustRun, tmp_path: Path
) -> None:
    run = locust_run.start(
        services,
        *("-u", "1", "-r", "1", "-t", "2s", "--protocols", "rest", "--rest-http", "h2c"),
        *("--mix", "unary=1"),
    )
    run.wait_stopped()
    samples = run.metrics()
    labels = {"protocol": "rest", "kind": "unary", "call": CALLS["unary"]}
    calls = total(samples, "wirelab_client_requests_total", **labels)
    failed = total(samples, "wirelab_client_requests_total", **labels, outcome="connection_error")
    assert calls > 0 and failed == calls, run.log()

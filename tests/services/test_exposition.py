"""The services' /metrics endpoint serves prometheus_client's text of every call, and speaks
what Prometheus expects."""

from __future__ import annotations

import gzip
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Summary,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)
from prometheus_client import metrics as library_metrics
from prometheus_client.parser import text_string_to_metric_families
from wirelab import exposition, probe
from wirelab.core import PayloadBudget
from wirelab.metrics import ServerMetrics


@pytest.fixture(autouse=True)
def no_created_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the services run (wirelab.serving): no _created samples; restored afterwards."""
    monkeypatch.setattr(library_metrics, "_use_created", library_metrics._use_created)
    disable_created_metrics()  # type: ignore[no-untyped-call]


def _exercised(protocol: str) -> tuple[ServerMetrics, CollectorRegistry]:
    """Every kind finished with several outcomes, raw codes the pre-initialisation does not know,
    an unknown kind, open calls, streams with and without a first message, odd float values."""
    registry = CollectorRegistry()
    m = ServerMetrics(protocol, registry, "async")
    open_calls = [m.start("bidi"), m.start("download")]
    ok = "OK" if protocol == "grpc" else "200"
    for i, kind in enumerate(("unary", "server_stream", "upload_chunked", "download", "other")):
        for j in range(3 + i):
            call = m.start(kind)
            call.received(10**j, messages=j)
            if j:
                call.sent(7 * j + i)
            call.finish("ok", ok)
        m.start(kind).finish("client_error", "422" if protocol == "rest" else "OUT_OF_RANGE")
        m.start(kind).finish("timeout", "504" if protocol == "rest" else "DEADLINE_EXCEEDED")
    long_call = m.start("upload", started=0.0)  # a duration past the last bucket
    long_call.received(3 * 2**30)
    long_call.finish("server_error", "500" if protocol == "rest" else "INTERNAL")
    open_calls[0].sent(1)
    budget = PayloadBudget(1000)
    m.budget = budget
    budget.acquire(300)
    return m, registry


@pytest.fixture
def served() -> Iterator[tuple[str, ServerMetrics]]:
    m, registry = _exercised("rest")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = exposition.start_server("127.0.0.1", port, registry)
    yield f"http://127.0.0.1:{port}/metrics", m
    server.shutdown()
    server.server_close()


def _get(url: str, **headers: str) -> tuple[dict[str, str], bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
        return dict(r.headers), r.read()


def test_endpoint_serves_text_format_with_process_metrics(
    served: tuple[str, ServerMetrics],
) -> None:
    url, m = served
    # Prometheus prefers OpenMetrics; the text format 0.0.4 is among what it accepts.
    headers, payload = _get(url, Accept="application/openmetrics-text;version=1.0.0,*/*;q=0.1")
    assert headers["Content-Type"] == exposition.CONTENT_TYPE
    assert "Content-Encoding" not in headers
    text = payload.decode()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"wirelab_server_requests", "wirelab_server_request_duration_seconds"} <= names
    assert "process_cpu_seconds" in names  # the default registry's collectors follow
    assert text.index("wirelab_server_requests") < text.index("process_cpu_seconds")
    m.start("unary").finish("ok", "200")
    _, again = _get(url)
    assert again != payload  # rendered per scrape, never a stale page
    # Every queued call is flushed into the instruments before the page is rendered.
    assert again.startswith(generate_latest(m.registry))


def test_endpoint_gzips_when_asked(served: tuple[str, ServerMetrics]) -> None:
    url, _ = served
    headers, payload = _get(url, **{"Accept-Encoding": "deflate, gzip;q=0.9"})
    assert headers["Content-Encoding"] == "gzip"
    plain = gzip.decompress(payload)
    assert b"wirelab_server_requests_total{" in plain
    assert len(payload) * 5 < len(plain)


def test_off_still_serves_process_metrics() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = exposition.start_server("127.0.0.1", port, None)
    try:
        _, payload = _get(f"http://127.0.0.1:{port}/metrics")
    finally:
        server.shutdown()
        server.server_close()
    assert b"process_cpu_seconds_total" in payload
    assert b"wirelab_server" not in payload


def test_a_scraper_gone_mid_page_leaves_no_traceback_but_other_errors_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = exposition.start_server("127.0.0.1", 0, None)
    request = socket.socket()  # stands in for the scraper's connection
    try:
        for error in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
            try:
                raise error
            except ConnectionError:
                server.handle_error(request, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a bug")
        except ValueError:
            server.handle_error(request, ("127.0.0.1", 1))
        assert "ValueError: a bug" in capsys.readouterr().err
    finally:
        request.close()
        server.shutdown()
        server.server_close()


def test_a_taken_port_raises() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(OSError):
            exposition.start_server("127.0.0.1", s.getsockname()[1], None)


def test_healthz_says_why_a_service_cannot_serve_and_its_healthcheck_fails() -> None:
    """The AMQP consumer's readiness (no API port of its own): 503 with the reason, then 200;
    the container healthcheck's check (wirelab.probe) fails, then passes. Without ``ready`` the
    path is metrics."""
    problem: list[str | None] = ["not connected to the broker yet"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = exposition.start_server("127.0.0.1", port, None, lambda: problem[0])
    plain = exposition.start_server("127.0.0.1", 0, None)
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=5)
        assert refused.value.code == 503
        assert refused.value.read() == b"not connected to the broker yet"
        assert probe.http_ok("127.0.0.1", port) == "503 not connected to the broker yet"
        problem[0] = None
        with urllib.request.urlopen(url, timeout=5) as ok:
            assert (ok.status, ok.read()) == (200, b"ok")
        assert probe.http_ok("127.0.0.1", port) is None
        _, payload = _get(f"http://127.0.0.1:{plain.server_address[1]}/healthz")
        assert b"process_cpu_seconds_total" in payload
    finally:
        for each in (server, plain):
            each.shutdown()
            each.server_close()


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_text_page_is_the_librarys_text_scrape_after_scrape(protocol: str) -> None:
    """The kept names and labels never serve a stale value, a new series or an odd label."""
    m, registry = _exercised(protocol)
    odd = Counter("wirelab_odd", "help with \\ and\nnewline", ["peer"], registry=registry)
    page = exposition.TextPage(registry)
    assert page() == generate_latest(registry)
    m.start("unary").finish("ok", "OK" if protocol == "grpc" else "200")
    m.start("unary").finish("client_error", "418")  # a series first seen now
    odd.labels('a "quoted" \\ value\nover two lines').inc(2.5e-7)
    odd.labels("1e+06").inc(1e6)
    assert page() == generate_latest(registry)


def test_text_page_keeps_a_bounded_number_of_series(monkeypatch: pytest.MonkeyPatch) -> None:
    m, registry = _exercised("rest")
    page = exposition.TextPage(registry)
    monkeypatch.setattr(exposition.TextPage, "MAX_SERIES", 10)
    page()
    assert len(page._series) > 10
    m.start("unary").finish("ok", "200")
    assert page() == generate_latest(registry)  # forgotten, then written again
    assert len(page._series) <= len(generate_latest(registry).splitlines())


@pytest.mark.parametrize("kind", ["summary", "created"])
def test_text_page_refuses_what_it_cannot_write_as_the_library_does(kind: str) -> None:
    """A summary, or a counter's _created sample, which the library moves to a family of its
    own: a loud error, not a page that differs from the library's."""
    registry = CollectorRegistry()
    if kind == "summary":
        Summary("wirelab_s", "a summary", registry=registry).observe(1)
    else:
        enable_created_metrics()  # type: ignore[no-untyped-call]
        Counter("wirelab_c", "a counter", registry=registry).inc()
    with pytest.raises(ValueError, match="wirelab_"):
        exposition.TextPage(registry)()

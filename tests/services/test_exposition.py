"""The services' /metrics renderer gives exactly prometheus_client's text, and its HTTP endpoint
speaks what Prometheus expects."""

from __future__ import annotations

import gzip
import socket
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Summary, generate_latest
from prometheus_client import metrics as library_metrics
from prometheus_client.parser import text_string_to_metric_families
from wirelab import exposition
from wirelab.core import PayloadBudget
from wirelab.exposition import Exposition
from wirelab.metrics import ServerMetrics


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
    m.report_budget(budget)
    budget.acquire(300)
    return m, registry


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
@pytest.mark.parametrize("created", [True, False])
def test_renders_exactly_what_the_library_renders(
    protocol: str, created: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(library_metrics, "_use_created", created)
    m, registry = _exercised(protocol)
    ours = Exposition(m.instruments, m.flush)
    first = ours.render()
    assert first == generate_latest(registry).decode()
    # A second scrape reuses the cached prefixes and still follows every change.
    m.start("unary").finish("ok", "OK" if protocol == "grpc" else "200")
    m.start("unary").finish("cancelled", "CANCELLED" if protocol == "grpc" else "499")
    second = ours.render()
    assert second != first
    assert second == generate_latest(registry).decode()


def test_label_values_are_escaped_like_the_library() -> None:
    registry = CollectorRegistry()
    c = Counter("odd", 'help with \\ and "quotes"\nand a newline', ["v"], registry=registry)
    c.labels('a"b\\c\nd').inc(2.5)
    g = Gauge("g", "gauge", ["v"], registry=registry)
    g.labels("x").set(1e21)
    h = Histogram("h", "h", ["v"], buckets=(0.5, 1e7), registry=registry)
    h.labels("é").observe(3e7)
    assert Exposition([c, g, h]).render() == generate_latest(registry).decode()


def test_refuses_what_it_cannot_render() -> None:
    registry = CollectorRegistry()
    with pytest.raises(TypeError, match="only labelled"):
        Exposition([Counter("plain", "no labels", registry=registry)])
    with pytest.raises(TypeError, match="only labelled"):
        Exposition([Summary("s", "summary", ["v"], registry=registry)])  # type: ignore[list-item]


@pytest.fixture
def served() -> Iterator[tuple[str, ServerMetrics]]:
    m, _ = _exercised("rest")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = exposition.start_server("127.0.0.1", port, Exposition(m.instruments, m.flush))
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
    m.start("unary").finish("ok", "200")
    _, again = _get(url)
    assert again != payload  # rendered per scrape, never a stale page


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


def test_a_taken_port_raises() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(OSError):
            exposition.start_server("127.0.0.1", s.getsockname()[1], None)

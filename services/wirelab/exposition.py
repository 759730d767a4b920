"""The services' /metrics endpoint: prometheus_client's own text format 0.0.4, served from a
thread of its own, gzipped at level 1 when the scraper accepts it.

The wirelab_server_* families were rendered by hand here while the REST page held ~2,300 series:
prometheus_client took 31 ms of CPU per scrape of it as OpenMetrics, the hand renderer 1.2 ms.
Since the series diet (819 wirelab samples on the REST page, 663 on gRPC, no `_created` ones:
wirelab.serving), `python -m wirelab_bench.perf.scrape` measures the library at 6.7 ms (REST) and
5.4 ms (gRPC) of CPU per scrape as text 0.0.4, after calls of every kind: 0.67 % of the service's
core at the lab's 1 s scrape interval, within the 1 % that the hand renderer (0.4-0.5 ms by the
same method, which read the library's private attributes) had to beat. Always text 0.0.4,
whatever the Accept header asks for: OpenMetrics costs the library 11.2 ms (1.1 % of a core),
and every Prometheus accepts the text format.

gzip at level 1 (0.1 ms for the REST page, against 4 ms at level 9 for the old 250 KB page).
Compression matters here: scrapes cross the container's network interface, where cAdvisor counts
the bytes the lab compares.
"""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import gzip_accepted

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
GZIP_LEVEL = 1


def body(registries: Sequence[CollectorRegistry]) -> bytes:
    """The whole /metrics page: each registry's families in turn."""
    return b"".join(generate_latest(registry) for registry in registries)


class _Handler(BaseHTTPRequestHandler):
    server: _MetricsServer

    def do_GET(self) -> None:
        ready = self.server.ready
        if ready is not None and self.path == "/healthz":
            # A service without an API port of its own (the AMQP consumer) says here whether it
            # can serve: 200, or 503 with the reason.
            problem = ready()
            text = (problem or "ok").encode()
            self.send_response(503 if problem else 200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        payload = self.server.page()
        headers = [("Content-Type", CONTENT_TYPE)]
        if gzip_accepted(self.headers.get("Accept-Encoding") or ""):
            payload = gzip.compress(payload, compresslevel=GZIP_LEVEL)
            headers.append(("Content-Encoding", "gzip"))
        self.send_response(200)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged: one a second per scraper would drown the service's log."""


class _MetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        page: Callable[[], bytes],
        ready: Callable[[], str | None] | None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.page = page
        self.ready = ready
        super().__init__(address, _Handler)


def start_server(
    host: str,
    port: int,
    registry: CollectorRegistry | None,
    ready: Callable[[], str | None] | None = None,
) -> ThreadingHTTPServer:
    """Serve /metrics (any path, like prometheus_client's server) from a daemon thread: the
    ``registry`` (the wirelab_server_* families; None with metrics off), then the default registry
    with the process and Python collectors; with ``ready`` (None when ready, else why not), also
    /healthz. Raises OSError when the port cannot be bound."""
    registries = (REGISTRY,) if registry is None else (registry, REGISTRY)
    server = _MetricsServer((host, port), lambda: body(registries), ready)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server

"""The services' /metrics endpoint, from a thread of its own: the text format 0.0.4 (OpenMetrics to
a scraper that asks for it, with traces on), gzipped when the scraper accepts it."""

from __future__ import annotations

import gzip
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
GZIP_LEVEL = 1  # docs/services.md#gzip-at-level-1


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labels(labels: Mapping[str, str]) -> str:
    """Labels by name, values escaped, as both formats write a sample's and an exemplar's."""
    return ",".join(f'{name}="{_escape(value)}"' for name, value in sorted(labels.items()))


def _exemplar(exemplar: Exemplar) -> str:
    """An exemplar as OpenMetrics writes it after its sample's value."""
    value = floatToGoString(exemplar.value)  # type: ignore[no-untyped-call]
    stamp = "" if exemplar.timestamp is None else f" {exemplar.timestamp}"
    return f" # {{{_labels(exemplar.labels)}}} {value}{stamp}"


# Written here, not by the library: docs/services.md#the-page-written-here-not-by-the-library
class TextPage:
    """A registry's counters, gauges and histograms as the text format 0.0.4, byte for byte as
    ``generate_latest`` writes them, or as the library's OpenMetrics 1.0.0 with exemplars but for
    its ``# EOF`` (page() adds it); names and labels are written once, values at each scrape."""

    # What a sample's name may add to its family's.
    _SUFFIXES: ClassVar[dict[str, frozenset[str]]] = {
        "counter": frozenset({"_total"}),
        "gauge": frozenset({""}),
        "histogram": frozenset({"_bucket", "_count", "_sum"}),
    }
    # Series are the contract's label values times the codes seen: bounded, but a page of
    # unforeseen ones must not grow the cache without end.
    MAX_SERIES = 20_000

    def __init__(self, registry: CollectorRegistry, openmetrics: bool = False) -> None:
        self.registry = registry
        self.openmetrics = openmetrics
        self._heads: dict[str, str] = {}
        self._series: dict[tuple[str, ...], str] = {}

    def _head(self, metric: Metric) -> str:
        if metric.type not in self._SUFFIXES:
            raise ValueError(f"{metric.name}: no text for a {metric.type}")
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        name = metric.name
        if self.openmetrics:
            doc = doc.replace('"', r"\"")
        elif metric.type == "counter":
            name += "_total"
        return f"# HELP {name} {doc}\n# TYPE {name} {metric.type}\n"

    def __call__(self) -> bytes:
        out: list[str] = []
        add = out.append
        heads, series = self._heads, self._series
        if len(series) > self.MAX_SERIES:
            series.clear()
        for metric in self.registry.collect():
            head = heads.get(metric.name)
            if head is None:
                head = heads[metric.name] = self._head(metric)
            add(head)
            for sample in metric.samples:
                labels = sample.labels
                key = (sample.name, *labels.values())
                prefix = series.get(key)
                if prefix is None:
                    if sample.name[len(metric.name) :] not in self._SUFFIXES[metric.type]:
                        # A _created sample (serving.instruments turns them off), which the
                        # library would move to a family of its own.
                        raise ValueError(
                            f"{sample.name}: not a sample of {metric.type} {metric.name}"
                        )
                    inner = _labels(labels)
                    prefix = f"{sample.name}{{{inner}}} " if inner else f"{sample.name} "
                    series[key] = prefix
                add(prefix)
                add(floatToGoString(sample.value))  # type: ignore[no-untyped-call]
                if sample.exemplar is not None and self.openmetrics:
                    add(_exemplar(sample.exemplar))
                add("\n")
        return "".join(out).encode()


def asks_openmetrics(accept: str) -> bool:
    """Whether an Accept header takes OpenMetrics, as prometheus_client's choose_encoder reads it
    (Prometheus 3 asks for it first, then text)."""
    try:
        return choose_encoder(accept)[1].startswith("application/openmetrics-text")
    except TypeError:  # a version that is not a number, which the library cannot compare
        return False


def page(registry: CollectorRegistry | None, openmetrics: bool = False) -> Callable[[], bytes]:
    """The whole /metrics page: ``registry``'s families (TextPage), then the default registry's
    process and Python collectors by the library; with ``openmetrics``, ending in ``# EOF``."""
    library = openmetrics_latest if openmetrics else generate_latest
    if registry is None:
        return lambda: library(REGISTRY)
    wirelab = TextPage(registry, openmetrics)
    return lambda: wirelab() + library(REGISTRY)


class _Handler(BaseHTTPRequestHandler):
    server: _MetricsServer

    def do_GET(self) -> None:
        ready = self.server.ready
        if ready is not None and self.path == "/healthz":
            # A service without an API port of its own (the AMQP consumer) says here whether it
            # can serve: 200, or 503 with the reason.
            problem = ready()
            text = (problem or "ok").encode()
            self._send(503 if problem else 200, text, "text/plain; charset=utf-8")
            return
        openmetrics = self.server.openmetrics
        if openmetrics is not None and asks_openmetrics(self.headers.get("Accept") or ""):
            payload, kind = openmetrics(), OPENMETRICS_CONTENT_TYPE
        else:
            payload, kind = self.server.page(), CONTENT_TYPE
        if gzip_accepted(self.headers.get("Accept-Encoding") or ""):
            self._send(200, gzip.compress(payload, compresslevel=GZIP_LEVEL), kind, "gzip")
        else:
            self._send(200, payload, kind)

    def _send(self, status: int, payload: bytes, kind: str, encoding: str = "") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        if encoding:
            self.send_header("Content-Encoding", encoding)
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
        openmetrics: Callable[[], bytes] | None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.page, self.ready, self.openmetrics = page, ready, openmetrics
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A scraper that left mid-page (its timeout, on a loaded machine) is not an error of
        ours: socketserver would print a BrokenPipeError traceback into the service's log."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def start_server(
    host: str,
    port: int,
    registry: CollectorRegistry | None,
    ready: Callable[[], str | None] | None = None,
    openmetrics: bool = False,
) -> ThreadingHTTPServer:
    """Serve /metrics (any path) from a daemon thread: ``registry`` (None with metrics off), then
    the default registry; with ``ready`` (None when ready, else why not) also /healthz; with
    ``openmetrics``, OpenMetrics to a scraper that asks for it. OSError if the port is taken."""
    exemplars = page(registry, openmetrics=True) if openmetrics else None
    server = _MetricsServer((host, port), page(registry), ready, exemplars)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server

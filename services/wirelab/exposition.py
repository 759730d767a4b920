"""The services' /metrics endpoint: the Prometheus text format, rendered cheaply enough to scrape
every second.

prometheus_client renders every sample through its generic path: a Sample object per bucket,
each label name validated and escaped again on every scrape. Measured on this machine for the
REST service's ~2,300 series (every kind, outcome and bucket pre-initialised): 31 ms of CPU per
scrape as OpenMetrics (what Prometheus asks for), 19 ms as text 0.0.4, plus 4 ms to gzip it at
level 9. At the lab's 1 s scrape interval that is 3.5 % of the service's core, most of the 5 %
observer-effect budget, and the services run on one core. So the wirelab_server_* families are
rendered here instead, straight from the instruments: each series' name and labels are
formatted once and kept, each scrape formats only the values (about 1.5 ms for the same series),
and only the histogram children whose counts moved since the last scrape (0.5 ms when one kind is
being called, as in the observer-effect benchmark).
The output is byte for byte what ``prometheus_client.generate_latest`` gives for the same
instruments (a unit test compares them after every kind of call); the process, platform and
garbage-collector collectors of the default registry are cheap and still rendered by the library.

Served as the Prometheus text format 0.0.4, which every Prometheus version accepts; gzip at
level 1 when the scraper accepts it (0.35 ms instead of 4 ms for 250 KB, 11 KB instead of 9 KB
on the wire). Compression matters here: scrapes cross the container's network interface, where
cAdvisor counts the bytes the lab compares.
"""

from __future__ import annotations

import gzip
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import generate_latest as library_render
from prometheus_client import metrics as library_metrics
from prometheus_client.exposition import gzip_accepted
from prometheus_client.utils import floatToGoString

# The library's own number formatting (untyped there).
_number = cast(Callable[[float], str], floatToGoString)
_ZERO = _number(0.0)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Level 1: measured 0.35 ms and 11 KB for the REST exposition (level 9: 4 ms and 9 KB).
GZIP_LEVEL = 1


def _escape(value: str) -> str:
    """A label value as the text format writes it (prometheus_client's own escaping)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _help(name: str, documentation: str, kind: str) -> str:
    doc = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n"


def _selector(labels: Sequence[tuple[str, str]]) -> str:
    # Labels sorted by name, as prometheus_client writes them.
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels)) + "}"


class _Family:
    """One labelled instrument: its headers, and each child's line prefixes, built once."""

    def __init__(self, metric: Counter | Gauge | Histogram) -> None:
        # Read through the library's internals (children, values, bounds): pinned in pyproject,
        # and the byte-for-byte test against generate_latest fails if they change.
        self.metric: Any = metric
        name, doc = metric._name, metric._documentation
        self.kind = metric._type
        self.head = _help(name + "_total" if self.kind == "counter" else name, doc, self.kind)
        self.created_head = _help(name + "_created", doc, "gauge")
        self.prefixes: dict[tuple[str, ...], tuple[str, ...]] = {}
        # Histograms: each child's lines as last rendered, with the raw bucket counts and sum
        # they show. Under load most children do not move between scrapes (only the kinds being
        # called do), and reading their values costs far less than formatting them again.
        self.rendered: dict[tuple[str, ...], tuple[list[float], str]] = {}

    def _prefixes(self, labelvalues: tuple[str, ...]) -> tuple[str, ...]:
        """The text before each value of one child, the ``_created`` line's last."""
        m = self.metric
        name = m._name
        labels = list(zip(m._labelnames, labelvalues, strict=True))
        series = _selector(labels)
        if self.kind == "counter":
            return (f"{name}_total{series} ", f"{name}_created{series} ")
        if self.kind == "gauge":
            return (f"{name}{series} ",)
        buckets = tuple(
            f"{name}_bucket{_selector([*labels, ('le', _number(bound))])} "
            for bound in m._upper_bounds
        )
        tail = (f"{name}_count{series} ", f"{name}_sum{series} ", f"{name}_created{series} ")
        return (*buckets, *tail)

    def render(self, out: list[str], created: bool) -> None:
        m = self.metric
        with m._lock:
            children = list(m._metrics.items())
        out.append(self.head)
        created_lines: list[str] = []
        for labelvalues, child in children:
            prefixes = self.prefixes.get(labelvalues)
            if prefixes is None:
                prefixes = self.prefixes[labelvalues] = self._prefixes(labelvalues)
            if self.kind != "histogram":
                out.append(f"{prefixes[0]}{_number(child._value.get())}\n")
                if self.kind == "gauge":
                    continue  # a gauge has no _created series
            else:
                # The values as stored (prometheus_client's MutexValue); an unlocked read, as
                # a scrape never was a snapshot across the buckets anyway.
                raw = [bucket._value for bucket in child._buckets]
                raw.append(child._sum._value)
                cached = self.rendered.get(labelvalues)
                if cached is not None and cached[0] == raw:
                    out.append(cached[1])
                else:
                    lines = _histogram_lines(prefixes, raw)
                    self.rendered[labelvalues] = (raw, lines)
                    out.append(lines)
            if created:
                created_lines.append(f"{prefixes[-1]}{_number(child._created)}\n")
        if created_lines:
            out.append(self.created_head)
            out.extend(created_lines)


def _histogram_lines(prefixes: tuple[str, ...], raw: list[float]) -> str:
    """One histogram child's bucket, count and sum lines (``raw``: bucket counts, then sum)."""
    lines = []
    # Cumulative counts repeat wherever a bucket is empty: formatted when they move.
    acc, count = 0.0, _ZERO
    for prefix, got in zip(prefixes, raw[:-1], strict=False):
        if got:
            acc += got
            count = _number(acc)
        lines.append(f"{prefix}{count}\n")
    lines.append(f"{prefixes[-3]}{count}\n{prefixes[-2]}{_number(raw[-1])}\n")
    return "".join(lines)


class Exposition:
    """Renders labelled Counter, Gauge and Histogram instruments as ``generate_latest`` would,
    after ``before`` (which brings batched instruments up to date)."""

    def __init__(
        self,
        metrics: Sequence[Counter | Gauge | Histogram],
        before: Callable[[], None] | None = None,
    ) -> None:
        for metric in metrics:
            if not isinstance(metric, Counter | Gauge | Histogram) or not metric._labelnames:
                raise TypeError(f"{metric!r}: only labelled counters, gauges and histograms")
        self.families = [_Family(m) for m in metrics]
        self.before = before
        self._lock = threading.Lock()  # prefix caches are filled by whichever scrape comes first

    def render(self) -> str:
        if self.before is not None:
            self.before()
        out: list[str] = []
        created = bool(library_metrics._use_created)
        with self._lock:
            for family in self.families:
                family.render(out, created)
        return "".join(out)


def body(exposition: Exposition | None, registry: CollectorRegistry = REGISTRY) -> bytes:
    """The whole /metrics page: the exposition's families, then the library's registry."""
    ours = exposition.render().encode() if exposition is not None else b""
    return ours + library_render(registry)


class _Handler(BaseHTTPRequestHandler):
    server: _MetricsServer

    def do_GET(self) -> None:
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

    def __init__(self, address: tuple[str, int], page: Callable[[], bytes]) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.page = page
        super().__init__(address, _Handler)


def start_server(host: str, port: int, exposition: Exposition | None) -> ThreadingHTTPServer:
    """Serve /metrics (any path, like prometheus_client's server) from a daemon thread; raises
    OSError when the port cannot be bound."""
    server = _MetricsServer((host, port), lambda: body(exposition))
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server

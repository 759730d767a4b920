"""Benchmark: CPU per scrape of the services' /metrics pages, and per read of them by the runner.

Each service's wirelab_server_* families after calls of every kind, as the services render them
(wirelab.exposition.TextPage, text 0.0.4) and as prometheus_client does (text 0.0.4 and
OpenMetrics); with traces on and every call sampled, each bucket with an exemplar, as OpenMetrics
both ways; the CPU of one flush of 16,000 queued unary calls into the counts (a scrape's first
step); then CPU per read of each page and of a Locust child's page by the runner's reader
(wirelab_bench.scrape) and by prometheus_client's parser, which the runner used before."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics
from prometheus_client.parser import text_string_to_metric_families
from wirelab.contract import CANONICAL_CODES, EDGE_PROTOCOLS, KINDS_BY_PROTOCOL
from wirelab.exposition import TextPage
from wirelab.metrics import SAMPLED, Sampled, ServerMetrics
from wirelab_bench.knobs import parser
from wirelab_bench.scrape import parse
from wirelab_locust.metrics import ClientCollector, Gauges, Observations


def _calls(metrics: ServerMetrics) -> None:
    """Twenty finished calls of every kind, so every histogram moves between two scrapes."""
    ok = CANONICAL_CODES[metrics.protocol]["ok"]
    for kind in KINDS_BY_PROTOCOL[metrics.protocol]:
        for i in range(20):
            call = metrics.start(kind)
            call.received(100 * i)
            call.sent(1000 * i)
            call.finish("ok", ok)


def cpu_per_flush(calls: int, flushes: int, rounds: int) -> float:
    """Seconds of CPU per flush of ``calls`` queued unary calls (the cheapest round's mean)."""
    best = float("inf")
    for _ in range(rounds):
        metrics, spent = ServerMetrics("rest", CollectorRegistry(), "async"), 0.0
        for _ in range(flushes):
            for i in range(calls):
                call = metrics.start("unary")
                call.received(100)
                call.sent(200 + i % 50)
                call.finish("ok", "200")
            started = time.process_time()
            metrics.flush()
            spent += time.process_time() - started
        best = min(best, spent / flushes)
    return best


def cpu_per_scrape(
    render: Callable[[], bytes], metrics: ServerMetrics, scrapes: int, rounds: int
) -> float:
    """Seconds of this process's CPU per render, the calls between renders subtracted."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(scrapes):
            _calls(metrics)
            render()
        both = time.process_time() - started
        started = time.process_time()
        for _ in range(scrapes):
            _calls(metrics)
        best = min(best, (both - (time.process_time() - started)) / scrapes)
    return best


def cpu_per_read(read: Callable[[str], object], page: str, reads: int, rounds: int) -> float:
    """Seconds of this process's CPU per read of ``page`` (the cheapest round)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(reads):
            read(page)
        best = min(best, (time.process_time() - started) / reads)
    return best


def _library(page: str) -> object:
    return [s for family in text_string_to_metric_families(page) for s in family.samples]


def _locust_page() -> str:
    """A Locust child's page as the runner reads it: every series of both protocols."""
    observations = Observations()
    observations.preinitialise({"rest": "rest", "grpc": "grpc"})
    registry = CollectorRegistry()
    gauges = Gauges(users=1, workers=0, cpu={"local": 0.5})
    registry.register(ClientCollector(observations, lambda: gauges))
    return generate_latest(registry).decode()


def main(argv: Sequence[str] | None = None) -> int:
    disable_created_metrics()  # type: ignore[no-untyped-call]  # as wirelab.serving does
    a = parser("wirelab perf scrape-cost", __doc__, "WIRELAB_SCRAPE").parse_args(argv)
    pages: dict[str, str] = {}
    # Every call of a service with exemplars kept is sampled: each bucket a call reached has one.
    sampled = SAMPLED.set(Sampled("4bf92f3577b34da6a3ce929d0e0e4736"))
    for protocol in EDGE_PROTOCOLS:
        registry, traced = CollectorRegistry(), CollectorRegistry()
        metrics = ServerMetrics(protocol, registry, "async")
        with_exemplars = ServerMetrics(protocol, traced, "async")
        with_exemplars.keep_exemplars()
        _calls(metrics)
        page = generate_latest(registry)
        samples = sum(1 for line in page.splitlines() if not line.startswith(b"#"))
        renders: tuple[tuple[str, ServerMetrics, Callable[[], bytes]], ...] = (
            ("served", metrics, TextPage(registry)),
            ("text 0.0.4", metrics, lambda: generate_latest(registry)),  # noqa: B023 (used in the loop)
            ("OpenMetrics", metrics, lambda: openmetrics(registry)),  # type: ignore[no-untyped-call]  # noqa: B023
            ("served OpenMetrics, exemplars", with_exemplars, TextPage(traced, openmetrics=True)),
            ("OpenMetrics, exemplars", with_exemplars, lambda: openmetrics(traced)),  # type: ignore[no-untyped-call]  # noqa: B023
        )
        for fmt, measured, render in renders:
            cost = cpu_per_scrape(render, measured, a.scrapes, a.rounds)
            print(
                f"{protocol:4} {samples} samples, {len(page):,} B: {fmt:11} "
                f"{cost * 1000:.2f} ms of CPU per scrape, {cost * 100:.2f} % of a core at 1 s"
            )
        pages[protocol] = page.decode()
    SAMPLED.reset(sampled)
    flush = cpu_per_flush(16_000, 20, a.rounds)
    print(f"a flush of 16,000 queued unary calls: {flush * 1000:.2f} ms of CPU per flush")
    pages["locust"] = _locust_page()
    reads = max(1, a.scrapes // 10)
    for name, text in pages.items():
        samples = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        ours = cpu_per_read(lambda t: parse(t, name), text, reads, a.rounds)  # noqa: B023
        theirs = cpu_per_read(_library, text, reads, a.rounds)
        print(
            f"{name:6} page, {samples} samples: the runner's reader {ours * 1000:.1f} ms of CPU"
            f" per read, prometheus_client's parser {theirs * 1000:.1f} ms"
            f" ({theirs / ours:.1f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

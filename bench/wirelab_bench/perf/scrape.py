"""Benchmark: CPU per scrape of a service's wirelab_server_* families, as prometheus_client renders
them (text 0.0.4, which the services serve, and OpenMetrics), after calls of every kind."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics
from wirelab.contract import CANONICAL_CODES, EDGE_PROTOCOLS, KINDS_BY_PROTOCOL
from wirelab.metrics import ServerMetrics

from wirelab_bench.benchknobs import Knob, parser

KNOBS: tuple[Knob, ...] = (
    ("scrapes", int, 300, "scrapes timed per round"),
    ("rounds", int, 3, "rounds; the cheapest is reported (least disturbed by other work)"),
)


def _calls(metrics: ServerMetrics) -> None:
    """Twenty finished calls of every kind, so every histogram moves between two scrapes."""
    ok = CANONICAL_CODES[metrics.protocol]["ok"]
    for kind in KINDS_BY_PROTOCOL[metrics.protocol]:
        for i in range(20):
            call = metrics.start(kind)
            call.received(100 * i)
            call.sent(1000 * i)
            call.finish("ok", ok)


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


def main(argv: Sequence[str] | None = None) -> int:
    disable_created_metrics()  # type: ignore[no-untyped-call]  # as wirelab.serving does
    a = parser("python -m wirelab_bench.perf.scrape", __doc__, "WIRELAB_SCRAPE", KNOBS).parse_args(
        argv
    )
    for protocol in EDGE_PROTOCOLS:
        registry = CollectorRegistry()
        metrics = ServerMetrics(protocol, registry, "async")
        _calls(metrics)
        page = generate_latest(registry)
        samples = sum(1 for line in page.splitlines() if not line.startswith(b"#"))
        renders: tuple[tuple[str, Callable[[CollectorRegistry], bytes]], ...] = (
            ("text 0.0.4", generate_latest),
            ("OpenMetrics", openmetrics),
        )
        for fmt, render in renders:
            cost = cpu_per_scrape(
                lambda: render(registry),  # noqa: B023 (called before the loop moves on)
                metrics,
                a.scrapes,
                a.rounds,
            )
            print(
                f"{protocol:4} {samples} samples, {len(page):,} B: {fmt:11} "
                f"{cost * 1000:.2f} ms of CPU per scrape, {cost * 100:.2f} % of a core at 1 s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

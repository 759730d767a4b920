"""The AMQP arm's fire-and-forget confirmations over a run, from its edge's /metrics.

With WIRELAB_AMQP_SHAPE=fire-and-forget the edge answers an order once every queue has it; the
order is confirmed when all three replies are in, timed from its arrival at the edge into
wirelab_client_confirmation_seconds (services/wirelab/hops/confirm.py). A load generator sees
only the acceptance: the confirmations are read here, before and after a run.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import httpx
from wirelab_bench.histo import quantile
from wirelab_bench.scrape import scrape

FAMILY = "wirelab_client_confirmation_seconds_bucket"
# Orders accepted near a run's end are confirmed after it: read until the count stands still.
SETTLE_S = 30.0

Cumulative = list[tuple[float, float]]


def read(url: str) -> Cumulative:
    """The edge's confirmation histogram now (cumulative counts by bound); empty without it."""
    acc: dict[float, float] = {}
    try:
        samples = scrape(url, "amqp")
    except (httpx.HTTPError, ValueError):
        return []
    for name, labels, value in samples:
        if name == FAMILY:
            le = float(labels["le"])
            acc[le] = acc.get(le, 0.0) + value
    return sorted(acc.items())


def settled(url: str, timeout: float = SETTLE_S, every: float = 1.0) -> Cumulative:
    """The histogram once two reads ``every`` seconds apart agree (at most ``timeout``)."""
    last = read(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(every)
        now = read(url)
        if now == last:
            return now
        last = now
    return last


@dataclass(frozen=True)
class Confirmations:
    """Orders confirmed over a run, their confirmation times, and those slower than a bound."""

    confirmed: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    over_bound: float  # confirmed later than ``bound_ms``
    bound_ms: float  # the first bucket bound at or above the run's failure threshold


NONE = Confirmations(0.0, math.nan, math.nan, math.nan, math.nan, math.nan)


def between(before: Cumulative, after: Cumulative, threshold_ms: float) -> Confirmations:
    """The confirmations from ``before`` to ``after``. The histogram has no bound at every
    threshold: late ones are counted above the first bound at or above it (900 ms -> 1 s)."""
    if not after:
        return NONE
    start = dict(before)
    window = [(le, count - start.get(le, 0.0)) for le, count in after]
    confirmed = window[-1][1]
    if confirmed <= 0:
        return NONE
    bound, within = next((le, c) for le, c in window if le * 1000 >= threshold_ms)
    return Confirmations(
        confirmed=confirmed,
        p50_ms=1000 * quantile(0.5, window),
        p95_ms=1000 * quantile(0.95, window),
        p99_ms=1000 * quantile(0.99, window),
        over_bound=confirmed - within,
        bound_ms=1000 * bound,
    )

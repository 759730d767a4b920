"""What the overload and soak benchmarks share: the saturation search, the paced load, the
server's own count of outcomes, growth over a run, and how figures are printed."""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
from wirelab_bench.scrape import scrape

from wirelab_perf.loadtools import Load, ghz, wrk
from wirelab_perf.prober import Probe, between, median_ms, probing
from wirelab_perf.svcprocs import SERVER_CPU, Service, service

MIB = 1024 * 1024
# Closed-loop concurrency steps of the saturation search: the throughput stops growing well
# before 32 on one core (a call takes ~0.3 ms of CPU, the loopback round trip about as much).
STEPS = (4, 8, 16, 32)
SETTLE_S = 2.0


@dataclass
class Saturated:
    """A fresh service on its core, probed throughout, with its quiet baseline and the rate at
    which it saturates: where both stress commands start their load."""

    svc: Service
    probes: list[Probe]
    baseline_ms: float
    best: float


@contextmanager
def saturated(protocol: str, a: argparse.Namespace, ghz_binary: str) -> Iterator[Saturated]:
    with service(protocol, SERVER_CPU) as svc, probing(svc, a.probe_interval) as probes:
        time.sleep(1.0)  # first calls (connection, imports, caches) are not the baseline
        quiet = time.monotonic()
        time.sleep(a.baseline_seconds)
        baseline = median_ms(between(probes, quiet, time.monotonic()))
        at, best, steps = saturation(svc, ghz_binary)
        print(f"{protocol:4} baseline probe median {baseline:.2f} ms; saturation {best:,.0f} "
              f"calls/s from {at} concurrent (calls/s by concurrency {steps})")  # fmt: skip
        yield Saturated(svc, probes, baseline, best)


def knee(points: Sequence[tuple[int, float]], within: float = 0.05) -> tuple[int, float]:
    """From (concurrency, calls/s) steps: the fewest concurrent calls that reach within
    ``within`` of the best throughput, and that best throughput (the saturation rate)."""
    best = max(rate for _, rate in points)
    return min(c for c, rate in points if rate >= (1 - within) * best), best


def saturation(svc: Service, ghz_binary: str, seconds: int = 3) -> tuple[int, float, str]:
    """Closed-loop load at each of STEPS, as fast as answered: (knee, saturation calls/s, the
    steps as text). Returns once the service has let the search's connections go."""
    points = [(c, drive(svc, ghz_binary, 0.0, c, seconds).ok_per_second) for c in STEPS]
    time.sleep(SETTLE_S)
    at, best = knee(points)
    return at, best, " ".join(f"{c}:{rate:.0f}" for c, rate in points)


def drive(
    svc: Service,
    ghz_binary: str,
    rate: float,
    concurrency: int,
    seconds: int,
    latency_ms: float = 0.0,
) -> Load:
    """Small order calls from ``concurrency`` connections (wrk) or workers (ghz) for ``seconds``,
    offering ``rate`` calls/s (0: as fast as answered). ghz paces to the rate itself; wrk, which
    cannot, pauses each connection so that ``concurrency`` connections answered in
    ``latency_ms`` offer the rate. Either way at most ``concurrency`` calls are in flight: when
    the service falls behind, calls wait in the tool, as real clients' would."""
    if svc.protocol == "grpc":
        return ghz(ghz_binary, svc.address, concurrency, seconds, rps=rate)
    return wrk(svc.address, concurrency, seconds, pause_ms=pause_for(rate, concurrency, latency_ms))


def pause_for(rate: float, concurrency: int, latency_ms: float) -> float:
    """Each connection's pause between calls so that ``concurrency`` connections answered in
    ``latency_ms`` offer ``rate`` calls/s (0: as fast as answered)."""
    return max(0.0, concurrency * 1000 / rate - latency_ms) if rate > 0 else 0.0


def in_flight_for(rate: float, pause_ms: float) -> int:
    """Concurrent calls that offer ``rate`` calls/s when each waits ``pause_ms`` between calls."""
    return max(1, math.ceil(rate * pause_ms / 1000))


def outcomes(svc: Service) -> Counter[str]:
    """The service's own count of completed small order calls, by outcome/code, so far."""
    try:
        samples = scrape(svc.metrics_url, svc.protocol)
    except httpx.HTTPError as exc:
        return Counter({f"/metrics unreadable: {type(exc).__name__}": 1})
    return Counter(
        {
            f"{labels['outcome']}/{labels['code']}": int(value)
            for name, labels, value in samples
            if name == "wirelab_server_requests_total" and labels.get("kind") == "unary"
        }
    )


def growth(values: Sequence[float], fraction: float = 0.1) -> float:
    """Relative growth from the start of a series to its end: the median of its last
    ``fraction`` over the median of its first (at least one value each), minus one. Medians,
    so one sample caught mid-allocation does not decide."""
    n = max(1, int(len(values) * fraction))
    return statistics.median(values[-n:]) / statistics.median(values[:n]) - 1


def counts(codes: Counter[str]) -> str:
    """``200 x12,345, 503 x67``, most frequent first; ``none`` when empty."""
    shown = [f"{code} x{n:,}" for code, n in codes.most_common() if n]
    return ", ".join(shown) or "none"


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"

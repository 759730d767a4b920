"""The pure parts of the overload and soak benchmarks: saturation, pacing, recovery, growth,
and reading what wrk and ghz report."""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter

import pytest
from wirelab_perf.loadtools import parse_ghz, parse_wrk
from wirelab_perf.prober import Probe, periodic, recovery_seconds
from wirelab_perf.stress import counts, growth, in_flight_for, knee, pause_for

WRK_OUT = """Running 5s test @ http://127.0.0.1:8000/v1/orders
  1 threads and 600 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   173.22ms   67.95ms    1.02s    71.86%
  Latency Distribution
     50%  152.54ms
     75%  202.76ms
     90%  270.98ms
     99%    1.02s\x20
  6066 requests in 5.08s, 1.63MB read
  Socket errors: connect 0, read 3, write 0, timeout 7
  Non-2xx or 3xx responses: 120
Requests/sec:   1193.76
status 503 120
status 200 5946
"""


def test_wrk_report_counts_statuses_and_socket_errors() -> None:
    load = parse_wrk(WRK_OUT, 5)
    assert load.codes == Counter({"200": 5946, "503": 120, "socket read": 3, "socket timeout": 7})
    assert load.ok == 5946
    assert load.errors == Counter({"503": 120, "socket read": 3, "socket timeout": 7})
    assert load.ok_per_second == pytest.approx(1189.2)
    assert (load.p50_ms, load.p99_ms) == pytest.approx((152.54, 1020.0))


def test_ghz_report_counts_every_status_name() -> None:
    report = {
        "statusCodeDistribution": {"OK": 900, "ResourceExhausted": 80, "DeadlineExceeded": 2},
        "latencyDistribution": [
            {"percentage": 50, "latency": 2_500_000},
            {"percentage": 99, "latency": 40_000_000},
        ],
    }
    load = parse_ghz(report, 10)
    assert load.ok == 900
    assert load.errors == Counter({"ResourceExhausted": 80, "DeadlineExceeded": 2})
    assert (load.p50_ms, load.p99_ms) == (2.5, 40.0)
    # A run where every call failed has no latency distribution at all.
    failed = {"statusCodeDistribution": {"Unavailable": 5}, "latencyDistribution": None}
    empty = parse_ghz(failed, 1)
    assert empty.ok == 0 and math.isnan(empty.p50_ms)


def test_saturation_is_the_best_rate_reached_at_its_knee() -> None:
    # Throughput stops growing at 16; 32 is within 5 % of the best, noise, not a gain.
    assert knee([(4, 1000.0), (8, 1800.0), (16, 2400.0), (32, 2450.0)]) == (16, 2450.0)
    # A dip at the top still reports the best rate measured.
    assert knee([(4, 1000.0), (8, 2000.0), (16, 1500.0)]) == (8, 2000.0)


def test_pacing_offers_the_rate() -> None:
    # 300 calls/s from clients each pausing 100 ms needs 30 of them in flight.
    assert in_flight_for(300.0, 100.0) == 30
    assert in_flight_for(5.0, 100.0) == 1
    # 32 connections at 1,600/s: 20 ms a call each, of which 2 ms is the answer itself.
    assert pause_for(1600.0, 32, 2.0) == pytest.approx(18.0)
    assert pause_for(1e6, 32, 2.0) == 0.0
    assert pause_for(0.0, 32, 2.0) == 0.0


def _series(after_end: list[tuple[float, float, bool]]) -> list[Probe]:
    """Probes every 0.25 s before the load stops at t=100 (slow, under load), then ``after_end``
    given as (seconds after the end, latency in ms, ok)."""
    under = [Probe(90 + i * 0.25, 0.3, True) for i in range(40)]
    return under + [Probe(100 + t, ms / 1000, ok) for t, ms, ok in after_end]


def test_recovery_is_when_every_later_window_is_back_under_the_threshold() -> None:
    slow_then_fast = [(t / 4, 50.0 if t < 12 else 1.0, True) for t in range(40)]
    assert recovery_seconds(_series(slow_then_fast), 100.0, 2.0) == 3.0
    at_once = [(t / 4, 1.0, True) for t in range(40)]
    assert recovery_seconds(_series(at_once), 100.0, 2.0) == 0.0


def test_a_relapse_or_a_refusal_is_not_recovered() -> None:
    relapse = [(t / 4, 50.0 if t < 4 or 24 <= t < 28 else 1.0, True) for t in range(40)]
    assert recovery_seconds(_series(relapse), 100.0, 2.0) == 7.0
    # Fast refusals are not a recovered service.
    refused = [(t / 4, 0.5, t >= 20) for t in range(40)]
    assert recovery_seconds(_series(refused), 100.0, 2.0) == 5.0
    still_slow = [(t / 4, 50.0, True) for t in range(40)]
    assert recovery_seconds(_series(still_slow), 100.0, 2.0) is None
    # A silent second (no probe answered in it) is not good either.
    gap = [(t / 4, 1.0, True) for t in range(40) if not 8 <= t < 12]
    assert recovery_seconds(_series(gap), 100.0, 2.0) == 3.0
    assert recovery_seconds(_series([]), 100.0, 2.0) is None


def test_growth_compares_the_ends_of_a_series_by_medians() -> None:
    flat = [100.0] * 50
    assert growth(flat) == 0.0
    # One spike in the first tenth does not count; a steady climb does.
    assert growth([500.0, 100.0, 100.0, 100.0, 100.0] + [100.0] * 44 + [100.0]) == 0.0
    climb = [100.0 + i for i in range(100)]
    assert growth(climb) == pytest.approx(194.5 / 104.5 - 1)
    assert growth([100.0, 112.0]) == pytest.approx(0.12)


def test_counts_list_most_frequent_first() -> None:
    assert counts(Counter({"503": 5, "200": 1000, "socket timeout": 0})) == "200 x1,000, 503 x5"
    assert counts(Counter()) == "none"


def test_periodic_skips_slots_a_slow_call_overran() -> None:
    calls: list[float] = []

    def slow() -> float:
        calls.append(time.monotonic())
        time.sleep(0.12)
        return calls[-1]

    start = time.monotonic()
    with periodic(0.05, slow) as got:
        time.sleep(0.5)
    elapsed = time.monotonic() - start
    # Every 0.05 s would be 10 calls in 0.5 s; skipping the overrun slots leaves one per
    # 0.15 s (the next slot after each 0.12 s call), never a catch-up burst.
    assert 2 <= len(got) <= elapsed / 0.15 + 1
    assert all(b - a >= 0.12 for a, b in itertools.pairwise(got))

"""Histogram-delta quantiles agree with Prometheus' histogram_quantile."""

from __future__ import annotations

import math

import pytest
from wirelab_bench.histo import buckets, delta, key, quantile, total
from wirelab_bench.peaks import Peaks


def _snap(
    counts: dict[float, float], **labels: str
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        key("h_bucket", {**labels, "le": "+Inf" if math.isinf(le) else repr(le)}): c
        for le, c in counts.items()
    }


def test_quantile_interpolates_inside_the_bucket() -> None:
    cum = [(0.1, 10.0), (0.2, 30.0), (math.inf, 40.0)]
    assert quantile(0.5, cum) == pytest.approx(0.15)  # rank 20: half-way through (0.1, 0.2]
    assert quantile(0.25, cum) == pytest.approx(0.1 + 0.1 * 0.0)  # rank 10: top of bucket one
    assert quantile(0.1, cum) == pytest.approx(0.04)


def test_quantile_in_the_inf_bucket_returns_the_largest_finite_bound() -> None:
    assert quantile(0.99, [(0.1, 10.0), (0.2, 30.0), (math.inf, 40.0)]) == 0.2


def test_empty_histogram_is_nan_and_bad_q_raises() -> None:
    assert math.isnan(quantile(0.5, []))
    assert math.isnan(quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]))
    with pytest.raises(ValueError):
        quantile(1.5, [(0.1, 1.0)])


def test_delta_of_snapshots_gives_the_window_only() -> None:
    before = _snap({0.1: 100, 0.2: 100, math.inf: 100}, kind="unary")
    after = _snap({0.1: 100, 0.2: 110, math.inf: 120}, kind="unary")
    window = buckets(delta(before, after), "h", kind="unary")
    assert window == [(0.1, 0.0), (0.2, 10.0), (math.inf, 20.0)]
    # Every observation of the window lies above 0.1 s, although most of all time lies below.
    assert quantile(0.5, window) == pytest.approx(0.2)


def test_counter_reset_counts_from_zero() -> None:
    k = key("c_total", {})
    assert delta({k: 50.0}, {k: 7.0}) == {k: 7.0}
    assert delta({}, {k: 3.0}) == {k: 3.0}


def test_total_and_buckets_sum_over_unmatched_labels() -> None:
    snap = _snap({0.1: 1, math.inf: 2}, kind="a", outcome="ok") | _snap(
        {0.1: 3, math.inf: 4}, kind="a", outcome="timeout"
    )
    assert buckets(snap, "h", kind="a") == [(0.1, 4.0), (math.inf, 6.0)]
    assert total(snap, "h_bucket", kind="a", outcome="ok") == 3.0
    assert total(snap, "h_bucket", kind="b") == 0.0


def test_peaks_keep_highest_gauge_and_fastest_cpu_rate() -> None:
    cpu = key("server_cpu_seconds", {"job": "rest"})
    rss = key("server_resident_memory", {"job": "rest"})
    peaks = Peaks()
    peaks.add({cpu: 10.0, rss: 5.0}, now=0.0)
    peaks.add({cpu: 10.5, rss: 9.0}, now=1.0)  # 0.5 core
    peaks.add({cpu: 12.0, rss: 7.0}, now=2.0)  # 1.5 cores
    peaks.add({cpu: 12.5, rss: 7.0}, now=2.1)  # too close to pair: 5 cores would be jitter
    peaks.add({cpu: 13.0, rss: 7.0}, now=3.0)  # 1 core since t=2
    peaks.add(None)
    assert peaks.values[rss] == 9.0
    assert peaks.values[("server_cpu_peak_rate", cpu[1])] == pytest.approx(1.5)
    assert cpu not in peaks.values


def test_peaks_sum_the_rates_of_a_services_containers_at_one_instant() -> None:
    """Export.apart: cAdvisor's series per container are read apart and their rates summed;
    one that leaves or restarts adds no negative rate."""
    svc = "container_label_com_docker_compose_service"

    def cpu(container: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        return key("container_cpu_seconds", {svc: "rest-b", "id": container})

    peaks = Peaks()
    peaks.add({cpu("a"): 1.0, cpu("b"): 5.0}, now=0.0)
    peaks.add({cpu("a"): 1.5, cpu("b"): 5.25}, now=1.0)  # 0.5 + 0.25 cores
    peaks.add({cpu("a"): 2.0, cpu("b"): 0.5}, now=2.0)  # b restarted: 0.5 + nothing
    assert peaks.values == {("container_cpu_peak_rate", ((svc, "rest-b"),)): 0.75}

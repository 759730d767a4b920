"""A window's range exports from Prometheus: one delta per series, summed per group afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from wirelab_bench.histo import delta, total
from wirelab_bench.prom import Prometheus
from wirelab_bench.promql import EXPORTS, SERVICE_LABEL

CPU = EXPORTS["container_cpu_seconds"]


def _series(service: str, container: str, values: list[tuple[float, float]]) -> dict[str, Any]:
    return {
        "metric": {SERVICE_LABEL: service, "id": f"/system.slice/docker-{container}.scope"},
        "values": [[t, str(v)] for t, v in values],
    }


def _export(monkeypatch: pytest.MonkeyPatch, result: list[dict[str, Any]]) -> Any:
    prometheus = Prometheus("http://prometheus.invalid:9090")
    asked: list[str] = []

    def answer(path: str, params: dict[str, str]) -> Any:
        asked.append(params["query"])
        return {"resultType": "matrix", "result": result}

    monkeypatch.setattr(prometheus, "_get", answer)
    window = prometheus.export_window(100.0, 110.0, 1.0, {"container_cpu_seconds": CPU})
    assert asked == [CPU.promql]
    return window


def test_the_containers_cgroups_are_queried_apart() -> None:
    assert CPU.promql == (
        f'sum by ({SERVICE_LABEL}, id) (container_cpu_usage_seconds_total{{{SERVICE_LABEL}!=""}})'
    )
    assert CPU.merged({SERVICE_LABEL: "rest", "id": "/a"}) == ((SERVICE_LABEL, "rest"),)


def test_a_container_that_leaves_mid_window_is_not_read_as_a_reset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lowrate run of 27 Nov 17:09: the recreated rest container's old cgroup (frozen at
    20 s) vanished 7 s into the window. Summed first, rest fell from 60 to 45 s and the drop read
    as a reset: 45 s of CPU in 10 s, 429 % of a one-CPU limit. Apart: the new cgroup's 5 s."""
    old = _series("rest", "old", [(100.0 + t, 20.0) for t in range(8)])
    new = _series("rest", "new", [(100.0 + t, 40.0 + 0.5 * t) for t in range(11)])
    window = _export(monkeypatch, [old, new])
    cpu = total(delta(window.start, window.end), "container_cpu_seconds", **{SERVICE_LABEL: "rest"})
    assert cpu == pytest.approx(5.0)
    peak = total(window.peak, "container_cpu_peak_rate", **{SERVICE_LABEL: "rest"})
    assert peak == pytest.approx(0.5)


def test_replicas_peak_together_only_when_they_do_at_one_instant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three replicas of one service: their CPU deltas add up, and the peak is the fastest
    summed rate at one instant, not the sum of each replica's own fastest (which would be 3)."""
    replicas = [
        _series("rest-b", name, [(100.0 + t, (1.0 if t > i else 0.0)) for t in range(4)])
        for i, name in enumerate(("r1", "r2", "r3"))
    ]
    window = _export(monkeypatch, replicas)
    b = {SERVICE_LABEL: "rest-b"}
    assert total(delta(window.start, window.end), "container_cpu_seconds", **b) == 3.0
    assert window.peak == {("container_cpu_peak_rate", ((SERVICE_LABEL, "rest-b"),)): 1.0}

"""Other work on the host during a window (wirelab_bench.hostcpu): the cores node-exporter saw
busy beyond the compose containers, the generator and the runner, each counter's rate taken
between the scrapes that landed in the window."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import pytest
from wirelab_bench.hostcpu import cores, other_cpu, proxy_seconds
from wirelab_bench.promql import SERVICE_LABEL


def series(metric: dict[str, str], rate: float, start: float = 100.0, scrape_s: float = 5.0,
           phase: float = 2.0, seconds: float = 15.0) -> dict[str, Any]:  # fmt: skip
    """A counter as a range query returns it: a point each second, its value moving only when
    a scrape (every ``scrape_s``, ``phase`` s after the window opens) lands."""
    points, value, last_scrape = [], 1000.0, start + phase - scrape_s
    for i in range(int(seconds) + 1):
        t = start + i
        while t >= last_scrape + scrape_s:
            last_scrape += scrape_s
            value = 1000.0 + rate * (last_scrape - start)
        points.append([t, f"{value}"])
    return {"metric": metric, "values": points}


def export(*result: dict[str, Any]) -> dict[str, Any]:
    return {"query": "...", "data": {"resultType": "matrix", "result": list(result)}}


@pytest.mark.parametrize("phase", [0.5, 2.0, 4.5])
def test_a_counters_rate_is_read_between_its_scrapes_whatever_their_phase(phase: float) -> None:
    # Between the window's ends a 15 s window read 10 s of counting at this phase: 1.2 / 1.8.
    got = cores(export(series({"mode": "user"}, 1.2, phase=phase)), lambda m: True)
    assert got == pytest.approx(1.2)


def test_series_that_never_moved_add_nothing_and_none_kept_is_unknown() -> None:
    idle = {"metric": {"mode": "user"}, "values": [[100.0 + i, "5"] for i in range(16)]}
    busy = series({"mode": "system"}, 0.3)
    assert cores(export(idle, busy), lambda m: True) == pytest.approx(0.3)
    assert math.isnan(cores(export(idle), lambda m: True))
    assert math.isnan(cores(export(busy), lambda m: m["mode"] == "user"))
    assert math.isnan(cores(None, lambda m: True))


def host(busy: float, idle: float = 0.5) -> dict[str, Any]:
    return export(
        series({"mode": "user"}, busy * 0.75),
        series({"mode": "system"}, busy * 0.25),
        series({"mode": "idle"}, idle),
        series({"mode": "iowait"}, 0.05),
    )


def containers(**by_service: float) -> dict[str, Any]:
    return export(*(series({SERVICE_LABEL: s, "id": f"/{s}"}, r) for s, r in by_service.items()))


def test_other_work_is_the_busy_host_less_the_containers_the_generator_and_the_runner() -> None:
    raw = {
        "host_cpu_seconds": host(1.6),
        "container_cpu_seconds": containers(rest=0.5, cadvisor=0.1),
    }
    assert other_cpu(raw, generator=0.55, runner=0.05) == pytest.approx(0.4)
    # Inside the lab the generator is the bench container's CPU, counted once.
    raw["container_cpu_seconds"] = containers(rest=0.5, cadvisor=0.1, bench=0.6)
    assert other_cpu(raw, generator=0.55, runner=0.05) == pytest.approx(0.4)
    # Never below zero, and unknown without either source.
    assert other_cpu(raw, generator=0.0, runner=0.0) == pytest.approx(0.4)
    assert other_cpu({"host_cpu_seconds": host(0.5), "container_cpu_seconds": containers(
        rest=0.6)}, 0.0, 0.0) == 0.0  # fmt: skip
    assert math.isnan(other_cpu({"host_cpu_seconds": host(1.0)}, 0.5, 0.0))
    assert math.isnan(other_cpu({}, 0.5, 0.0))


def test_the_userland_proxys_relaying_is_the_load_paths_not_other_work() -> None:
    raw = {
        "host_cpu_seconds": host(1.6),
        "container_cpu_seconds": containers(rest=0.5, cadvisor=0.1),
    }
    assert other_cpu(raw, generator=0.55, runner=0.05, proxy=0.25) == pytest.approx(0.15)
    # Unknown (a run made before the column) counts as none.
    assert other_cpu(raw, 0.55, 0.05, proxy=math.nan) == pytest.approx(0.4)


def test_proxy_seconds_adds_up_the_processes_named_docker_proxy() -> None:
    """A child that names itself docker-proxy (its comm, as the kernel shows every process's)
    and spends 0.3 s of CPU before it says so: the proxies' CPU grew by about that (the kernel
    counts in 10 ms ticks; a lab running on the host can only add to it)."""
    burn = (
        "import sys, time\n"
        "open('/proc/self/comm', 'w').write('docker-proxy')\n"
        "while time.process_time() < 0.3: pass\n"
        "print('spent', flush=True)\n"
        "sys.stdin.read()\n"
    )
    before = proxy_seconds()
    child = subprocess.Popen(
        [sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "spent\n"
        assert proxy_seconds() - before >= 0.25
    finally:
        child.communicate("", timeout=30)
    assert child.returncode == 0

"""Other work on the host during a window: the cores it was busy beyond the compose containers,
the generator, the runner and Docker's userland proxy, from node-exporter's and cAdvisor's range
exports (docs/bench.md, "What moves the numbers")."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from itertools import pairwise
from typing import Any

import psutil

from wirelab_bench.promql import SERVICE_LABEL

# CPU modes in which the host did no work.
IDLE_MODES = frozenset({"idle", "iowait", "steal"})
# Docker's userland proxy: a process per published port, on the host, outside every container,
# relaying each byte a generator on the host sends to the lab's ports (`make bench` without
# WHERE=lab). Part of that load path, not other work: on 28 Nov its two processes took 0.25 of
# a core over three `quick` runs (ps's CPU times), half of what was then counted as other work.
PROXY = "docker-proxy"


def proxy_seconds() -> float:
    """CPU seconds (user + system) Docker's userland proxies have used so far, as far as this
    process sees them: 0 inside a container (`make bench WHERE=lab`, whose load skips them)."""
    total = 0.0
    for proc in psutil.process_iter(["name", "cpu_times"]):
        times = proc.info["cpu_times"]
        if proc.info["name"] == PROXY and times is not None:
            total += times.user + times.system
    return total


def cores(export: Mapping[str, Any] | None, keep: Callable[[dict[str, str]], bool]) -> float:
    """Cores a counter export's kept series used together over its range. Each series' rate is
    taken between the first and the last instants its value changed, where a scrape landed, not
    between the window's ends: node-exporter and cAdvisor are scraped every 5 s, so a 15 s window
    holds 10 to 15 s of their counting, and the ends would misread it by up to a third. A series
    that never changed adds nothing; NaN when no kept series changed twice."""
    if not export:
        return math.nan
    total, seen = 0.0, False
    for series in export.get("data", {}).get("result", []):
        if not keep(series.get("metric", {})):
            continue
        points = [(float(t), float(v)) for t, v in series.get("values", [])]
        changed = [b for a, b in pairwise(points) if b[1] != a[1]]
        if len(changed) >= 2 and changed[-1][0] > changed[0][0]:
            (t0, v0), (t1, v1) = changed[0], changed[-1]
            total += max(0.0, v1 - v0) / (t1 - t0)
            seen = True
    return total if seen else math.nan


def other_cpu(raw: Mapping[str, Any], generator: float, runner: float, proxy: float = 0.0) -> float:
    """Cores the host spent on anything but the compose containers (the lab's services, cAdvisor,
    Prometheus ...), the generator, the runner and the userland ``proxy``. ``raw``: a window's
    range exports by name (``host_cpu_seconds``, ``container_cpu_seconds``, as
    prom.export_window keeps them); the generator's and the runner's CPU count apart only when
    they run on the host: inside the lab (`make bench WHERE=lab`) they are the ``bench``
    container's. NaN without both sources."""
    busy = cores(raw.get("host_cpu_seconds"), lambda m: m.get("mode") not in IDLE_MODES)
    lab = cores(raw.get("container_cpu_seconds"), lambda m: True)
    if math.isnan(busy) or math.isnan(lab):
        return math.nan
    in_lab = cores(raw.get("container_cpu_seconds"), lambda m: m.get(SERVICE_LABEL) == "bench")
    own = 0.0 if in_lab > 0 else sum(r for r in (generator, runner) if not math.isnan(r))
    own += 0.0 if math.isnan(proxy) else proxy
    return max(0.0, busy - lab - own)

"""Peaks inside a window: the highest gauge values and the fastest rate of each CPU counter."""

from __future__ import annotations

import time

from wirelab_bench.histo import Key, Snapshot
from wirelab_bench.promql import EXPORTS, GAUGES, RATE_PEAKS

# Rates over shorter intervals are mostly scrape jitter (the counter is read when the server
# answers, the clock when the answer arrives), so samples closer than this are not paired.
MIN_INTERVAL_S = 0.8
# What a sample between the window's ends needs to scrape: nothing else is read from it.
SAMPLED = frozenset(GAUGES | set(RATE_PEAKS))


class Peaks:
    """Fed with snapshots in time order (window start, each tick, window end)."""

    def __init__(self) -> None:
        self.values: Snapshot = {}
        self._last: dict[Key, tuple[float, float]] = {}

    def add(self, snap: Snapshot | None, now: float | None = None) -> None:
        if snap is None:
            return
        now = time.monotonic() if now is None else now
        # The rates of the series an export keeps apart, summed per group (Export.apart).
        rates: dict[Key, float] = {}
        for k, v in snap.items():
            name, labels = k
            if name in GAUGES:
                self._keep((name, labels), v)
            elif name in RATE_PEAKS:
                before = self._last.get(k)
                if before is not None and now - before[0] < MIN_INTERVAL_S:
                    continue  # keep the older sample: it spans a long enough interval next time
                if before is not None:
                    group = (RATE_PEAKS[name], EXPORTS[name].merged(dict(labels)))
                    rate = max(0.0, v - before[1]) / (now - before[0])  # a reset adds no rate
                    rates[group] = rates.get(group, 0.0) + rate
                self._last[k] = (now, v)
        for group, rate in rates.items():
            self._keep(group, rate)

    def _keep(self, k: Key, v: float) -> None:
        self.values[k] = max(self.values.get(k, v), v)

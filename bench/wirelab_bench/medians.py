"""A median of a few rounds: its distribution-free 95 % interval, and whether there is one."""

from __future__ import annotations

import math


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval for the median: the order statistics whose ranks
    a fair coin (each value below or above the median) puts the median between."""
    ordered = sorted(values)
    n = len(ordered)
    alpha = (1 - confidence) / 2
    below = 0  # how many of the lowest values lie outside the interval
    tail = 0.0
    while True:
        tail += math.comb(n, below) / 2**n
        if tail > alpha:
            break
        below += 1
    if below == 0:  # too few rounds for this confidence: the whole range
        return ordered[0], ordered[-1]
    return ordered[below - 1], ordered[n - below]


def decides(rounds: int, confidence: float = 0.95) -> bool:
    """Whether this many rounds give the median a real interval at ``confidence``: with fewer,
    median_interval falls back to the whole range, which covers the median less often."""
    return 2 / (1 << rounds) <= 1 - confidence

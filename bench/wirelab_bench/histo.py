"""Metric snapshots, their deltas over a window, and quantiles from histogram bucket deltas."""

from __future__ import annotations

import math
from collections.abc import Mapping

# One sample: metric sample name plus its sorted label pairs.
Key = tuple[str, tuple[tuple[str, str], ...]]
Snapshot = dict[Key, float]


def key(name: str, labels: Mapping[str, str]) -> Key:
    return name, tuple(sorted(labels.items()))


def delta(start: Snapshot, end: Snapshot) -> Snapshot:
    """Counter increase from ``start`` to ``end``; a counter that went down was reset."""
    out: Snapshot = {}
    for k, v in end.items():
        before = start.get(k, 0.0)
        out[k] = v - before if v >= before else v
    return out


def total(snap: Snapshot, name: str, **match: str) -> float:
    """Sum of every ``name`` sample whose labels include ``match``."""
    return sum(v for (n, labels), v in snap.items() if n == name and _matches(labels, match))


def buckets(snap: Snapshot, histogram: str, **match: str) -> list[tuple[float, float]]:
    """Cumulative (upper bound, count) pairs of ``histogram``, summed over the other labels."""
    acc: dict[float, float] = {}
    for (n, labels), v in snap.items():
        if n == f"{histogram}_bucket" and _matches(labels, match):
            le = float(dict(labels)["le"])
            acc[le] = acc.get(le, 0.0) + v
    return sorted(acc.items())


def quantile(q: float, cumulative: list[tuple[float, float]]) -> float:
    """Prometheus ``histogram_quantile``: linear interpolation inside the bucket holding rank q.

    Returns NaN when the histogram saw nothing; a rank in the +Inf bucket returns the largest
    finite bound, as Prometheus does, because nothing better is known.
    """
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be within 0..1, got {q}")
    if not cumulative or cumulative[-1][1] <= 0:
        return math.nan
    count = cumulative[-1][1]
    rank = q * count
    lower_bound, lower_count = 0.0, 0.0
    for le, cum in cumulative:
        if cum >= rank and cum > lower_count:
            if math.isinf(le):
                return lower_bound
            return lower_bound + (le - lower_bound) * (rank - lower_count) / (cum - lower_count)
        lower_bound, lower_count = le, cum
    return lower_bound


def _matches(labels: tuple[tuple[str, str], ...], match: Mapping[str, str]) -> bool:
    if not match:
        return True
    d = dict(labels)
    return all(d.get(k) == v for k, v in match.items())

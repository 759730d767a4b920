"""95 % intervals for a gRPC/REST ratio: across repetitions, or from one window's own spread."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from scipy import stats

from wirelab_bench.histo import quantile

Z95 = float(stats.norm.ppf(0.975))
# What a within-run interval leaves out: three smoke runs on 28 Nov put the run-to-run CV of a
# kind's gRPC/REST calls-per-second ratio at 14-41 %, far wider than any one window's spread.
WITHIN_RUN = "within this run only; the spread from run to run is not in it"


@dataclass(frozen=True)
class Ratio:
    """gRPC/REST with its 95 % interval and what the interval was computed from."""

    value: float
    low: float
    high: float
    basis: str

    @property
    def spans_one(self) -> bool:
        return self.low <= 1 <= self.high

    def text(self) -> str:
        return f"{self.value:.2f} [{self.low:.2f}-{self.high:.2f}]"


def across_repetitions(rest: Mapping[int, float], grpc: Mapping[int, float]) -> Ratio | None:
    """Each repetition's ratio (the two protocols ran side by side in it), a Student's t
    interval on their logarithms; None with fewer than two repetitions having both."""
    logs = [
        math.log(grpc[r] / rest[r])
        for r in sorted(set(rest) & set(grpc))
        if rest[r] > 0 and grpc[r] > 0 and math.isfinite(grpc[r] / rest[r])
    ]
    if len(logs) < 2:
        return None
    mean, half = t_interval(logs)
    basis = f"across {len(logs)} repetitions"
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), basis)


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """The mean of two or more values and the half-width of its 95 % Student's t interval."""
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (len(values) - 1))
    return mean, float(stats.t.ppf(0.975, len(values) - 1)) * sd / math.sqrt(len(values))


def from_samples(
    rest: Sequence[float], grpc: Sequence[float], value: float | None = None, basis: str = ""
) -> Ratio | None:
    """The ratio of the two samples' means (or ``value``, the same ratio measured otherwise)
    with a delta-method interval on its logarithm: each mean's relative standard error, t with
    the smaller sample's degrees of freedom. None when a side has under two samples or no mean."""
    if len(rest) < 2 or len(grpc) < 2:
        return None
    parts = []
    for sample in (rest, grpc):
        mean = sum(sample) / len(sample)
        if mean <= 0:
            return None
        sd = math.sqrt(sum((x - mean) ** 2 for x in sample) / (len(sample) - 1))
        parts.append((mean, (sd / mean) ** 2 / len(sample)))
    (rest_mean, rest_var), (grpc_mean, grpc_var) = parts
    point = value if value is not None else grpc_mean / rest_mean
    if not point > 0:
        return None
    half = float(stats.t.ppf(0.975, min(len(rest), len(grpc)) - 1)) * math.sqrt(rest_var + grpc_var)
    return Ratio(point, point * math.exp(-half), point * math.exp(half), basis)


def median_interval(cumulative: list[tuple[float, float]]) -> tuple[float, float, float]:
    """A histogram's median and its distribution-free 95 % interval: the quantiles at the ranks
    n/2 ± 1.96 √n / 2, where the median of n calls falls 95 % of the time."""
    n = cumulative[-1][1] if cumulative else 0.0
    if n <= 0:
        return math.nan, math.nan, math.nan
    spread = Z95 * 0.5 / math.sqrt(n)
    low, high = max(0.0, 0.5 - spread), min(1.0, 0.5 + spread)
    return quantile(0.5, cumulative), quantile(low, cumulative), quantile(high, cumulative)


def from_intervals(
    rest: tuple[float, float, float], grpc: tuple[float, float, float], basis: str
) -> Ratio | None:
    """gRPC/REST of two independent (value, low, high) 95 % intervals, each read as a normal
    one on the log scale."""
    if not all(x > 0 for x in (*rest, *grpc)):
        return None
    se = math.hypot(*((math.log(hi) - math.log(lo)) / (2 * Z95) for _, lo, hi in (rest, grpc)))
    point = grpc[0] / rest[0]
    return Ratio(point, point * math.exp(-Z95 * se), point * math.exp(Z95 * se), basis)


def per_second_ok(history: Path, start: float, seconds: float) -> list[float]:
    """Successful calls in each second of a window, from Locust's stats history (one cumulative
    row a second, ``--csv-full-history``): the increments of its Aggregated row's request count
    less failures, between the rows inside [start, start + seconds]. Empty without the file."""
    try:
        frame = pd.read_csv(history)
    except (OSError, ValueError):
        return []
    needed = {"Timestamp", "Name", "Total Request Count", "Total Failure Count"}
    if not needed <= set(frame.columns):
        return []
    rows = frame[frame["Name"] == "Aggregated"].sort_values("Timestamp")
    # Locust writes whole seconds: a row stamped at the window's first second may be from
    # before it, so the window's rows are those strictly after its start.
    rows = rows[(rows["Timestamp"] > start) & (rows["Timestamp"] <= start + seconds)]
    ok = rows["Total Request Count"] - rows["Total Failure Count"]
    return [float(x) for x in ok.diff().dropna()]

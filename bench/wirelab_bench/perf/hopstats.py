"""The hop benchmark's arithmetic: the arms' order in each round and the added cost of a hop."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wirelab_bench.loadtools import Load
from wirelab_bench.overhead import median_interval

DIRECT, WIRELAB, BARE, NGINX = "direct", "wirelab", "bare", "nginx"
ARMS = (DIRECT, WIRELAB, BARE, NGINX)


def _balanced(n: int) -> list[tuple[int, ...]]:
    """A balanced Latin square (Williams): each item once in every position, and each item
    right after each other one equally often; an odd n needs its mirror rows as well."""
    rows = []
    for first in range(n):
        steps = [0] + [(k + 1) // 2 if k % 2 else -(k // 2) for k in range(1, n)]
        rows.append(tuple((first + s) % n for s in steps))
    return rows if n % 2 == 0 else rows + [row[::-1] for row in rows]


_ORDERS = tuple(tuple(ARMS[i] for i in row) for row in _balanced(len(ARMS)))


def arm_order(round_: int) -> tuple[str, ...]:
    """The arms in the order round ``round_`` runs them: over every len(ARMS) rounds each arm
    runs in each position once and right after each other arm once, so drift on a shared machine
    and one arm's after-effects on the next fall on all arms alike."""
    return _ORDERS[round_ % len(_ORDERS)]


@dataclass(frozen=True)
class ArmRun:
    """One arm of one round: what the load tool saw, and the CPU-seconds the relay (none in the
    direct arm) and the downstream B spent meanwhile."""

    load: Load
    relay_cpu: float
    downstream_cpu: float

    def record(self) -> dict[str, Any]:
        """The run as JSON for the results folder."""
        load = self.load
        return {
            "seconds": load.seconds, "codes": dict(load.codes), "p50_ms": load.p50_ms,
            "p99_ms": load.p99_ms, "relay_cpu_s": self.relay_cpu,
            "downstream_cpu_s": self.downstream_cpu,
        }  # fmt: skip

    @property
    def relay_ms_per_call(self) -> float:
        return 1000 * self.relay_cpu / max(self.load.ok, 1)

    @property
    def downstream_ms_per_call(self) -> float:
        return 1000 * self.downstream_cpu / max(self.load.ok, 1)


Round = dict[str, ArmRun]


@dataclass(frozen=True)
class Figure:
    """The median of the rounds' values and its 95 % interval."""

    median: float
    low: float
    high: float

    def text(self, unit: str = "ms") -> str:
        return f"{self.median:+.2f} {unit} [{self.low:+.2f} to {self.high:+.2f}]"


def figure(values: Sequence[float]) -> Figure:
    low, high = median_interval(list(values))
    return Figure(statistics.median(values), low, high)


def added(rounds: Sequence[Round], arm: str, base: str, value: Callable[[ArmRun], float]) -> Figure:
    """What ``arm`` adds over ``base``: each round's own difference (both ran in that round,
    against the same processes), then their median."""
    return figure([value(r[arm]) - value(r[base]) for r in rounds])


def p50(run: ArmRun) -> float:
    return run.load.p50_ms


def p99(run: ArmRun) -> float:
    return run.load.p99_ms


def relay_cpu(run: ArmRun) -> float:
    return run.relay_ms_per_call


def downstream_cpu(run: ArmRun) -> float:
    return run.downstream_ms_per_call

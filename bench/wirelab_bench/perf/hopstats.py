"""The hop benchmark's arithmetic: the arms' order in each round and the added cost of a hop."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wirelab_bench.loadtools import Load
from wirelab_bench.overhead import median_interval

DIRECT, WIRELAB, BARE = "direct", "wirelab", "bare"
ARMS = (DIRECT, WIRELAB, BARE)
_ORDERS = tuple(itertools.permutations(ARMS))


def arm_order(round_: int) -> tuple[str, ...]:
    """The arms in the order round ``round_`` runs them: every order in turn, so over six rounds
    each arm runs first, second and last equally often and no arm always follows another."""
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

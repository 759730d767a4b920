"""The hop benchmark's arithmetic: the arms' order in each round, the added cost of a hop, and
whether a balancing arm spread its calls."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wirelab_bench.medians import median_interval

from wirelab_perf.loadtools import Load

DIRECT, WIRELAB, BARE, NGINX = "direct", "wirelab", "bare", "nginx"
ARMS = (DIRECT, WIRELAB, BARE, NGINX)
ROUND_ROBIN = "round-robin"
# The balancing comparison, over several Bs: the load tool balancing them itself (gRPC's
# round_robin; the lab's REST callers have no client-side balancing) or nginx balancing them,
# against direct calls to one of them.
BALANCE_ARMS = {"grpc": (DIRECT, ROUND_ROBIN, NGINX), "rest": (DIRECT, NGINX)}
# The runtimes comparison: the same relay hop in each runtime, in front of the same (Python) B.
WIRELAB_NODE = "wirelab-node"
RUNTIME_ARMS = (DIRECT, WIRELAB, WIRELAB_NODE)


def _balanced(n: int) -> list[tuple[int, ...]]:
    """A balanced Latin square (Williams): each item once in every position, and each item
    right after each other one equally often; an odd n needs its mirror rows as well."""
    rows = []
    for first in range(n):
        steps = [0] + [(k + 1) // 2 if k % 2 else -(k // 2) for k in range(1, n)]
        rows.append(tuple((first + s) % n for s in steps))
    return rows if n % 2 == 0 else rows + [row[::-1] for row in rows]


def arm_order(round_: int, arms: tuple[str, ...] = ARMS) -> tuple[str, ...]:
    """The arms in the order round ``round_`` runs them: over every len(arms) rounds (twice that
    for an odd number) each arm runs in each position equally often and right after each other
    arm equally often, so drift on a shared machine and one arm's after-effects on the next fall
    on all arms alike."""
    orders = _balanced(len(arms))
    return tuple(arms[i] for i in orders[round_ % len(orders)])


def spread_problem(arm: str, served: Sequence[int]) -> str:
    """Why the calls the Bs served during ``arm`` are not spread as the arm spreads them, or ""
    when they are: direct calls reach the first B only; a balancing arm's reach every B, each at
    least half an even share."""
    total = sum(served)
    if arm == DIRECT:
        wrong = total == 0 or any(served[1:])
    else:
        wrong = min(served) < total / len(served) / 2
    return f"{arm}: the Bs served {list(served)} calls" if wrong else ""


@dataclass(frozen=True)
class ArmRun:
    """One arm of one round: what the load tool saw, and the CPU-seconds the relay (none in the
    direct arm), the downstream B (all the Bs, when balanced) and the load tool spent meanwhile."""

    load: Load
    relay_cpu: float
    downstream_cpu: float
    client_cpu: float

    def record(self) -> dict[str, Any]:
        """The run as JSON for the results folder."""
        load = self.load
        return {
            "seconds": load.seconds, "codes": dict(load.codes), "p50_ms": load.p50_ms,
            "p99_ms": load.p99_ms, "relay_cpu_s": self.relay_cpu,
            "downstream_cpu_s": self.downstream_cpu, "client_cpu_s": self.client_cpu,
        }  # fmt: skip

    @property
    def relay_ms_per_call(self) -> float:
        return 1000 * self.relay_cpu / max(self.load.ok, 1)

    @property
    def downstream_ms_per_call(self) -> float:
        return 1000 * self.downstream_cpu / max(self.load.ok, 1)

    @property
    def client_ms_per_call(self) -> float:
        return 1000 * self.client_cpu / max(self.load.ok, 1)


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


def client_cpu(run: ArmRun) -> float:
    return run.client_ms_per_call

"""Load shapes from the studies as stage tables chosen by name (--shape); no Locust import, so
the tables are testable without gevent's monkey-patching."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Stage:
    """Hold ``users`` (reached at ``spawn_rate`` users/s) until ``until`` seconds into the run."""

    until: float
    users: int
    spawn_rate: float


def _levels(levels: list[tuple[int, float, float]]) -> list[Stage]:
    """(users, spawn rate, seconds at that level) in sequence -> cumulative stages."""
    stages, end = [], 0.0
    for users, rate, seconds in levels:
        end += seconds
        stages.append(Stage(end, users, rate))
    return stages


def _ramp(levels: list[int], ramp_s: float, hold_s: float) -> list[Stage]:
    """Reach each level linearly over ``ramp_s``, then hold it for ``hold_s``."""
    stages, previous = [], 0
    for users in levels:
        stages.append((users, max(1.0, (users - previous) / ramp_s), ramp_s + hold_s))
        previous = users
    return _levels(stages)


def _step(options: Any) -> list[Stage]:
    step, seconds, top = options.step_users, options.step_seconds, options.step_max_users
    # Each step arrives within a fifth of its duration and then holds, so every step has a
    # steady plateau to read throughput and latency from.
    return _levels([(u, step / (seconds / 5), seconds) for u in range(step, top + 1, step)])


def _paced(options: Any) -> list[Stage]:
    if not options.run_time or not options.num_users or options.pace <= 0:
        raise ValueError("--shape paced needs --users, --run-time and --pace > 0")
    return [Stage(float(options.run_time), int(options.num_users), float(options.spawn_rate or 1))]


_TWO_MIN = 120.0
# name -> (source, stage table built from the options)
SHAPES: dict[str, tuple[str, Callable[[Any], list[Stage]]]] = {
    "iit-light": ("IIT study, Table 6.1: 500 users at 5/s for 2 min",
                  lambda o: _levels([(500, 5, _TWO_MIN)])),
    "iit-medium": ("IIT study, Table 6.1: 1000 users at 10/s for 2 min",
                   lambda o: _levels([(1000, 10, _TWO_MIN)])),
    "iit-heavy": ("IIT study, Table 6.1: 5000 users at 50/s for 2 min",
                  lambda o: _levels([(5000, 50, _TWO_MIN)])),
    "iit": ("IIT study: Light, Medium, Heavy back to back",
            lambda o: _levels([(500, 5, _TWO_MIN), (1000, 10, _TWO_MIN), (5000, 50, _TWO_MIN)])),
    "event-loop": ("event-loop study, Table 1: 200, 1000, 2000 users; 60 s ramp + 60 s hold each",
                   lambda o: _ramp([200, 1000, 2000], 60.0, 60.0)),
    "order-chain-low": ("order-chain study: 10 concurrent for 1 min",
                        lambda o: _levels([(10, 10, 60.0)])),
    "order-chain-medium": ("order-chain study: 100 concurrent for 1 min",
                           lambda o: _levels([(100, 100, 60.0)])),
    "order-chain-high": ("order-chain study: 300 concurrent for 1 min",
                         lambda o: _levels([(300, 300, 60.0)])),
    "order-chain": ("order-chain study: 10, 100, 300 concurrent, 1 min each",
                    lambda o: _levels([(10, 10, 60.0), (100, 100, 60.0), (300, 300, 60.0)])),
    "step": ("saturation search: +--step-users every --step-seconds up to --step-max-users", _step),
    "paced": ("constant throughput: --users for --run-time, each at --pace tasks/s", _paced),
}  # fmt: skip


def scaled(stages: list[Stage], factor: float) -> list[Stage]:
    """Shrink or stretch time: durations x factor, spawn rates / factor (same user counts)."""
    return [Stage(s.until * factor, s.users, s.spawn_rate / factor) for s in stages]


def at(stages: list[Stage], seconds: float) -> tuple[int, float] | None:
    """What LoadTestShape.tick answers ``seconds`` into the run: (users, spawn rate), or None
    after the last stage so the run ends by itself."""
    for stage in stages:
        if seconds < stage.until:
            return stage.users, stage.spawn_rate
    return None


def build(name: str, options: Any) -> list[Stage]:
    """The stage table called ``name``, with --shape-time-scale applied."""
    if name not in SHAPES:
        raise ValueError(f"--shape {name!r}: unknown, choose one of {', '.join(SHAPES)}")
    factor = float(options.shape_time_scale)
    if factor <= 0:
        raise ValueError("--shape-time-scale must be > 0")
    return scaled(SHAPES[name][1](options), factor)

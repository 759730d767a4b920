"""The load shapes' tick() tables: users and spawn rate over (scaled) time, and the end.

shapes.at is what StageShape.tick returns; the real shape class runs in test_headless."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from wirelab_locust import shapes


def options(**overrides: object) -> SimpleNamespace:
    base = {
        "shape_time_scale": 1.0,
        "step_users": 50,
        "step_seconds": 60.0,
        "step_max_users": 200,
        "num_users": None,
        "run_time": None,
        "spawn_rate": None,
        "pace": 0.0,
    }
    return SimpleNamespace(**{**base, **overrides})


def ticks(name: str, times: list[float], **overrides: object) -> list[tuple[int, float] | None]:
    """(users, spawn rate rounded to 3 places) at each time, None once the shape has ended."""
    stages = shapes.build(name, options(**overrides))
    return [None if (t := shapes.at(stages, s)) is None else (t[0], round(t[1], 3)) for s in times]


@pytest.mark.parametrize(
    ("name", "users", "rate"),
    [("iit-light", 500, 5), ("iit-medium", 1000, 10), ("iit-heavy", 5000, 50)],
)
def test_iit_workloads_hold_for_two_minutes(name: str, users: int, rate: float) -> None:
    assert ticks(name, [0, 60, 119.9, 120]) == [(users, rate)] * 3 + [None]


def test_iit_sequence_runs_light_medium_heavy() -> None:
    assert ticks("iit", [0, 130, 250, 360]) == [(500, 5), (1000, 10), (5000, 50), None]


def test_event_loop_ramps_200_1000_2000() -> None:
    got = ticks("event-loop", [0, 119, 121, 239, 241, 359, 360])
    assert got == [(200, 3.333)] * 2 + [(1000, 13.333)] * 2 + [(2000, 16.667)] * 2 + [None]


def test_order_chain_levels() -> None:
    assert ticks("order-chain", [1, 61, 121, 181]) == [(10, 10), (100, 100), (300, 300), None]
    assert ticks("order-chain-high", [0, 59, 60]) == [(300, 300), (300, 300), None]


def test_step_ramp_adds_users_until_the_maximum() -> None:
    got = ticks("step", [0, 59, 60, 130, 190, 240])
    assert [g[0] if g else None for g in got] == [50, 50, 100, 150, 200, None]
    assert got[0] == (50, 4.167)


def test_paced_holds_users_for_run_time_and_needs_a_pace() -> None:
    got = ticks("paced", [0, 9.9, 10], num_users=20, run_time=10, spawn_rate=20, pace=2.0)
    assert got == [(20, 20.0), (20, 20.0), None]
    with pytest.raises(ValueError, match="pace"):
        shapes.build("paced", options(num_users=20, run_time=10))


def test_time_scale_shrinks_durations_and_keeps_the_shape() -> None:
    got = ticks("iit-light", [0, 5.9, 6.0], shape_time_scale=0.05)
    assert got == [(500, 100.0), (500, 100.0), None]


def test_unknown_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown"):
        shapes.build("nope", options())


def test_every_shape_names_its_source() -> None:
    for name, (source, _) in shapes.SHAPES.items():
        assert source, name

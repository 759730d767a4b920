"""The payload budget: admits up to its capacity, refuses past it at once, frees on release."""

from __future__ import annotations

import threading

import pytest
from wirelab import settings
from wirelab.core import Overloaded, PayloadBudget


def test_admits_up_to_capacity_then_refuses() -> None:
    budget = PayloadBudget(100)
    budget.acquire(60)
    budget.acquire(40)
    with pytest.raises(Overloaded, match="100 of 100 bytes in flight") as refused:
        budget.acquire(1)
    assert refused.value.retry_after_seconds >= 1
    assert budget.in_use == 100
    budget.release(60)
    budget.acquire(50)
    assert budget.in_use == 90


def test_a_call_larger_than_the_whole_budget_is_refused() -> None:
    with pytest.raises(Overloaded):
        PayloadBudget(10).acquire(11)


def test_hold_releases_on_error() -> None:
    budget = PayloadBudget(10)
    with pytest.raises(RuntimeError), budget.hold(10):
        raise RuntimeError("handler failed")
    assert budget.in_use == 0


def test_zero_capacity_turns_admission_off() -> None:
    budget = PayloadBudget(0)
    budget.acquire(2**40)
    budget.release(2**40)
    assert budget.in_use == 0
    with pytest.raises(ValueError):
        PayloadBudget(-1)


def test_concurrent_threads_never_pass_the_capacity() -> None:
    budget = PayloadBudget(1000)
    peak = 0
    lock = threading.Lock()

    def call() -> None:
        nonlocal peak
        for _ in range(2000):
            try:
                budget.acquire(300)
            except Overloaded:
                continue
            with lock:
                peak = max(peak, budget.in_use)
            budget.release(300)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak <= 1000
    assert budget.in_use == 0


def test_budget_is_a_knob() -> None:
    assert settings.load([], environ={}).limits.payload_budget_bytes == 1280 * 1024 * 1024
    env = {"WIRELAB_PAYLOAD_BUDGET_BYTES": "1024"}
    assert settings.load([], environ=env).limits.payload_budget_bytes == 1024

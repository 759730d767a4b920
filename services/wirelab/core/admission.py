"""Admission control on payload bytes in flight: a call that would pass the budget is refused."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Overloaded(Exception):
    """The service refuses a call now because of load, not because of its input: REST answers
    503 with ``Retry-After``, gRPC ``RESOURCE_EXHAUSTED``. The caller may retry later."""

    def __init__(self, message: str, *, retry_after_seconds: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_seconds = retry_after_seconds


class PayloadBudget:
    """Bytes of payload the service holds at once, summed over the calls in flight.

    Refusing at once, rather than queueing, keeps a measurement honest (a refusal is counted, a
    queue would hide in latency) and keeps memory bounded: without it six concurrent 256 MiB
    uploads took the gRPC service to 2.3 GB RSS and REST to 1.6 GB, past the lab's 2 GB limit.
    A capacity of 0 turns admission off. Thread-safe: the thread-pool servers call it from many
    threads; the lock is uncontended on the event-loop servers.
    """

    __slots__ = ("_lock", "capacity", "in_use")

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"payload budget must not be negative (got {capacity})")
        self.capacity = capacity
        self.in_use = 0
        self._lock = threading.Lock()

    def acquire(self, nbytes: int) -> None:
        """Take ``nbytes`` of the budget or raise Overloaded; a call larger than the whole budget
        is refused too (it could never be admitted without passing the bound)."""
        if self.capacity == 0 or nbytes <= 0:
            return
        with self._lock:
            if self.in_use + nbytes > self.capacity:
                in_use = self.in_use
            else:
                self.in_use += nbytes
                return
        raise Overloaded(
            f"payload budget exhausted: {nbytes} bytes asked, {in_use} of {self.capacity} "
            "bytes in flight; retry later"
        )

    def release(self, nbytes: int) -> None:
        if self.capacity == 0 or nbytes <= 0:
            return
        with self._lock:
            self.in_use -= nbytes

    @contextmanager
    def hold(self, nbytes: int) -> Iterator[None]:
        """``nbytes`` of the budget for the duration of the ``with`` block."""
        self.acquire(nbytes)
        try:
            yield
        finally:
            self.release(nbytes)

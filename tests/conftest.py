"""Repo-wide guards: the pytest process itself must never be gevent-patched, and each test leaves
it on the CPUs it found it on."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    # Importing Locust monkey-patches the importing process with gevent; a test module that does
    # so at import time patches pytest's own process, and grpc tests later in the run then hang
    # instead of failing. Locust runs in child processes only.
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("socket"):
        raise pytest.UsageError(
            "collecting the tests gevent-patched the pytest process (a test module imports "
            "Locust at import time); import it in a child process instead"
        )


@pytest.fixture(autouse=True)
def _cpus_as_found() -> Iterator[None]:
    # A benchmark's main pins the process that runs it to one core (wirelab_perf.svcprocs
    # .pin), and its tests call main in-process: pytest then stayed on that core, and so did
    # every process a later test started. With tests/bench run first (test_grpc_memory.py pins),
    # the Locust web UI test's services, Locust and Chromium shared one core: its page showed the
    # first rows 27 s after Start and the test took 99 s; with this fixture 2.5 s and 12 s
    # (27 Nov; in the two CI runs before, the test had taken 91 s and 167 s, 13-16 s earlier).
    cpus = os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, cpus)

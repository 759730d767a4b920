"""Repo-wide guard: the pytest process itself must never be gevent-patched."""

from __future__ import annotations

import sys

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

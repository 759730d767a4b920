"""A Docker engine for the end-to-end run: reuse a running one, or start dockerd and stop it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.config.queries import REPO

OFFLINE = REPO / "offline"


class EngineUnavailable(Exception):
    """No engine can be had here; the message says why (skip locally, fail in CI)."""


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _compose_works() -> bool:
    done = subprocess.run([str(OFFLINE / "compose"), "version"], capture_output=True, timeout=30)
    return done.returncode == 0


@contextmanager
def docker_engine() -> Iterator[None]:
    """Yield with an engine answering; a dockerd started here is stopped by its pid on exit."""
    if shutil.which("docker") is None:
        raise EngineUnavailable("the docker CLI is not installed")
    if not _compose_works():
        raise EngineUnavailable("`docker compose` (v2 plugin) is not installed")
    up = subprocess.run([str(OFFLINE / "dockerd-up")], capture_output=True, text=True, timeout=120)
    if up.returncode != 0:
        raise EngineUnavailable(f"no Docker engine reachable: {up.stderr.strip()}")
    started = up.stdout.strip()
    try:
        yield
    finally:
        # Empty when the engine was already running: then it is not ours to stop.
        subprocess.run([str(OFFLINE / "dockerd-down"), started], timeout=120, check=False)


@contextmanager
def engine_for(what: str) -> Iterator[None]:
    """An engine for ``what``, or a skip saying why (a failure in CI, where Docker must run)."""
    try:
        with docker_engine():
            yield
    except EngineUnavailable as why:
        if in_ci():
            pytest.fail(f"{what} must run in CI, but: {why}")
        pytest.skip(f"{what} skipped: {why}")

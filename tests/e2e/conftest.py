"""Fixtures for the end-to-end run: one engine, one lab, one bounded Locust load, per session."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest
from wirelab.contract import EDGE_PROTOCOLS, KINDS_BY_PROTOCOL

from tests.e2e.engine import engine_for
from tests.e2e.lab import Lab, booted, wait_for
from tests.e2e.load import (
    ALL_KINDS,
    BLOB_KINDS,
    MIXED_USERS,
    Load,
    large_payload_run,
    moved_large_payloads,
)
from tests.e2e.prom import Prometheus
from tests.e2e.swarm import LocustMaster


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # A CI timeout sends SIGTERM: unwind like Ctrl-C so the lab and our dockerd still go down.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with engine_for("e2e"):
            lab = Lab.create(tmp_path_factory.mktemp("results"))
            with booted(lab):
                yield lab
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def prometheus(lab: Lab) -> Prometheus:
    return Prometheus(lab.url("prometheus", 9090))


@pytest.fixture(scope="session")
def locust(lab: Lab) -> LocustMaster:
    return LocustMaster(lab.url("locust", 8089))


@pytest.fixture(scope="session")
def load(lab: Lab, locust: LocustMaster, prometheus: Prometheus) -> Iterator[Load]:
    """Every blob kind at 64 MiB on both protocols (one bounded run each), then every kind with
    small payloads through the master and its workers, left running (bounded by run_time) for
    the checks; a test that needs it quiet calls locust.stop()."""
    for kind in BLOB_KINDS:
        large_payload_run(lab, kind)
    wanted = {(p, k) for p in EDGE_PROTOCOLS for k in KINDS_BY_PROTOCOL[p] if k in BLOB_KINDS}
    # The last calls finish just before the run ends; two 1 s scrapes later Prometheus has them.
    wait_for(
        "64 MiB payloads in the server metrics",
        lambda: wanted <= moved_large_payloads(prometheus),
        timeout=15,
    )
    wait_for("Locust workers to connect", lambda: len(locust.stats().get("workers", [])) >= 1, 60)
    baseline = prometheus.settled_request_totals()
    mix = ",".join(f"{kind}=1" for kind in ALL_KINDS)
    locust.swarm(MIXED_USERS, "120s", protocols="rest,grpc", payload_bytes=64 * 1024,
                 chunk_bytes=16 * 1024, mix=mix)  # fmt: skip
    try:
        yield Load(locust, baseline)
    finally:
        locust.stop()

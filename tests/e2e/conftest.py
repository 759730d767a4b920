"""Fixtures for the end-to-end run: one engine, one lab, one bounded Locust load, per session."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from wirelab.metrics import KINDS_BY_PROTOCOL

from tests.e2e.engine import EngineUnavailable, docker_engine, in_ci
from tests.e2e.lab import Lab, wait_for
from tests.e2e.prom import Prometheus
from tests.e2e.swarm import LocustMaster

MiB = 1 << 20
# Step 2 of the e2e issue: large payloads of at least 64 MiB on every blob kind, then the whole
# mix with small payloads kept running (bounded by run_time) while the checks read Prometheus.
LARGE_BYTES = 64 * MiB
ALL_KINDS = tuple(dict.fromkeys(k for kinds in KINDS_BY_PROTOCOL.values() for k in kinds))
BLOB_KINDS = tuple(k for k in ALL_KINDS if k.startswith(("upload", "download")))
MIXED_USERS = 8


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    try:
        with docker_engine():
            results = tmp_path_factory.mktemp("results")
            lab = Lab.create(results)
            try:
                lab.up()
                yield lab
            except BaseException:
                print(lab.logs(), file=sys.stderr)
                raise
            finally:
                lab.down()
                left = lab.leftovers()
                assert not left, f"docker compose down -v left: {left}"
    except EngineUnavailable as why:
        if in_ci():
            pytest.fail(f"e2e must run in CI, but: {why}")
        pytest.skip(f"e2e skipped: {why}")


@pytest.fixture(scope="session")
def prometheus(lab: Lab) -> Prometheus:
    return Prometheus(lab.url("prometheus", 9090))


@pytest.fixture(scope="session")
def locust(lab: Lab) -> LocustMaster:
    return LocustMaster(lab.url("locust", 8089))


def _server_bytes_at_least(prometheus: Prometheus, size: int) -> bool:
    """Every blob kind has moved at least one `size` payload on each protocol it exists on."""
    moved = prometheus.query(
        'sum by (protocol, kind) (wirelab_server_request_bytes_sum{kind=~"upload.*"})'
        ' or sum by (protocol, kind) (wirelab_server_response_bytes_sum{kind=~"download.*"})'
    )
    done = {(r["metric"]["protocol"], r["metric"]["kind"]) for r in moved
            if float(r["value"][1]) >= size}  # fmt: skip
    wanted = {(p, k) for p, kinds in KINDS_BY_PROTOCOL.items() for k in kinds if k in BLOB_KINDS}
    return wanted <= done


@pytest.fixture(scope="session")
def load(lab: Lab, locust: LocustMaster, prometheus: Prometheus) -> Iterator[LocustMaster]:
    """The large-payload phase (until every blob kind moved 64 MiB), then the mixed phase left
    running; tests that need it quiet call locust.stop(). Every phase is bounded by run_time."""
    wait_for("Locust workers to connect", lambda: len(locust.stats().get("workers", [])) >= 1, 60)
    locust.swarm(
        2, "150s", protocols="rest,grpc", payload_bytes=LARGE_BYTES, chunk_bytes=MiB,
        mix=",".join(f"{kind}=1" for kind in BLOB_KINDS), call_timeout=60,
    )  # fmt: skip
    try:
        wait_for("64 MiB payloads on every blob kind", lambda: _server_bytes_at_least(
            prometheus, LARGE_BYTES), timeout=150, every=3)  # fmt: skip
        locust.swarm(MIXED_USERS, "90s", payload_bytes=64 * 1024, chunk_bytes=16 * 1024,
                     mix=",".join(f"{kind}=1" for kind in ALL_KINDS))  # fmt: skip
        yield locust
    finally:
        locust.stop()

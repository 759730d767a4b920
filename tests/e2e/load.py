"""The e2e load: 64 MiB on every blob kind (standalone runs), then the full mix via the master."""

from __future__ import annotations

from dataclasses import dataclass

from wirelab.contract import EDGE_PROTOCOLS, KINDS_BY_PROTOCOL

from tests.e2e.lab import Lab
from tests.e2e.prom import Prometheus, Totals
from tests.e2e.swarm import LocustMaster

MiB = 1 << 20
# The end-to-end run's load: large payloads of at least 64 MiB on every blob kind, then the whole
# mix with small payloads kept running (bounded by run_time) while the checks read Prometheus.
LARGE_BYTES = 64 * MiB
ALL_KINDS = tuple(dict.fromkeys(k for kinds in KINDS_BY_PROTOCOL.values() for k in kinds))
BLOB_KINDS = tuple(k for k in ALL_KINDS if k.startswith(("upload", "download")))
# Few users: on a 2-core machine the point is every kind on both protocols, not throughput, and
# a starved Locust master answers Prometheus' 1 s scrape too late.
MIXED_USERS = 4


@dataclass(frozen=True)
class Load:
    """The running mixed load and the request totals from just before it started."""

    master: LocustMaster
    baseline: Totals


def moved_large_payloads(prometheus: Prometheus) -> set[tuple[str, str]]:
    """(protocol, kind) pairs whose servers have moved at least one LARGE_BYTES payload."""
    moved = prometheus.query(
        'sum by (protocol, kind) (wirelab_server_request_bytes_sum{kind=~"upload.*"})'
        ' or sum by (protocol, kind) (wirelab_server_response_bytes_sum{kind=~"download.*"})'
    )
    return {
        (r["metric"]["protocol"], r["metric"]["kind"])
        for r in moved
        if float(r["value"][1]) >= LARGE_BYTES
    }


def large_payload_run(lab: Lab, kind: str) -> None:
    """One short headless run of the lab's Locust image on one blob kind at LARGE_BYTES.

    Standalone, not through the workers: each blob kind's calls run and are checked on their
    own, and a 64 MiB body keeps an event loop busy for seconds (workers survive that only
    through the lab's --heartbeat-liveness, well above Locust's default of 3)."""
    protocols = ",".join(p for p in EDGE_PROTOCOLS if kind in KINDS_BY_PROTOCOL[p])
    users = str(len(protocols.split(",")))  # one user per protocol: at least one call each
    lab.compose(
        "run", "--rm", "-T", "--no-deps", "locust",
        "locust", "--headless", "--only-summary", "-u", users, "-r", users, "-t", "5s",
        "--stop-timeout", "120", "--protocols", protocols, "--mix", f"{kind}=1",
        "--payload-bytes", str(LARGE_BYTES), "--chunk-bytes", str(MiB), "--call-timeout", "120",
        "--metrics-port", "0",
        timeout=240,
    )  # fmt: skip

"""The cluster topology under compose's netem profile with its client-side balancing arm
(docs/network.md): gRPC's A dials each replica through a proxy of its own, made at start by
replica-proxies (toxiproxy/replicas.py), while REST's A reaches nginx through the lb proxy. A
network profile then delays both arms' hop alike, and the gRPC orders still spread over every
replica."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from wirelab_bench.knobs import NETWORK_PROFILES
from wirelab_bench.network import load_profiles

from tests.e2e.lab import Lab, profile_lab
from tests.e2e.netcalls import medians, order_grpc, order_rest, round_trips, set_network

pytestmark = pytest.mark.topology

# Two replicas keep the boot short; the arm lists one proxy per replica.
REPLICAS = 2
SERVICES = ["rest", "grpc", "lb", "rest-b", "grpc-b", "toxiproxy", "replica-proxies"]
CLIENT_SIDE = "grpc://toxiproxy:50201+toxiproxy:50202#grpc-b"


@dataclass
class ClusterLab:
    lab: Lab
    api: str
    rest: str
    grpc: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterLab]:
    folder = tmp_path_factory.mktemp("netem-cluster")
    env = {
        "WIRELAB_REPLICAS": str(REPLICAS),
        "WIRELAB_CLUSTER_GRPC_DOWNSTREAM": CLIENT_SIDE,
        "WIRELAB_GRPC_BALANCING": "round_robin",
    }
    with profile_lab(folder, "netem", SERVICES, topology="cluster", **env) as lab:
        api = lab.url("toxiproxy", 8474)
        yield ClusterLab(
            lab, api, lab.url("rest", 8000), lab.url("grpc", 50051).removeprefix("http://")
        )


def _served(lab: Lab) -> list[float]:
    """Orders each gRPC replica served: its own /metrics, read inside it (replicas publish no
    port); through Toxiproxy's counters they would show only once A's connections close."""
    read = (
        "import urllib.request as u; t = u.urlopen('http://127.0.0.1:9100/metrics').read();"
        "print(sum(float(l.rsplit(None, 1)[1]) for l in t.decode().splitlines()"
        " if l.startswith('wirelab_server_requests_total{')"
        " and 'outcome=\"ok\"' in l and 'kind=\"unary\"' in l))"
    )
    return [
        float(lab.compose("exec", "-T", "--index", str(n), "grpc-b", "python", "-c", read,
                          timeout=60).stdout)
        for n in range(1, REPLICAS + 1)
    ]  # fmt: skip


def test_the_job_made_a_proxy_per_replica(cluster: ClusterLab) -> None:
    proxies = httpx.get(f"{cluster.api}/proxies", timeout=5).json()
    made = {n: p for n, p in proxies.items() if n.startswith("grpc-b-")}
    assert sorted(made) == [f"grpc-b-{n}" for n in range(1, REPLICAS + 1)]
    assert [p["listen"].rsplit(":", 1)[1] for _, p in sorted(made.items())] == ["50201", "50202"]
    assert len({p["upstream"] for p in made.values()}) == REPLICAS


def test_region_delays_both_arms_hop_and_grpc_still_reaches_every_replica(
    cluster: ClusterLab,
) -> None:
    region = load_profiles(Path(NETWORK_PROFILES))["region"]
    set_network(cluster.api, "direct")
    bare = medians({"a": cluster.rest}, {"a": cluster.grpc}, order_rest, order_grpc)
    before = _served(cluster.lab)
    set_network(cluster.api, "region")
    try:
        toxics = httpx.get(f"{cluster.api}/proxies/grpc-b-1/toxics", timeout=5).json()
        emulated = medians({"a": cluster.rest}, {"a": cluster.grpc}, order_rest, order_grpc)
    finally:
        set_network(cluster.api, "direct")
    print(f"median ms of an order sent to A, direct: {bare}; region: {emulated}")
    assert len(toxics) == 2  # the profile went on the replicas' proxies too
    low, high = round_trips(region)
    for protocol in ("rest", "grpc"):
        # Sent to A: only the hop pays the round trip, to lb (REST) or to a replica (gRPC).
        hop = emulated[protocol]["a"] - bare[protocol]["a"]
        assert low < hop < high, (protocol, bare, emulated)
    # Every replica served some of the orders, each through its own proxy.
    after = _served(cluster.lab)
    assert all(b > a for a, b in zip(before, after, strict=True)), (before, after)

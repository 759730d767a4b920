"""compose's netem profile booted (docs/network.md), with the node profile: Toxiproxy in front of
each service under test, Python's and Node's, adds a profile's round trip on both protocols alike
and nothing without one, Prometheus sees the bytes
each proxy carried, and a short `wirelab bench` run through the proxies records its network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pandas as pd
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from wirelab_bench.cli import main
from wirelab_bench.knobs import NETWORK_PROFILES
from wirelab_bench.network import load_profiles

from tests.bench.lab import direct_then
from tests.e2e.bench_run import host_env
from tests.e2e.lab import Lab, profile_lab, wait_for
from tests.e2e.netcalls import Timed, medians, round_trips, set_network
from tests.e2e.prom import Prometheus

pytestmark = pytest.mark.topology

SERVICES = ["rest", "grpc", "rest-node", "grpc-node", "toxiproxy", "prometheus"]
# Each runtime's services, direct and through their proxy (the paths of NetLab.rest/grpc).
PATHS = (("direct", "proxy"), ("node", "node-proxy"))
# Both runtimes in each group, so each runtime's cells go through its own proxies.
SCENARIO = 'runtimes = ["python", "node"]\n' + direct_then("region")


@dataclass
class NetLab:
    lab: Lab
    prometheus: Prometheus
    api: str
    rest: dict[str, str]  # a path of PATHS -> base URL
    grpc: dict[str, str]  # a path of PATHS -> host:port


@pytest.fixture(scope="module")
def net_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetLab]:
    folder = tmp_path_factory.mktemp("netem")
    with profile_lab(folder, "netem", SERVICES, COMPOSE_PROFILES="netem,node") as lab:

        def at(service: str, port: int) -> str:
            return lab.url(service, port).removeprefix("http://")

        yield NetLab(
            lab,
            Prometheus(lab.url("prometheus", 9090)),
            lab.url("toxiproxy", 8474),
            {
                "direct": lab.url("rest", 8000),
                "proxy": lab.url("toxiproxy", 8000),
                "node": lab.url("rest-node", 8000),
                "node-proxy": lab.url("toxiproxy", 8010),
            },
            {
                "direct": at("grpc", 50051),
                "proxy": at("toxiproxy", 50051),
                "node": at("grpc-node", 50051),
                "node-proxy": at("toxiproxy", 50061),
            },
        )


def _health_rest(client: httpx.Client) -> object:
    return client.get("/healthz").raise_for_status()


def _health_grpc(channel: grpc.Channel) -> object:
    check = health_pb2_grpc.HealthStub(channel).Check
    return check(health_pb2.HealthCheckRequest(), timeout=10)


def _timed_calls(net: NetLab) -> Timed:
    """Median ms of a tiny call per protocol, direct and through the proxy, on one connection."""
    return medians(net.rest, net.grpc, _health_rest, _health_grpc)


def _network(net: NetLab, profile: str) -> None:
    set_network(net.api, profile)


def test_the_region_profile_adds_its_round_trip_on_both_protocols(net_lab: NetLab) -> None:
    region = load_profiles(Path(NETWORK_PROFILES))["region"]
    _network(net_lab, "direct")
    bare = _timed_calls(net_lab)
    _network(net_lab, "region")
    try:
        emulated = _timed_calls(net_lab)
    finally:
        _network(net_lab, "direct")
    for protocol in ("rest", "grpc"):
        for direct, proxy in PATHS:
            # The proxy alone costs well under the profile's jitter; the profile adds its round
            # trip, once.
            proxy_alone = bare[protocol][proxy] - bare[protocol][direct]
            added = emulated[protocol][proxy] - bare[protocol][direct]
            assert proxy_alone < region.jitter_ms, (protocol, proxy, bare)
            low, high = round_trips(region)
            assert low < added < high, (protocol, proxy, bare, emulated)
            # Not through the proxy, nothing changes.
            assert emulated[protocol][direct] < region.rtt_ms / 2, (protocol, emulated)


def test_prometheus_sees_what_each_proxy_carried(net_lab: NetLab) -> None:
    _timed_calls(net_lab)

    def carried() -> dict[str, float] | None:
        found = net_lab.prometheus.values(
            "sum by (proxy) (toxiproxy_proxy_sent_bytes_total)", by="proxy"
        )
        every = ("rest", "grpc", "rest-node", "grpc-node")
        return found if all(found.get(p, 0) > 0 for p in every) else None

    wait_for("toxiproxy's bytes per proxy in Prometheus", carried, timeout=40, every=2)


def test_a_bench_run_goes_through_the_proxies_only_where_its_groups_say(
    net_lab: NetLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = tmp_path / "wan.toml"
    scenario.write_text(SCENARIO)
    env = host_env(net_lab.lab)
    for name, value in env.items():
        if name.startswith("WIRELAB_BENCH_"):
            monkeypatch.setenv(name, value)
    args = [
        f"--toxiproxy-url={net_lab.api}",
        f"--net-rest-url={net_lab.rest['proxy']}",
        f"--net-grpc-target={net_lab.grpc['proxy']}",
        f"--node-rest-url={net_lab.rest['node']}",
        f"--node-grpc-target={net_lab.grpc['node']}",
        f"--node-rest-metrics-url={net_lab.lab.url('rest-node', 9100)}/metrics",
        f"--node-grpc-metrics-url={net_lab.lab.url('grpc-node', 9100)}/metrics",
        f"--net-node-rest-url={net_lab.rest['node-proxy']}",
        f"--net-node-grpc-target={net_lab.grpc['node-proxy']}",
        "--progress=off",
    ]
    assert main(["bench", str(scenario), *args]) == 0
    (run,) = Path(env["WIRELAB_BENCH_RESULTS_DIR"]).glob("*_wan")
    manifest = json.loads((run / "manifest.json").read_text())
    assert set(manifest["network"]) == {"region"} and manifest["network_reset"] == "ok"
    tidy = pd.read_csv(run / "tidy.csv")
    assert len(tidy) == 8  # 2 groups x 2 runtimes x 2 protocols
    mean = tidy.pivot_table(
        index=["runtime", "protocol"], columns="network", values="client_mean_ms"
    )
    added = mean["region"] - mean["direct"]
    assert ((added > 35) & (added < 60)).all(), mean
    assert httpx.get(f"{net_lab.api}/proxies/rest/toxics").json() == []

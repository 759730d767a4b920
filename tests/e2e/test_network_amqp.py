"""The order chain's AMQP arm under compose's netem profile (PROFILES=amqp,netem; docs/network.md):
its order service reaches RabbitMQ through the proxy amqp-broker and its edge has the proxy amqp,
so a network profile delays each of its hops by one round trip, as it delays each of the gRPC
arm's hops; cutting the broker link fails orders at once as UNAVAILABLE and the arm serves again
when it is back; and `make bench` sends a network group's AMQP cells through the edge's proxy."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from wirelab_bench.knobs import NETWORK_PROFILES
from wirelab_bench.network import AMQP_PROXIES, Profile, load_profiles

from tests.bench.lab import direct_then
from tests.e2e.bench_run import bench, bench_env
from tests.e2e.lab import Lab, profile_lab, wait_for
from tests.e2e.netcalls import Timed, medians, order_grpc, order_rest, set_network

pytestmark = pytest.mark.topology

# The AMQP arm (its consumers and the broker come with it) and the gRPC arm beside it; Toxiproxy
# brings the rest of the chain, whose hops it fronts.
SERVICES = ["amqp", "grpc", "toxiproxy"]
HOPS = 3  # product, customer, shipping: one after another (WIRELAB_FANOUT=sequential)


@dataclass
class ArmsLab:
    lab: Lab
    api: str
    edges: dict[str, str]  # path -> gRPC target: each arm's edge, direct and through its proxy


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArmsLab]:
    folder = tmp_path_factory.mktemp("netem-amqp")
    with profile_lab(folder, "amqp,netem", SERVICES, topology="order-chain") as lab:

        def target(service: str, port: int) -> str:
            return lab.url(service, port).removeprefix("http://")

        edges = {
            "amqp": target("amqp", 50051),
            "amqp-proxy": target("toxiproxy", 50052),
            "grpc": target("grpc", 50051),
            "grpc-proxy": target("toxiproxy", 50051),
        }
        yield ArmsLab(lab, lab.url("toxiproxy", 8474), edges)


def _region() -> Profile:
    return load_profiles(Path(NETWORK_PROFILES))["region"]


def _bounds(profile: Profile, trips: int) -> tuple[float, float]:
    """What ``trips`` round trips of ``profile`` may add: each at least rtt - jitter, at most
    rtt + 2 jitter (the proxy and this shared machine's noise on top), as the hop tests allow."""
    return trips * (profile.rtt_ms - profile.jitter_ms), trips * (
        profile.rtt_ms + 2 * profile.jitter_ms
    )


def _orders_ms(net: ArmsLab) -> dict[str, float]:
    timed: Timed = medians({}, net.edges, order_rest, order_grpc)
    return timed["grpc"]


def test_region_delays_each_amqp_hop_as_it_delays_each_grpc_hop(arms: ArmsLab) -> None:
    set_network(arms.api, "direct")
    bare = _orders_ms(arms)
    set_network(arms.api, "region")
    try:
        toxics = {p: httpx.get(f"{arms.api}/proxies/{p}/toxics", timeout=5).json()
                  for p in AMQP_PROXIES}  # fmt: skip
        emulated = _orders_ms(arms)
    finally:
        set_network(arms.api, "direct")
    print(f"\nmedian order ms, direct: {bare}\nunder region: {emulated}")
    assert {p: len(t) for p, t in toxics.items()} == dict.fromkeys(AMQP_PROXIES, 2)
    hops, both = _bounds(_region(), HOPS), _bounds(_region(), HOPS + 1)
    for arm in ("amqp", "grpc"):
        # Sent to the edge: only its three hops pay. Through the edge's proxy: one trip more.
        added = emulated[arm] - bare[arm]
        through = emulated[f"{arm}-proxy"] - bare[arm]
        assert hops[0] < added < hops[1], (arm, bare, emulated)
        assert both[0] < through < both[1], (arm, bare, emulated)


def _order(target: str) -> grpc.StatusCode:
    with grpc.insecure_channel(target) as channel:
        try:
            order_grpc(channel)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_a_cut_broker_link_fails_orders_at_once_and_the_arm_serves_again(arms: ArmsLab) -> None:
    """The proxy amqp-broker disabled (Toxiproxy closes its connections and refuses new ones):
    the edge answers UNAVAILABLE well before the call's deadline, never hangs; enabled again,
    its robust connection comes back and orders go through."""
    proxy = f"{arms.api}/proxies/amqp-broker"
    edge = arms.edges["amqp"]
    assert _order(edge) == grpc.StatusCode.OK
    httpx.post(proxy, json={"enabled": False}, timeout=5).raise_for_status()
    try:
        code = wait_for(
            "the AMQP arm to fail orders without its broker",
            lambda: c if (c := _order(edge)) != grpc.StatusCode.OK else None,
            timeout=20,
        )
        assert code == grpc.StatusCode.UNAVAILABLE, code
    finally:
        httpx.post(proxy, json={"enabled": True}, timeout=5).raise_for_status()
    wait_for(
        "the AMQP arm to serve again through its broker link",
        lambda: _order(edge) == grpc.StatusCode.OK or None,
        timeout=30,
    )


def test_bench_sends_a_network_groups_amqp_cells_through_the_proxies(
    arms: ArmsLab, tmp_path: Path
) -> None:
    scenario = tmp_path / "amqp-wan.toml"
    scenario.write_text(
        'topology = "order-chain"\nprotocols = ["grpc", "amqp"]\n' + direct_then("region")
    )
    lab = arms.lab
    env = bench_env(
        lab,
        tmp_path,
        prometheus_url="",
        grpc_target=arms.edges["grpc"],
        grpc_metrics_url=lab.url("grpc", 9100) + "/metrics",
        amqp_target=arms.edges["amqp"],
        amqp_metrics_url=lab.url("amqp", 9100) + "/metrics",
        toxiproxy_url=arms.api,
        net_grpc_target=arms.edges["grpc-proxy"],
        net_amqp_target=arms.edges["amqp-proxy"],
    )
    _, manifest, tidy = bench(lab, env, scenario)
    toxics = manifest["network"]["region"]["toxics"]
    assert all(len(toxics[p]) == 2 for p in AMQP_PROXIES), toxics
    assert manifest["network_reset"] == "ok"
    assert set(tidy["protocol"]) == {"grpc", "amqp"} and (tidy["errors"] == 0).all()
    assert (tidy["hop_calls_per_order"] - HOPS).abs().max() < 0.5, tidy.to_string()
    mean = tidy.pivot_table(index="protocol", columns="network", values="client_mean_ms")
    print(f"\nmean client ms per order:\n{mean}")
    # The edge's link and three hop links: four round trips per order on either arm.
    low, high = _bounds(_region(), HOPS + 1)
    added = mean["region"] - mean["direct"]
    assert ((added > low) & (added < high)).all(), mean

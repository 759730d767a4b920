"""The a-to-b topology under compose's netem profile (docs/network.md): A reaches B through the
lab's Toxiproxy (topologies/netem/a-to-b.yaml), so a network profile delays the hop A -> B as it
delays the load generator -> A, on both protocols, and A still labels its calls with B's name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from wirelab_bench.knobs import NETWORK_PROFILES
from wirelab_bench.network import load_profiles

from tests.e2e.lab import profile_lab
from tests.e2e.netcalls import (
    CALLS,
    Timed,
    medians,
    order_grpc,
    order_rest,
    round_trips,
    set_network,
)

pytestmark = pytest.mark.topology

SERVICES = ["rest", "grpc", "rest-b", "grpc-b", "toxiproxy"]


@dataclass
class HopLab:
    api: str
    rest: dict[str, str]  # "a" (A itself) / "edge" (A through the edge's proxy) -> base URL
    grpc: dict[str, str]
    metrics: dict[str, str]  # protocol -> A's /metrics


@pytest.fixture(scope="module")
def hop_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HopLab]:
    folder = tmp_path_factory.mktemp("netem-hops")
    with profile_lab(folder, "netem", SERVICES, topology="a-to-b") as lab:
        yield HopLab(
            lab.url("toxiproxy", 8474),
            {"a": lab.url("rest", 8000), "edge": lab.url("toxiproxy", 8000)},
            {
                "a": lab.url("grpc", 50051).removeprefix("http://"),
                "edge": lab.url("toxiproxy", 50051).removeprefix("http://"),
            },
            {p: lab.url(p, 9100) + "/metrics" for p in ("rest", "grpc")},
        )


def _orders_ms(net: HopLab) -> Timed:
    """Median ms of an order (A relays it to B) per protocol, sent to A and through the edge."""
    return medians(net.rest, net.grpc, order_rest, order_grpc)


def _network(net: HopLab, profile: str) -> None:
    set_network(net.api, profile)


def test_region_delays_the_hop_as_it_delays_the_edge(hop_lab: HopLab) -> None:
    region = load_profiles(Path(NETWORK_PROFILES))["region"]
    _network(hop_lab, "direct")
    bare = _orders_ms(hop_lab)
    _network(hop_lab, "region")
    try:
        toxics = httpx.get(f"{hop_lab.api}/proxies/rest-b/toxics", timeout=5).json()
        emulated = _orders_ms(hop_lab)
    finally:
        _network(hop_lab, "direct")
    assert len(toxics) == 2  # the profile went on the hop's proxy too
    one, two = round_trips(region), round_trips(region, trips=2)
    for protocol in ("rest", "grpc"):
        # Sent to A: only the hop A -> B pays the round trip. Through the edge's proxy: both.
        hop = emulated[protocol]["a"] - bare[protocol]["a"]
        both = emulated[protocol]["edge"] - bare[protocol]["a"]
        assert one[0] < hop < one[1], (protocol, bare, emulated)
        assert two[0] < both < two[1], (protocol, bare, emulated)


def test_the_hop_link_can_carry_a_profile_the_edge_does_not(hop_lab: HopLab) -> None:
    """`wirelab network direct --hops region` (a group's hop_network): the hop pays the round
    trip, the edge's proxy does not, so an order costs the same through it as sent to A."""
    region = load_profiles(Path(NETWORK_PROFILES))["region"]
    _network(hop_lab, "direct")
    bare = _orders_ms(hop_lab)
    set_network(hop_lab.api, "direct", hops="region")
    try:
        edge = httpx.get(f"{hop_lab.api}/proxies/rest/toxics", timeout=5).json()
        emulated = _orders_ms(hop_lab)
    finally:
        _network(hop_lab, "direct")
    assert edge == []
    low, high = round_trips(region)
    for protocol in ("rest", "grpc"):
        for path in ("a", "edge"):
            added = emulated[protocol][path] - bare[protocol]["a"]
            assert low < added < high, (protocol, path, bare, emulated)


def test_a_labels_its_calls_with_bs_name_not_the_proxys(hop_lab: HopLab) -> None:
    _orders_ms(hop_lab)
    for protocol, url in hop_lab.metrics.items():
        text = httpx.get(url, timeout=5).text
        peers = {
            s.labels["peer"]: s.value
            for family in text_string_to_metric_families(text)
            if family.name == "wirelab_client_requests"
            for s in family.samples
            if s.name == "wirelab_client_requests_total" and s.labels.get("outcome") == "ok"
        }
        assert peers.get(f"{protocol}-b", 0) >= 2 * (CALLS + 1), (protocol, peers)
        assert "toxiproxy" not in peers, (protocol, peers)

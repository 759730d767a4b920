"""The families a live registry exposes are exactly the metric contract's: names, help, labels,
buckets and the zero series it promises, on the server and on the Locust master."""

from __future__ import annotations

import json

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from wirelab.contract import (
    CALLS,
    CANONICAL_CODES,
    CLIENT,
    CLIENT_OUTCOMES,
    EDGE_PROTOCOLS,
    KINDS_BY_PROTOCOL,
    PROTOCOLS,
    SERVER,
    STREAM_KINDS,
    Family,
    address_of,
    peer_of,
)
from wirelab.contract.folder import FOLDER
from wirelab.metrics import ServerMetrics
from wirelab_locust.metrics import ClientCollector, Gauges, Observations, bucket_bounds

# The peer label of the Locust master's zero series: the host each protocol's users call.
PEERS = {"rest": "rest", "grpc": "grpc"}


def _families(registry: CollectorRegistry) -> dict[str, Metric]:
    return {m.name: m for m in registry.collect() if m.name.startswith("wirelab_")}


def _zero_series(family: Family, protocol: str, call: bool) -> set[tuple[str, ...]]:
    """The label values of the series the contract says exist before the first call."""
    found: set[tuple[str, ...]] = set()
    for kind in KINDS_BY_PROTOCOL[protocol]:
        base = (protocol, kind, CALLS[kind], PEERS[protocol]) if call else (protocol, kind)
        if family.preinitialise == "kind" or (
            family.preinitialise == "stream_kind" and kind in STREAM_KINDS
        ):
            found.add(base)
        elif family.preinitialise == "kind_outcome":
            for outcome, code in CANONICAL_CODES[protocol].items():
                found.add((*base, outcome, code)[: len(family.labels)])
            if call:
                found |= {(*base, outcome) for outcome in CLIENT_OUTCOMES}
    return found


def _check(exposed: Metric, family: Family, series: set[tuple[str, ...]]) -> None:
    assert (exposed.type, exposed.documentation) == (family.type, family.help)
    for sample in exposed.samples:
        names = [n for n in sample.labels if n != "le"]
        assert set(names) == set(family.labels), sample
    if family.type == "histogram":
        bounds = [s.labels["le"] for s in exposed.samples if s.name.endswith("_bucket")]
        per_series = len(family.buckets) + 1
        # Series that exist have the contract's buckets; whether they should exist is checked
        # below (a protocol without stream kinds, amqp, has no time-to-first-message series).
        if bounds:
            assert bounds[:per_series] == bucket_bounds(family.buckets)
    got = {tuple(s.labels[n] for n in family.labels) for s in exposed.samples}
    if family.preinitialise is not None:
        assert got == series, family.name


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_server_registry_exposes_the_contract(protocol: str) -> None:
    registry = CollectorRegistry()
    ServerMetrics(protocol, registry, "async")
    exposed = _families(registry)
    assert list(exposed) == list(SERVER)
    for name, family in SERVER.items():
        _check(exposed[name], family, _zero_series(family, protocol, call=False))


def test_the_locust_master_exposes_the_contract() -> None:
    observations = Observations()
    observations.preinitialise(PEERS)
    registry = CollectorRegistry()
    gauges = Gauges(users=0, workers=0, cpu={"master": 0.0})
    registry.register(ClientCollector(observations, lambda: gauges))
    exposed = _families(registry)
    assert list(exposed) == list(CLIENT)
    for name, family in CLIENT.items():
        series = set().union(*(_zero_series(family, p, call=True) for p in EDGE_PROTOCOLS))
        _check(exposed[name], family, series)


def test_the_contract_is_plain_json_at_the_top() -> None:
    """Another runtime reads the file itself: every family names a bucket set that exists."""
    data = json.loads((FOLDER / "metrics.json").read_text())
    for family in data["server"] + data["client"]:
        assert (family["type"] == "histogram") == ("buckets" in family), family["name"]
        if "buckets" in family:
            assert isinstance(data["buckets"][family["buckets"]], list)
    assert set(data["kinds"]) == set(data["protocols"])
    assert set(data["stream_kinds"]) <= set(data["kinds"]["rest"]) & set(data["kinds"]["grpc"])


def _samples(registry: CollectorRegistry) -> int:
    return sum(len(m.samples) for m in registry.collect() if m.name.startswith("wirelab_"))


def test_a_fresh_service_page_stays_small() -> None:
    """The series diet: before the duration histogram lost its outcome label a fresh REST
    service exposed 2,316 wirelab samples and the Locust master 5,146 (docs/observability.md)."""
    registry = CollectorRegistry()
    ServerMetrics("rest", registry, "async")
    assert _samples(registry) <= 1000
    observations = Observations()
    observations.preinitialise(PEERS)
    client = CollectorRegistry()
    client.register(ClientCollector(observations, lambda: Gauges(0, 0, {"master": 0.0})))
    assert _samples(client) <= 1600


@pytest.mark.parametrize(
    ("address", "peer"),
    [
        ("http://rest-b:8000", "rest-b"),
        ("http://127.0.0.1:8000/prefix", "127.0.0.1"),
        ("grpc://grpc-b:50051", "grpc-b"),
        ("grpc-b:50051", "grpc-b"),
        ("dns:///grpc-b:50051", "grpc-b"),
        ("[::1]:50051", "::1"),
        ("http://[::1]:8000", "::1"),
        ("lb", "lb"),
        # Through a proxy, the name after '#' (a hop under a network profile).
        ("http://toxiproxy:8101#rest-b", "rest-b"),
        ("grpc://toxiproxy:50101#grpc-b", "grpc-b"),
    ],
)
def test_the_peer_label_is_the_host_name_called(address: str, peer: str) -> None:
    assert peer_of(address) == peer


def test_a_named_target_dials_its_address() -> None:
    assert address_of("http://toxiproxy:8101#rest-b") == "http://toxiproxy:8101"
    assert address_of("grpc://grpc-b:50051") == "grpc://grpc-b:50051"

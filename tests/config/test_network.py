"""Toxiproxy in compose's netem profile (docs/network.md), as configured: only with its profile,
published on loopback with ports the e2e lab can move, a healthcheck with what its image has, one
proxy per protocol in front of the service compose runs for it, and the bench service pointed at
those proxies. No engine is needed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from wirelab.contract import HOST_PORTS, address_of, peer_of
from wirelab_bench.network import AMQP_PROXIES, PROXIES

from tests.config.queries import REPO
from tests.config.test_broker import compose_config
from tests.config.test_topologies import resolved
from tests.e2e.lab import HOST_PORT_VARIABLES

PROXY_CONFIG = REPO / "toxiproxy" / "toxiproxy.json"


def toxiproxy(**env: str) -> dict[str, Any]:
    service: dict[str, Any] = compose_config("netem", **env)["services"]["toxiproxy"]
    return service


def test_toxiproxy_starts_only_with_the_netem_profile_and_after_the_services() -> None:
    assert "toxiproxy" not in compose_config()["services"]
    service = toxiproxy()
    assert service["profiles"] == ["netem"]
    assert {"rest", "grpc"} <= set(service["depends_on"])
    assert service["healthcheck"]["test"] == ["CMD", "/toxiproxy-cli", "list"]
    assert "-config=/config/toxiproxy.json" in service["command"]


def test_its_ports_are_on_loopback_and_movable_by_the_e2e_lab() -> None:
    ports = {p["target"]: p for p in toxiproxy()["ports"]}
    assert set(ports) == {8474, 8000, 50051, 8010, 50061, 50052}
    assert {p["host_ip"] for p in ports.values()} == {"127.0.0.1"}
    raw = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["toxiproxy"]
    variables = {v for port in raw["ports"] for v in re.findall(r"(WIRELAB_\w+_HOST_PORT)", port)}
    assert len(variables) == 6 and variables <= set(HOST_PORT_VARIABLES)


# Each service under test (the Node.js ones with the node profile) and its port inside compose:
# the proxy listens on the port the service is published on, and forwards to the service.
FRONTED = {"rest": 8000, "grpc": 50051, "rest-node": 8000, "grpc-node": 50051}


def test_one_proxy_per_service_under_test_in_front_of_it() -> None:
    proxies = {p["name"]: p for p in json.loads(PROXY_CONFIG.read_text())}
    assert set(PROXIES) <= set(proxies) and set(proxies) == set(FRONTED)
    services = compose_config("netem", "node")["services"]
    published = {p["target"]: p["published"] for p in services["toxiproxy"]["ports"]}
    for name, port in FRONTED.items():
        assert proxies[name]["upstream"] == f"{name}:{port}"
        listen = int(proxies[name]["listen"].rsplit(":", 1)[1])
        assert listen in published, name
        # The proxy listens where the service itself is published: rest-node's 8010 -> 8000.
        own = {p["target"]: p["published"] for p in services[name]["ports"]}
        assert str(listen) == str(own[port]) or listen == port, (name, own)


def test_the_bench_service_reaches_the_proxies_and_the_profiles() -> None:
    bench = compose_config("bench", "netem")["services"]["bench"]
    env = bench["environment"]
    assert env["WIRELAB_BENCH_TOXIPROXY_URL"] == "http://toxiproxy:8474"
    assert env["WIRELAB_BENCH_NET_REST_URL"] == "http://toxiproxy:8000"
    assert env["WIRELAB_BENCH_NET_GRPC_TARGET"] == "toxiproxy:50051"
    assert env["WIRELAB_BENCH_NET_NODE_REST_URL"] == "http://toxiproxy:8010"
    assert env["WIRELAB_BENCH_NET_NODE_GRPC_TARGET"] == "toxiproxy:50061"
    mounted = {v["target"]: v["source"] for v in bench["volumes"]}
    profiles = env["WIRELAB_BENCH_NETWORK_PROFILES"]
    assert mounted[profiles.rsplit("/", 1)[0]] == str(REPO / "toxiproxy")


def test_make_lab_down_and_the_e2e_lab_take_every_profile_down() -> None:
    """`make lab-down` left Toxiproxy running, and the network with it, when it named only the
    bench and node profiles."""
    services = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    profiles = {p for s in services.values() for p in s.get("profiles", [])}
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\nlab-down:\n", 1)[1].splitlines()[0]
    assert set(re.findall(r"--profile (\S+)", recipe)) == profiles, recipe
    e2e = (REPO / "tests" / "e2e" / "lab.py").read_text()
    named = re.search(r"named = \(([^)]*)\)\n\s*profiles = \[arg for p in named", e2e)
    assert named is not None
    assert set(re.findall(r'"(\w+)"', named.group(1))) == profiles


@pytest.mark.parametrize(
    "topology", sorted(p.stem for p in (REPO / "topologies/netem").glob("*.yaml"))
)
def test_under_netem_a_topologys_hops_go_through_toxiproxy_keeping_their_peer_names(
    topology: str,
) -> None:
    """topologies/netem/<topology>.yaml (offline/lab-up adds it with PROFILES=netem): each edge
    calls each downstream through a proxy of toxiproxy/<topology>.json whose upstream is that
    downstream, under the downstream's own peer label; every hop proxy is used; the edges'
    proxies stay those of toxiproxy.json. The Node.js edges too, where the topology wires them
    (with the node profile); the Python hops are healthy before Toxiproxy starts."""
    files = ("compose.yaml", f"topologies/{topology}.yaml")
    profiles = "netem,node"
    plain = resolved(*files, COMPOSE_PROFILES=profiles)["services"]
    proxied = resolved(*files, f"topologies/netem/{topology}.yaml", COMPOSE_PROFILES=profiles)
    services = proxied["services"]
    mounts = {v["target"]: v["source"] for v in services["toxiproxy"]["volumes"]}
    config = Path(mounts["/config/toxiproxy.json"])
    assert config == REPO / "toxiproxy" / f"{topology}.json"
    proxies = {p["name"]: p for p in json.loads(config.read_text())}
    edges = {p["name"]: p for p in json.loads(PROXY_CONFIG.read_text())}
    assert {name: proxies[name] for name in edges} == edges
    by_port = {p["listen"].rsplit(":", 1)[1]: p for p in proxies.values()}
    hops = set()
    wired = [e for e in edges if plain[e]["environment"].get("WIRELAB_DOWNSTREAM")]
    assert set(PROXIES) <= set(wired)
    for edge in wired:
        direct = plain[edge]["environment"]["WIRELAB_DOWNSTREAM"].split(",")
        via = services[edge]["environment"]["WIRELAB_DOWNSTREAM"].split(",")
        assert len(via) == len(direct), edge
        for target, through in zip(direct, via, strict=True):
            peer = peer_of(target)
            assert peer_of(through) == peer, (edge, through)
            scheme, _, upstream = target.partition("://")
            host, _, port = address_of(through).partition("://")[2].partition(":")
            assert (address_of(through).partition("://")[0], host) == (scheme, "toxiproxy")
            proxy = by_port[port]
            assert proxy["upstream"] == upstream, (edge, through, proxy)
            if edge in PROXIES:
                assert services["toxiproxy"]["depends_on"][peer]["condition"] == "service_healthy"
            hops.add(proxy["name"])
    # The AMQP arm's two (its own test below) are neither toxiproxy.json's nor a topology hop's.
    assert hops == set(proxies) - set(edges) - set(AMQP_PROXIES)


def test_under_netem_the_amqp_arm_reaches_its_broker_and_is_reached_through_toxiproxy() -> None:
    """The order chain with PROFILES=amqp,netem: the AMQP arm's order service sends its three
    queues' orders through the proxy amqp-broker, whose upstream is the broker it used; its
    consumers stay beside the broker (one hop link per order and hop, as a gRPC hop has); its
    edge has a proxy of its own, published as the table says, which the bench service knows."""
    files = ("compose.yaml", "topologies/order-chain.yaml")
    plain = resolved(*files, COMPOSE_PROFILES="amqp,netem,bench")["services"]
    services = resolved(
        *files, "topologies/netem/order-chain.yaml", COMPOSE_PROFILES="amqp,netem,bench"
    )["services"]
    proxies = {p["name"]: p for p in json.loads((REPO / "toxiproxy/order-chain.json").read_text())}
    edge, broker = (proxies[name] for name in AMQP_PROXIES)
    direct = plain["amqp"]["environment"]["WIRELAB_DOWNSTREAM"].split(",")
    via = services["amqp"]["environment"]["WIRELAB_DOWNSTREAM"].split(",")
    listen = broker["listen"].rsplit(":", 1)[1]
    assert [u.replace(broker["upstream"], f"toxiproxy:{listen}") for u in direct] == via
    assert services["amqp"]["depends_on"]["toxiproxy"]["condition"] == "service_healthy"
    for consumer in ("amqp-product", "amqp-customer", "amqp-shipping"):
        consume = services[consumer]["environment"]["WIRELAB_AMQP_CONSUME"]
        assert consume == plain[consumer]["environment"]["WIRELAB_AMQP_CONSUME"]
        assert consume.startswith(f"amqp://{broker['upstream']}/")
    assert edge["upstream"] == "amqp:50051"
    published = {p["target"]: p["published"] for p in services["toxiproxy"]["ports"]}
    port = int(edge["listen"].rsplit(":", 1)[1])
    assert published[port] == str(HOST_PORTS["net_amqp_edge"])
    bench = services["bench"]["environment"]
    assert bench["WIRELAB_BENCH_NET_AMQP_TARGET"] == f"toxiproxy:{port}"
    assert bench["WIRELAB_BENCH_AMQP_TARGET"] == "amqp:50051"
    assert bench["WIRELAB_BENCH_AMQP_METRICS_URL"] == "http://amqp:9100/metrics"


def test_the_clusters_client_side_arm_gets_a_proxy_per_replica_before_its_edges_start() -> None:
    """topologies/netem/cluster.yaml: replica-proxies (toxiproxy/replicas.py, in the gRPC image)
    runs once Toxiproxy and the replicas are healthy and before the gRPC edges start; its port
    blocks (grpc-b from :50201, grpc-node-b from :50211, ten each) collide with no proxy of
    toxiproxy/cluster.json."""
    files = ("compose.yaml", "topologies/cluster.yaml", "topologies/netem/cluster.yaml")
    services = resolved(*files, COMPOSE_PROFILES="netem,node")["services"]
    job = services["replica-proxies"]
    assert job["image"] == services["grpc"]["image"] and job["restart"] == "no"
    mounts = {v["target"]: v["source"] for v in job["volumes"]}
    assert mounts[job["entrypoint"][1]] == str(REPO / "toxiproxy" / "replicas.py")
    assert job["command"] == ["grpc-b:50051:50201", "--optional", "grpc-node-b:50051:50211"]
    after = {name: d["condition"] for name, d in job["depends_on"].items()}
    assert after == dict.fromkeys(("toxiproxy", "grpc-b", "grpc-node-b"), "service_healthy")
    assert job["depends_on"]["grpc-node-b"]["required"] is False
    for edge in ("grpc", "grpc-node"):
        condition = services[edge]["depends_on"]["replica-proxies"]["condition"]
        assert condition == "service_completed_successfully"
    # Toxiproxy no longer waits for the edges, which wait for the job, which waits for it.
    assert set(services["toxiproxy"]["depends_on"]) == {"lb"}
    listening = {
        int(p["listen"].rsplit(":", 1)[1])
        for p in json.loads((REPO / "toxiproxy" / "cluster.json").read_text())
    }
    assert not listening & set(range(50201, 50221))

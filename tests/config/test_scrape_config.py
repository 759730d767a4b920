"""prometheus.yml labels every wirelab target with its `service` (and a service under test with its
`runtime`) and finds every topology's hops and the Node.js services by DNS."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.config.queries import REPO

CONFIG = REPO / "prometheus" / "prometheus.yml"
TOPOLOGIES = REPO / "topologies"


class _ComposeLoader(yaml.SafeLoader):
    """Compose files' own tags (`!reset`, `!override`) read as the value they tag."""


def _tagged(loader: yaml.SafeLoader, _: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_ComposeLoader.add_multi_constructor("!", _tagged)


def _jobs() -> dict[str, dict[str, Any]]:
    config = yaml.safe_load(CONFIG.read_text())
    return {job["job_name"]: job for job in config["scrape_configs"]}


_EDGES = {"rest": "python", "grpc": "python", "rest-node": "node", "grpc-node": "node"}


def _hop_services() -> dict[str, str]:
    """Services of topologies/*.yaml that are a lab service's image, by runtime: a hop (`extends`
    rest, grpc or their Node.js twins), not an edge (those themselves) nor a balancer."""
    found: dict[str, str] = {}
    for path in sorted(TOPOLOGIES.glob("*.yaml")):
        services: dict[str, Any] = yaml.load(path.read_text(), _ComposeLoader)["services"]
        for name, service in services.items():
            extended = (service.get("extends") or {}).get("service")
            if extended in _EDGES:
                found[name] = _EDGES[extended]
    # The AMQP arm's edge extends the gRPC service but is called by the load generator: its job.
    found.pop("amqp", None)
    return found


def _named_by_dns(runtime: str) -> list[dict[str, Any]]:
    """The relabelling of a DNS-found job: the name looked up is `service`, plus its runtime."""
    return [
        {"source_labels": ["__meta_dns_name"], "target_label": "service"},
        {"target_label": "runtime", "replacement": runtime},
    ]


def test_edges_and_locust_carry_their_service_label_and_the_edges_their_runtime() -> None:
    """Locust's also says it is the generator: wirelab-loadgen's series carry generator="loadgen"
    (loadgen/main.go), and the generator_* rules compare the two."""
    jobs = _jobs()
    for job, labels in (
        ("rest", {"service": "rest", "runtime": "python"}),
        ("grpc", {"service": "grpc", "runtime": "python"}),
        ("locust", {"service": "locust", "generator": "locust"}),
    ):
        (static,) = jobs[job]["static_configs"]
        assert static["labels"] == labels, job


def test_the_hops_job_finds_every_topologys_hops_by_dns_one_target_per_replica() -> None:
    hops = _jobs()["hops"]
    (dns,) = hops["dns_sd_configs"]
    # Type A: every replica's address is a target (instance = address:port, one series each).
    assert (dns["type"], dns["port"]) == ("A", 9100)
    assert _hop_services(), "no hop services in topologies/: the check would pass vacuously"
    assert set(dns["names"]) == set(_hop_services())
    # Every hop is python, but for the names the last rule gives runtime="node": exactly the
    # Node.js hops (Prometheus anchors a relabel regex at both ends).
    *named, node = hops["relabel_configs"]
    assert named == _named_by_dns("python")
    assert {k: v for k, v in node.items() if k != "regex"} == {
        "source_labels": ["__meta_dns_name"], "target_label": "runtime", "replacement": "node"
    }  # fmt: skip
    runtimes = {s: "node" if re.fullmatch(node["regex"], s) else "python" for s in _hop_services()}
    assert runtimes == _hop_services()
    assert "node" in runtimes.values()
    # Scraped like the edges: a hop's figures sit beside its caller's on the same 1 s grid.
    assert (hops["scrape_interval"], _jobs()["rest"]["scrape_interval"]) == ("1s", "1s")


def test_the_amqp_arms_edge_is_found_by_dns_in_a_job_of_its_own() -> None:
    """Not in `hops` (it is an edge) nor `grpc` (job=~"rest|grpc" are the lab's own edges), and
    without the amqp profile the name does not resolve: no target, not a down one."""
    job = _jobs()["amqp"]
    (dns,) = job["dns_sd_configs"]
    assert (dns["names"], dns["type"], dns["port"]) == (["amqp"], "A", 9100)
    assert job["relabel_configs"] == _named_by_dns("python")
    services = yaml.load((TOPOLOGIES / "order-chain.yaml").read_text(), _ComposeLoader)["services"]
    assert services["amqp"]["profiles"] == ["amqp"]
    assert (job["scrape_interval"], job["scrape_timeout"]) == ("1s", "1s")


def test_the_node_services_are_found_by_dns_so_without_their_profile_no_target_is_down() -> None:
    """compose.yaml's node profile: a static target would be down in every lab without it (the
    e2e test wants every target up); a DNS name that does not resolve is no target at all."""
    compose = yaml.load((REPO / "compose.yaml").read_text(), _ComposeLoader)["services"]
    for service in ("rest-node", "grpc-node"):
        assert compose[service]["profiles"] == ["node"], service
        job = _jobs()[service]
        assert "static_configs" not in job
        (dns,) = job["dns_sd_configs"]
        assert (dns["names"], dns["type"], dns["port"]) == ([service], "A", 9100)
        assert job["relabel_configs"] == _named_by_dns("node")
        assert job["scrape_interval"] == _jobs()["rest"]["scrape_interval"] == "1s"

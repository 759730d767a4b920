"""The cluster topology without a Docker engine: compose.yaml + topologies/cluster.yaml as compose
resolves them (replicas behind `lb`, nothing new published, the edges pointed at lb, lb started
after every replica is healthy; with the node profile the same in Node.js behind `lb-node`) and
topologies/nginx.conf with each balancer's upstreams (topologies/lb/) as the stand-in's nginx
reads them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from wirelab.core import Limits

from tests.config.queries import REPO

CLUSTER = REPO / "topologies" / "cluster.yaml"
NGINX_CONF = REPO / "topologies" / "nginx.conf"
REPLICAS = ("rest-b", "grpc-b")
NODE_REPLICAS = ("rest-node-b", "grpc-node-b")
# Each balancer: its upstreams file, the replica services behind it, the edges that call it.
BALANCERS = {
    "lb": ("python.conf", REPLICAS, ("rest", "grpc")),
    "lb-node": ("node.conf", NODE_REPLICAS, ("rest-node", "grpc-node")),
}
_INCLUDE = re.compile(r"^\s*include\s+/etc/nginx/upstreams\.conf;", re.MULTILINE)
HEALTHY = {"condition": "service_healthy", "required": True}
_UPSTREAM_SERVER = re.compile(r"^\s*server\s+([\w.-]+):(\d+)\s*;", re.MULTILINE)
_LISTEN = re.compile(r"^\s*listen\s+(\d+)\b", re.MULTILINE)


def resolved(*files: str, **env: str) -> dict[str, Any]:
    """`compose config` of ``files`` with only ``env`` set of the knobs: no WIRELAB_* or image
    variable of the caller's shell leaks into what the defaults are checked against."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WIRELAB_", "COMPOSE_"))}
    clean = {k: v for k, v in clean.items() if not k.endswith("_IMAGE")}
    args = [a for f in files for a in ("-f", f)]
    done = subprocess.run(
        [str(REPO / "offline" / "compose"), *args, "config", "--format", "json"],
        cwd=REPO, env={**clean, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


@pytest.fixture(scope="module")
def cluster() -> dict[str, Any]:
    services: dict[str, Any] = resolved("compose.yaml", "topologies/cluster.yaml")["services"]
    return services


@pytest.fixture(scope="module")
def node_cluster() -> dict[str, Any]:
    """The cluster with PROFILES=node: both runtimes' edges, balancers and replicas."""
    files = ("compose.yaml", "topologies/cluster.yaml")
    services: dict[str, Any] = resolved(*files, COMPOSE_PROFILES="node")["services"]
    return services


def nginx_text(balancer: str) -> str:
    """nginx.conf as ``balancer``'s nginx reads it: its upstreams file in place of the include."""
    upstreams = (REPO / "topologies" / "lb" / BALANCERS[balancer][0]).read_text()
    text, included = _INCLUDE.subn(lambda _: upstreams, NGINX_CONF.read_text())
    assert included == 1
    return text


def _seconds(value: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(ms|s|m)?", value).groups()  # type: ignore[union-attr]
    return int(number) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[unit]


def _size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kKmMgG])?", value).groups()  # type: ignore[union-attr]
    scale: int = {"k": 1024, "m": 1024**2, "g": 1024**3}.get((unit or "").lower(), 1)
    return int(number) * scale


def _directive(name: str) -> list[str]:
    return re.findall(rf"^\s*{name}\s+(\S+);", NGINX_CONF.read_text(), re.MULTILINE)


def test_the_replicas_default_to_three_and_follow_wirelab_replicas(
    cluster: dict[str, Any],
) -> None:
    assert {s: cluster[s]["deploy"]["replicas"] for s in REPLICAS} == dict.fromkeys(REPLICAS, 3)
    five = resolved("compose.yaml", "topologies/cluster.yaml", WIRELAB_REPLICAS="5")["services"]
    assert {s: five[s]["deploy"]["replicas"] for s in REPLICAS} == dict.fromkeys(REPLICAS, 5)


def test_the_replicas_are_the_lab_services_with_modest_memory(cluster: dict[str, Any]) -> None:
    """Six replicas at the lab's 2 GiB each would promise more than the machine has."""
    for replica, lab in zip(REPLICAS, ("rest", "grpc"), strict=True):
        assert cluster[replica]["image"] == cluster[lab]["image"]
        assert cluster[replica]["healthcheck"] == cluster[lab]["healthcheck"]
        assert "WIRELAB_DOWNSTREAM" not in cluster[replica]["environment"]
        assert int(cluster[replica]["mem_limit"]) == 512 * 1024**2


def test_the_cluster_publishes_nothing_the_lab_does_not(cluster: dict[str, Any]) -> None:
    def published(services: dict[str, Any]) -> set[tuple[str, str, str, int]]:
        return {
            (name, p.get("host_ip", ""), p.get("published", ""), p["target"])
            for name, service in services.items()
            for p in service.get("ports", [])
        }

    assert published(cluster) == published(resolved("compose.yaml")["services"])
    assert not any(cluster[s].get("ports") for s in (*REPLICAS, "lb"))


def test_lb_starts_after_every_replica_is_healthy_and_the_edges_after_lb(
    cluster: dict[str, Any],
) -> None:
    """nginx resolves rest-b and grpc-b once, at start: a replica not up by then gets no call."""
    assert cluster["lb"]["depends_on"] == dict.fromkeys(REPLICAS, HEALTHY)
    assert cluster["lb"]["healthcheck"]["test"][0] == "CMD"
    for edge in ("rest", "grpc"):
        assert cluster[edge]["depends_on"] == {"lb": HEALTHY}, edge


def test_the_edges_relay_every_order_to_lb_by_default(cluster: dict[str, Any]) -> None:
    rest, grpc = cluster["rest"]["environment"], cluster["grpc"]["environment"]
    assert rest["WIRELAB_DOWNSTREAM"] == "http://lb:8000"
    assert grpc["WIRELAB_DOWNSTREAM"] == "grpc://lb:50051"
    assert grpc["WIRELAB_GRPC_BALANCING"] == "pick_first"
    assert rest["WIRELAB_LOCAL_WORK"] == grpc["WIRELAB_LOCAL_WORK"] == "off"


def test_the_client_side_arm_sends_grpc_straight_to_the_replicas() -> None:
    services = resolved(
        "compose.yaml", "topologies/cluster.yaml",
        WIRELAB_CLUSTER_GRPC_DOWNSTREAM="grpc://grpc-b:50051", WIRELAB_GRPC_BALANCING="round_robin",
    )["services"]  # fmt: skip
    grpc = services["grpc"]["environment"]
    assert grpc["WIRELAB_DOWNSTREAM"] == "grpc://grpc-b:50051"
    assert grpc["WIRELAB_GRPC_BALANCING"] == "round_robin"
    assert services["rest"]["environment"]["WIRELAB_DOWNSTREAM"] == "http://lb:8000"


def test_lb_runs_the_pinned_nginx_or_the_stand_in_with_the_config_read_only(
    cluster: dict[str, Any],
) -> None:
    assert re.fullmatch(r"nginx:\d+\.\d+\.\d+(-\w+)?", cluster["lb"]["image"])
    stand_in = resolved(
        "compose.yaml", "topologies/cluster.yaml", NGINX_IMAGE="wirelab/nginx:bookworm"
    )["services"]["lb"]
    assert stand_in["image"] == "wirelab/nginx:bookworm"
    mounts = [(v["source"], v["target"], v.get("read_only")) for v in cluster["lb"]["volumes"]]
    assert mounts == [
        (str(NGINX_CONF), "/etc/nginx/nginx.conf", True),
        (str(REPO / "topologies" / "lb" / "python.conf"), "/etc/nginx/upstreams.conf", True),
    ]


def test_lb_node_is_lb_with_the_node_replicas_as_upstreams(node_cluster: dict[str, Any]) -> None:
    lb, lb_node = node_cluster["lb"], node_cluster["lb-node"]
    for same in ("image", "healthcheck", "restart"):
        assert lb_node[same] == lb[same], same
    assert lb_node["profiles"] == ["node"]
    mounts = [(v["source"], v["target"]) for v in lb_node["volumes"]]
    assert mounts == [
        (str(NGINX_CONF), "/etc/nginx/nginx.conf"),
        (str(REPO / "topologies" / "lb" / "node.conf"), "/etc/nginx/upstreams.conf"),
    ]
    assert lb_node["depends_on"] == dict.fromkeys(NODE_REPLICAS, HEALTHY)
    for edge in ("rest-node", "grpc-node"):
        assert node_cluster[edge]["depends_on"] == {"lb-node": HEALTHY}, edge
        assert node_cluster[edge]["environment"]["WIRELAB_LOCAL_WORK"] == "off"
    for replica, python in zip(NODE_REPLICAS, REPLICAS, strict=True):
        assert node_cluster[replica]["deploy"]["replicas"] == 3
        assert node_cluster[replica]["mem_limit"] == node_cluster[python]["mem_limit"]
        assert not node_cluster[replica].get("ports")
        budget = node_cluster[python]["environment"]["WIRELAB_PAYLOAD_BUDGET_BYTES"]
        assert node_cluster[replica]["environment"]["WIRELAB_PAYLOAD_BUDGET_BYTES"] == budget
        assert node_cluster[replica]["image"] == node_cluster[replica.replace("-b", "")]["image"]


def test_the_node_cluster_publishes_nothing_the_node_lab_does_not(
    node_cluster: dict[str, Any],
) -> None:
    lab = resolved("compose.yaml", COMPOSE_PROFILES="node")["services"]
    for name, service in node_cluster.items():
        assert service.get("ports", []) == lab.get(name, {}).get("ports", []), name


@pytest.mark.parametrize("balancer", sorted(BALANCERS))
def test_nginx_sends_to_the_replicas_on_the_ports_the_edges_call(
    node_cluster: dict[str, Any], balancer: str
) -> None:
    """The upstreams are the replica services on their container ports; each balancer listens
    where its edges' downstream URLs and its own healthcheck point."""
    text = nginx_text(balancer)
    _, replicas, edges = BALANCERS[balancer]
    upstreams = {(host, int(port)) for host, port in _UPSTREAM_SERVER.findall(text)}
    ports = dict(zip(replicas, (8000, 50051), strict=True))  # the services' container ports
    assert upstreams == set(ports.items())
    assert all(host in node_cluster for host, _ in upstreams)
    listens = {int(p) for p in _LISTEN.findall(text)}
    for edge in edges:
        url = urlsplit(node_cluster[edge]["environment"]["WIRELAB_DOWNSTREAM"])
        assert url.hostname == balancer and url.port in listens, (edge, url)
    check = " ".join(node_cluster[balancer]["healthcheck"]["test"])
    health = re.search(r"/dev/tcp/127\.0\.0\.1/(\d+)", check)
    assert health and int(health.group(1)) in listens - {8000, 50051}, check


def test_nginx_passes_the_largest_body_and_the_slowest_order() -> None:
    limits = Limits()
    # rest/routes.py: a JSON blob upload is base64 (4/3) of the blob plus 1 KiB of JSON.
    json_body = (limits.max_payload_bytes + 2) // 3 * 4 + 1024
    (body,) = _directive("client_max_body_size")
    assert _size(body) >= json_body
    assert _directive("proxy_request_buffering") == ["off"]
    for timeout in ("proxy_read_timeout", "proxy_send_timeout", "grpc_read_timeout",
                    "grpc_send_timeout"):  # fmt: skip
        (value,) = _directive(timeout)
        assert _seconds(value) > limits.max_work_ms / 1000, timeout


@pytest.fixture(scope="module")
def nginx() -> Path:
    """Debian bookworm's nginx, the binary the offline stand-in runs, unpacked and not installed:
    installing the package starts a server on :80."""
    done = subprocess.run(
        [str(REPO / "offline" / "deb-tool"), "nginx", "usr/sbin/nginx"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"nginx -t needs Debian's nginx package (apt-get download): {done.stderr}")
    return Path(done.stdout.strip())


def nginx_test(nginx: Path, text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    conf = tmp_path / "nginx.conf"
    # Temp paths and pid land in tmp_path: the check writes nothing outside it.
    conf.write_text(text.replace("/tmp/", f"{tmp_path}/"))
    return subprocess.run(
        [str(nginx), "-t", "-c", str(conf)], capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize("balancer", sorted(BALANCERS))
def test_nginx_accepts_the_config_with_the_replicas_resolvable(
    nginx: Path, tmp_path: Path, balancer: str
) -> None:
    """nginx resolves upstream names while parsing, so outside compose's network the check runs on
    a copy whose upstream servers are loopback addresses; all else is the files as mounted."""
    text, swapped = _UPSTREAM_SERVER.subn(
        lambda m: m.group(0).replace(m.group(1), "127.0.0.1"), nginx_text(balancer)
    )
    assert swapped == 2
    done = nginx_test(nginx, text, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


@pytest.mark.parametrize("balancer", sorted(BALANCERS))
def test_nginx_refuses_to_start_before_the_replicas_resolve(
    nginx: Path, tmp_path: Path, balancer: str
) -> None:
    """Why each balancer waits for healthy replicas: unresolvable, the names stop nginx at start."""
    done = nginx_test(nginx, nginx_text(balancer), tmp_path)
    assert done.returncode == 1
    first = BALANCERS[balancer][1][0]
    assert f'host not found in upstream "{first}:8000"' in done.stderr


def _directive_names(text: str) -> set[str]:
    """The first word of every statement and block of an nginx config (comments dropped)."""
    text = re.sub(r"#[^\n]*", "", text)
    text = re.sub(r'"[^"]*"', '""', text)
    return {m for m in re.findall(r"(?:^|[;{}])\s*([a-z_0-9]+)\b", text) if m}


@pytest.mark.parametrize("balancer", sorted(BALANCERS))
def test_every_directive_is_one_the_pinned_nginx_release_has(balancer: str) -> None:
    """nginx 1.30 cannot be built here (CI boots Debian's 1.22), so every directive the lab's
    config uses is checked against the names that release registers; `listen … http2` stays,
    deprecated since 1.25.1 in favour of `http2 on;`, which 1.22 does not know (1.30 warns)."""
    lines = (Path(__file__).with_name("nginx-1.30.4-directives.txt")).read_text().splitlines()
    known = {line for line in lines if line and not line.startswith("#")}
    used = _directive_names(nginx_text(balancer))
    assert {"listen", "grpc_pass", "keepalive_timeout", "upstream"} <= used
    assert used <= known, used - known
    assert not used & {"http2", "http3", "quic"}, "a directive Debian's 1.22 stand-in lacks"

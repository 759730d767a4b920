"""The lab as a Docker Swarm stack, derived from `docker compose config --format json` (never kept
by hand): `python3 -m swarm.stack --name wirelab --out DIR < config.json` writes DIR/stack.yml
and DIR/prometheus.yml (swarm.prometheus) for `docker stack deploy` (docs/swarm.md)."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from swarm.prometheus import swarm_config

REPO = Path(__file__).resolve().parent.parent
# Roles by node label (docs/swarm.md): the load generators and the observers are closed lists;
# every other service is under test or serves one (edges, hops, replicas, nginx, the broker,
# Toxiproxy), so a new topology's hop lands beside the services it calls without an edit here.
LOAD = frozenset({"locust", "locust-worker", "bench"})
MONITOR = frozenset({"prometheus", "grafana", "jupyter", "jaeger"})
# One per node: each node's containers and host are measured where they run.
GLOBAL = frozenset({"cadvisor", "node-exporter"})
# One label per role ("true"), not one wirelab.role label: a node holds a label key once, and one
# node may hold every role (the single-node swarm of `make swarm` and of the test).
ROLE_LABEL = "node.labels.wirelab.role"
# Keys of a compose service that a stack either has no use for or would refuse: builds happen
# before the deploy (the images are local or in a registry the nodes share), Swarm starts every
# service at once (depends_on; swarm.up restarts the replicas' dependents instead), and limits,
# cpusets and the restart policy become deploy: below. Swarm cannot run a service privileged or
# pass it a device: cAdvisor then runs as with WIRELAB_CADVISOR_PRIVILEGED=false (docs/lab.md).
DROPPED = frozenset(
    {"build", "container_name", "depends_on", "restart", "cpus", "mem_limit", "cpuset",
     "profiles", "privileged", "devices", "extends"}
)  # fmt: skip


def _tracked() -> frozenset[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    return frozenset(REPO / name for name in listed.split("\0") if name)


TRACKED = _tracked()
PROJECT_LABEL = "com.docker.compose.project"
# Host paths Prometheus's dockerswarm_sd_configs reads the swarm's tasks from.
DOCKER_SOCKET = "/var/run/docker.sock"


def role(service: str) -> str | None:
    """The wirelab.role a service is placed by; None for the global exporters."""
    if service in GLOBAL:
        return None
    if service in LOAD:
        return "load"
    return "monitor" if service in MONITOR else "sut"


def cores(cpuset: str) -> int:
    """How many cores a compose cpuset ("0", "0-1", "0,2") names."""
    count = 0
    for part in filter(None, cpuset.split(",")):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def _config_key(target: str, text: bytes) -> str:
    # Swarm configs are immutable: the content's hash in the name lets a redeploy with an edited
    # file create a new config instead of being refused. Swarm allows 64 characters with the
    # stack's prefix: the target's last 20 name it.
    stem = "".join(c if c.isalnum() else "-" for c in target.strip("/"))[-20:].strip("-")
    return f"{stem}-{hashlib.sha256(text).hexdigest()[:10]}"


class Stack:
    """The stack being written: services, and the swarm configs their read-only files became."""

    def __init__(self, name: str, endpoint_mode: str) -> None:
        self.name = name
        self.endpoint_mode = endpoint_mode
        self.configs: dict[str, dict[str, str]] = {}

    def config(self, target: str, source: Path) -> dict[str, str]:
        """A file's content as a swarm config mounted at ``target``: the manager hands it to
        whichever node runs the task, where a bind mount would need the checkout on every node."""
        key = _config_key(target, source.read_bytes())
        self.configs[key] = {"file": str(source)}
        return {"source": key, "target": target}

    def volumes(self, service: dict[str, Any]) -> tuple[list[Any], list[dict[str, str]]]:
        """Read-only mounts of the checkout's own files (every file tracked by git: configs,
        not data such as results/) become configs; the rest stays a mount."""
        kept: list[Any] = []
        configs: list[dict[str, str]] = []
        for volume in service.get("volumes", []):
            source = Path(volume.get("source", ""))
            ours = volume.get("type") == "bind" and volume.get("read_only")
            ours = ours and source.is_relative_to(REPO)
            files = sorted(p for p in source.rglob("*") if p.is_file()) if ours else []
            if ours and all(f in TRACKED for f in files or [source]):
                for path in files or [source]:
                    inside = path.relative_to(source) if path != source else None
                    target = volume["target"] + (f"/{inside}" if inside else "")
                    configs.append(self.config(target, path))
                continue
            # Of compose's bind options only propagation (node-exporter's rslave) is a stack's.
            propagation = (volume.get("bind") or {}).get("propagation")
            volume = {k: v for k, v in volume.items() if k != "bind"}
            if propagation:
                volume["bind"] = {"propagation": propagation}
            kept.append(volume)
        return kept, configs


def _ports(ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Host mode: the port opens on the node running the task, straight into its container as
    # compose's does, instead of through the ingress mesh's extra IPVS hop (which would sit on
    # the measured path). Swarm has no host IP: it listens on every interface (docs/swarm.md).
    # An empty published port (the e2e test's) lets the engine pick one, as compose does.
    out = []
    for port in ports:
        entry: dict[str, Any] = {"target": port["target"], "protocol": port.get("protocol", "tcp")}
        if port.get("published"):
            entry["published"] = int(port["published"])
        entry["mode"] = "host"
        out.append(entry)
    return out


def _deploy(name: str, service: dict[str, Any], endpoint_mode: str) -> dict[str, Any]:
    deploy: dict[str, Any] = {
        k: v for k, v in (service.get("deploy") or {}).items() if v not in ({}, None)
    }
    if name in GLOBAL:
        deploy.pop("replicas", None)
        deploy["mode"] = "global"
    else:
        placement = [f"{ROLE_LABEL}.{role(name)}==true"]
        # The swarm's task list is only served by managers.
        if name == "prometheus":
            placement.append("node.role==manager")
        deploy["placement"] = {"constraints": placement}
    # DNS round robin: a name resolves to its tasks' own addresses, as compose's DNS does (every
    # replica's, for the cluster's B). Swarm's default, a virtual IP, would give one address and
    # balance per connection in the kernel's IPVS, which not every kernel has: on this project's
    # machine a VIP answered "no route to host" (docs/swarm.md, WIRELAB_SWARM_ENDPOINT_MODE).
    deploy["endpoint_mode"] = endpoint_mode
    limits: dict[str, str] = {}
    if service.get("cpus"):
        limits["cpus"] = str(service["cpus"])
    if service.get("mem_limit"):
        limits["memory"] = str(service["mem_limit"])
    resources: dict[str, Any] = {"limits": limits} if limits else {}
    # Swarm cannot pin a task to cores; a cpuset's size becomes a reservation, so the scheduler
    # places the task only where that many cores are not promised to another.
    if cores(service.get("cpuset") or ""):
        resources["reservations"] = {"cpus": str(cores(service["cpuset"]))}
    if resources:
        deploy["resources"] = resources
    deploy["restart_policy"] = {"condition": "any"}
    return deploy


def stack(config: dict[str, Any], name: str, endpoint_mode: str = "dnsrr") -> dict[str, Any]:
    """The stack file of ``config`` (compose's resolved JSON), deployed as stack ``name``."""
    out = Stack(name, endpoint_mode)
    services: dict[str, Any] = {}
    for service_name, service in sorted(config["services"].items()):
        spec = {k: v for k, v in service.items() if k not in DROPPED and v is not None}
        spec["deploy"] = _deploy(service_name, service, endpoint_mode)
        if "ports" in service:
            spec["ports"] = _ports(service["ports"])
        volumes, configs = out.volumes(service)
        spec.pop("volumes", None)
        if volumes:
            spec["volumes"] = volumes
        if configs:
            spec["configs"] = configs
        # The label cAdvisor keeps and every dashboard, rule and runner export groups
        # containers by: the same service name as under compose. The project label, which the
        # images carry from `compose build`, is blanked: compose's own commands (make lab's
        # clean-up, make lab-down) must not take a stack's containers for their project's, and
        # the runner then finds the stack, and the node of each service (docs/swarm.md).
        spec["labels"] = {"com.docker.compose.service": service_name, PROJECT_LABEL: ""}
        services[service_name] = spec
    if "prometheus" in services:
        _swarm_prometheus(services["prometheus"], out)
    named: dict[str, Any] = {}
    for key, volume in (config.get("volumes") or {}).items():
        spec = {k: v for k, v in (volume or {}).items() if k != "name"}
        # compose named it <project>_<key>; a name of its own (RabbitMQ's per release) keeps
        # its suffix under the stack's prefix.
        default = f"{config.get('name')}_{key}"
        if volume and volume.get("name") not in (None, default):
            spec["name"] = f"{name}_{volume['name'].removeprefix(str(config.get('name')) + '_')}"
        named[key] = spec
    document: dict[str, Any] = {
        "version": "3.8",
        "services": services,
        # Attachable: a container started by hand (or a test) can join it to reach the services
        # by name, as on compose's network.
        "networks": {"default": {"driver": "overlay", "attachable": True}},
    }
    if named:
        document["volumes"] = named
    if out.configs:
        document["configs"] = out.configs
    return document


def _swarm_prometheus(prometheus: dict[str, Any], out: Stack) -> None:
    """Prometheus discovers the stack's tasks from the engine: the socket, read-only, as root
    (the socket is root's and the docker group's; the image runs as nobody)."""
    prometheus["user"] = "root"
    prometheus.setdefault("volumes", []).append(
        {"type": "bind", "source": DOCKER_SOCKET, "target": DOCKER_SOCKET, "read_only": True}
    )


def dependents_of_replicas(config: dict[str, Any]) -> list[str]:
    """Services that compose starts only once a replicated service is healthy (nginx resolves
    its upstreams once, at start): Swarm starts everything at once, so swarm/up restarts these
    after every task is healthy."""
    services = config["services"]
    replicated = {
        n for n, s in services.items() if int((s.get("deploy") or {}).get("replicas") or 1) > 1
    }
    return sorted(n for n, s in services.items() if set(s.get("depends_on") or {}) & replicated)


def write(config: dict[str, Any], name: str, folder: Path, endpoint_mode: str) -> Path:
    """DIR/prometheus.yml and DIR/stack.yml (JSON, which YAML readers take as it is)."""
    folder.mkdir(parents=True, exist_ok=True)
    rules = REPO / "prometheus"
    prometheus = folder / "prometheus.yml"
    prometheus.write_text(json.dumps(swarm_config(name, rules / "prometheus.yml"), indent=2))
    document = stack(config, name, endpoint_mode)
    service = document["services"].get("prometheus")
    if service is not None:
        # The generated configuration in place of prometheus/prometheus.yml's config.
        for mount in service.get("configs", []):
            if mount["target"] == "/etc/prometheus/prometheus.yml":
                key = _config_key(mount["target"], prometheus.read_bytes())
                document["configs"].pop(mount["source"])
                document["configs"][key] = {"file": str(prometheus)}
                mount["source"] = key
    path = folder / "stack.yml"
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--name", required=True, help="the stack's name (docker stack deploy)")
    parser.add_argument("--out", type=Path, help="folder for stack.yml and prometheus.yml")
    parser.add_argument("--endpoint-mode", default="dnsrr", choices=["dnsrr", "vip"])
    parser.add_argument(
        "--dependents", action="store_true", help="print the services to restart after health"
    )
    args = parser.parse_args()
    config = json.load(sys.stdin)
    if args.dependents:
        print("\n".join(dependents_of_replicas(config)))
        return
    if args.out is None:
        parser.error("--out is required")
    print(write(config, args.name, args.out, args.endpoint_mode))


if __name__ == "__main__":
    main()

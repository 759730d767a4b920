"""`make swarm` end to end (docs/swarm.md): a single-node swarm on the test's engine, the node
labelled with every role, the cluster topology deployed as a stack from the locally built images
(swarm/up), every service placed by its role and healthy, every Prometheus target up through
Swarm discovery, the balancer spreading orders over every replica, a short benchmark and the
report through the stack's published ports; the stack and the swarm gone at the end, also on
failure. 2 min 16 s on the project's 2-core machine with the images built (28 Nov)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from swarm.health import problems
from swarm.stack import GLOBAL, ROLE_LABEL, role
from tests.config.queries import REPO
from tests.e2e.bench_run import bench, bench_env, report
from tests.e2e.engine import engine_for, in_ci
from tests.e2e.lab import HOST_PORT_VARIABLES, Lab, wait_for
from tests.e2e.prom import Prometheus

pytestmark = pytest.mark.swarm

REPLICAS = 2  # of each B: enough to see a spread, light on two cores
# Everything but Jupyter (Prometheus stands for the monitor role) and the bench one-off.
SERVICES = {"rest", "grpc", "rest-b", "grpc-b", "lb", "prometheus", "cadvisor", "node-exporter",
            "locust", "locust-worker"}  # fmt: skip
UP_TIMEOUT = 420


def _docker(*args: str, timeout: float = 60, check: bool = True) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass
class Stack:
    name: str
    lab: Lab  # its env (images, knobs) and results folder, for the runner's commands

    def published(self, service: str, port: int) -> str:
        """host:port where this node publishes ``service``'s container ``port``."""
        container = _docker(
            "ps", "-q", "--filter", f"label=com.docker.swarm.service.name={self.name}_{service}"
        ).split()[0]
        address = _docker("port", container, str(port)).splitlines()[0]
        return f"127.0.0.1:{address.rsplit(':', 1)[1]}"

    def url(self, service: str, port: int) -> str:
        return f"http://{self.published(service, port)}"


def _swarm_state() -> str:
    return _docker("info", "--format", "{{.Swarm.LocalNodeState}}").strip()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with engine_for("the swarm test"):
        if _swarm_state() != "inactive":
            # Someone's swarm: deploying into it, or leaving it afterwards, is not ours to do.
            why = "this engine is already in a swarm"
            if in_ci():
                pytest.fail(f"the swarm test must run in CI, but {why}")
            pytest.skip(f"the swarm test skipped: {why}")
        results = tmp_path_factory.mktemp("results")
        lab = Lab.create(results, topology="cluster")
        name = f"wirelab-swarm-{uuid.uuid4().hex[:6]}"
        env = lab.env | {
            "WIRELAB_STACK": name,
            "WIRELAB_TOPOLOGY": "cluster",
            "WIRELAB_REPLICAS": str(REPLICAS),
            "WIRELAB_SWARM_DIR": str(tmp_path_factory.mktemp("swarm")),
            "WIRELAB_EXCLUDE": " ".join(
                sorted(set(lab.services) - SERVICES | {"jupyter", "grafana"})
            ),
            "WIRELAB_WAIT_TIMEOUT": str(UP_TIMEOUT - 60),
            # Empty host ports: the engine picks free ones, as for the compose e2e lab.
            **dict.fromkeys(HOST_PORT_VARIABLES, ""),
        }
        env.pop("COMPOSE_FILE", None)  # swarm/up sets it from WIRELAB_TOPOLOGY
        try:
            up = subprocess.run(
                [str(REPO / "swarm" / "up")], cwd=REPO, env=env, capture_output=True, text=True,
                timeout=UP_TIMEOUT,
            )  # fmt: skip
            assert up.returncode == 0, f"swarm/up exited {up.returncode}:\n{up.stderr[-4000:]}"
            lab.project = name
            lab.env = env
            yield Stack(name, lab)
        except BaseException:
            print(_docker("stack", "ps", name, "--no-trunc", check=False), flush=True)
            raise
        finally:
            subprocess.run([str(REPO / "swarm" / "down")], env=env, timeout=180, check=False)
            if _swarm_state() != "inactive":
                _docker("swarm", "leave", "--force", check=False)
            assert _swarm_state() == "inactive", "the test's swarm is still there"
            label = f"label=com.docker.stack.namespace={name}"
            left = _docker("ps", "-aq", "--filter", label)
            assert not left.split(), f"containers of stack {name} left: {left.split()}"
            # make swarm-down keeps a stack's volumes, as make lab-down does; the test's go.
            for volume in _docker("volume", "ls", "-q", "--filter", label).split():
                _docker("volume", "rm", volume)


def _inspect(stack: Stack, service: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(_docker("service", "inspect", f"{stack.name}_{service}"))[0]
    return found


def test_every_service_is_placed_by_its_role_and_healthy(stack: Stack) -> None:
    listed = set(_docker("stack", "services", stack.name, "--format", "{{.Name}}").split())
    assert listed == {f"{stack.name}_{s}" for s in SERVICES}
    for service in SERVICES:
        spec = _inspect(stack, service)["Spec"]
        constraints = spec["TaskTemplate"].get("Placement", {}).get("Constraints", [])
        if service in GLOBAL:
            assert "Global" in spec["Mode"] and not constraints, (service, spec["Mode"])
        else:
            assert f"{ROLE_LABEL}.{role(service)}==true" in constraints, (service, constraints)
    replicas = _inspect(stack, "rest-b")["Spec"]
    assert replicas["Mode"]["Replicated"]["Replicas"] == REPLICAS
    assert replicas["EndpointSpec"]["Mode"] == "dnsrr"
    assert problems(stack.name) == []


def test_every_prometheus_target_is_up_through_swarm_discovery(stack: Stack) -> None:
    prometheus = Prometheus(stack.url("prometheus", 9090))
    node = _docker("info", "--format", "{{.Name}}").strip()
    wanted = {"rest": 1, "grpc": 1, "locust": 1, "hops": 2 * REPLICAS, "cadvisor": 1,
              "node-exporter": 1, "prometheus": 1}  # fmt: skip
    seen: dict[str, int] = {}

    def all_up() -> bool:
        targets = prometheus.targets()
        seen.clear()
        for target in targets:
            if target["health"] == "up":
                job = target["labels"]["job"]
                seen[job] = seen.get(job, 0) + 1
        return seen == wanted and len(targets) == sum(wanted.values())

    wait_for(f"targets {wanted} up (seen {seen})", all_up, timeout=60, every=2)
    for target in prometheus.targets():
        labels = target["labels"]
        if labels["job"] != "prometheus":
            assert labels["node"] == node, labels
        if labels["job"] == "hops":
            assert labels["service"] in ("rest-b", "grpc-b") and labels["runtime"] == "python"


def test_bench_and_report_through_the_stack(stack: Stack, tmp_path: Path) -> None:
    """A cluster scenario seconds long from the host against the published ports, then the
    report; the balancer (nginx, resolving every replica's address) spread the orders."""
    scenario = tmp_path / "cluster-smoke.toml"
    scenario.write_text(
        'topology = "cluster"\nkinds = ["unary"]\nwork_ms = 10\n'
        'loads = [{ users = 2, label = "smoke" }]\nwarmup_s = 0.5\nduration_s = 2\ncooldown_s = 0\n'
    )
    env = bench_env(
        stack.lab,
        tmp_path,
        rest_url=stack.url("rest", 8000),
        grpc_target=stack.published("grpc", 50051),
        prometheus_url=stack.url("prometheus", 9090),
        rest_metrics_url=stack.url("rest", 9100) + "/metrics",
        grpc_metrics_url=stack.url("grpc", 9100) + "/metrics",
    )
    run_dir, manifest, tidy = bench(stack.lab, env, scenario)
    assert manifest["topology"]["name"] == "cluster", manifest["topology"]
    # Where it was measured: each service's node, and that node's cores and roles.
    node = _docker("info", "--format", "{{.Name}}").strip()
    docker = manifest["docker"]
    assert docker["stack"] == stack.name, docker
    assert {s: i["nodes"] for s, i in docker["images"].items()} == {s: [node] for s in SERVICES}
    assert docker["nodes"][node]["roles"] == ["load", "monitor", "sut"], docker["nodes"]
    assert docker["nodes"][node]["cores"] >= 1, docker["nodes"]
    assert (tidy["errors"] == 0).all(), tidy.to_string()
    report(env, run_dir)
    prometheus = Prometheus(stack.url("prometheus", 9090))
    for service in ("rest-b", "grpc-b"):
        expr = f'sum by (instance) (wirelab_server_requests_total{{service="{service}"}})'

        def spread(s: str = service, e: str = expr) -> dict[str, float] | None:
            found = prometheus.values(e, "instance")
            return found if len(found) == REPLICAS and all(found.values()) else None

        wait_for(f"every {service} replica to serve orders", spread, timeout=30)

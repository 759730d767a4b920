"""The Swarm stack without an engine (docs/swarm.md): swarm.stack's file for each topology with
every profile, as `docker stack config` reads it, places every service by its role, runs the
exporters on every node, keeps no compose-only key, carries limits and cpusets over, and ships
the checkout's config files as swarm configs; swarm.prometheus's config passes the pinned
promtool with every job and label of prometheus/prometheus.yml."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from swarm.prometheus import SOCKET, swarm_config
from swarm.stack import DROPPED, GLOBAL, LOAD, MONITOR, dependents_of_replicas, role, stack
from tests.config.queries import REPO
from tests.config.test_promtool import promtool as promtool  # the fixture
from tests.config.test_promtool import run
from tests.config.test_topologies import resolved

TOPOLOGIES = ["one-hop", "a-to-b", "cluster", "order-chain"]
PROFILES = "node,amqp,netem,traces"


def files(topology: str) -> list[str]:
    return ["compose.yaml"] + ([] if topology == "one-hop" else [f"topologies/{topology}.yaml"])


@pytest.fixture(scope="module", params=TOPOLOGIES)
def generated(request: pytest.FixtureRequest) -> tuple[dict[str, Any], dict[str, Any]]:
    """(compose's resolved config, the stack made of it) for a topology with every profile."""
    config = resolved(*files(str(request.param)), COMPOSE_PROFILES=PROFILES)
    return config, stack(config, "wl")


def test_the_stack_file_is_one_docker_stack_deploy_reads(
    generated: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path
) -> None:
    if shutil.which("docker") is None:
        pytest.fail("the docker CLI is needed (`docker stack config`; no engine is)")
    path = tmp_path / "stack.yml"
    path.write_text(json.dumps(generated[1]))
    done = subprocess.run(
        ["docker", "stack", "config", "-c", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert set(yaml.safe_load(done.stdout)["services"]) == set(generated[0]["services"])


def test_every_service_is_placed_by_its_role_and_the_exporters_on_every_node(
    generated: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    services = generated[1]["services"]
    for name, service in services.items():
        deploy = service["deploy"]
        if name in GLOBAL:
            assert deploy["mode"] == "global" and "placement" not in deploy, (name, deploy)
            continue
        constraints = deploy["placement"]["constraints"]
        assert f"node.labels.wirelab.role.{role(name)}==true" in constraints, (name, deploy)
    assert {role(n) for n in services} >= {"sut", "load", "monitor", None}
    for name in ("rest", "grpc", "rest-node", "rabbitmq", "toxiproxy"):
        assert role(name) == "sut"
    assert {role(n) for n in LOAD} == {"load"} and {role(n) for n in MONITOR} == {"monitor"}
    # The swarm's task list, which Prometheus discovers targets from, is served by managers.
    assert "node.role==manager" in services["prometheus"]["deploy"]["placement"]["constraints"]


def test_no_compose_only_key_and_ports_open_on_the_tasks_node(
    generated: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    for name, service in generated[1]["services"].items():
        assert not set(service) & DROPPED, (name, set(service) & DROPPED)
        for port in service.get("ports", []):
            assert port["mode"] == "host" and "host_ip" not in port, (name, port)
        labels = {"com.docker.compose.service": name, "com.docker.compose.project": ""}
        assert service["labels"] == labels


def test_limits_and_replicas_carry_over(generated: tuple[dict[str, Any], dict[str, Any]]) -> None:
    config, made = generated
    for name, service in config["services"].items():
        deploy = made["services"][name]["deploy"]
        limits = deploy.get("resources", {}).get("limits", {})
        if service.get("cpus"):
            assert float(limits["cpus"]) == float(service["cpus"]), name
        if service.get("mem_limit"):
            assert limits["memory"] == str(service["mem_limit"]), name
        replicas = (service.get("deploy") or {}).get("replicas")
        if replicas and name not in GLOBAL:
            assert deploy["replicas"] == replicas, name
        # Every task's own address in DNS (every replica's), as under compose.
        assert deploy["endpoint_mode"] == "dnsrr", name


def test_the_checkouts_read_only_files_travel_as_configs(
    generated: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    made = generated[1]
    for name, service in made["services"].items():
        for volume in service.get("volumes", []):
            source = Path(volume["source"])
            if volume.get("read_only") and source.is_relative_to(REPO):
                assert source == REPO / "results", (name, volume)
        for mount in service.get("configs", []):
            assert Path(made["configs"][mount["source"]]["file"]).is_file(), (name, mount)
    targets = {m["target"] for m in made["services"]["prometheus"]["configs"]}
    assert {"/etc/prometheus/prometheus.yml", "/etc/prometheus/rules/wirelab.rules.yml"} <= targets


def test_a_cpuset_becomes_a_reservation_of_as_many_cores() -> None:
    config = resolved("compose.yaml", WIRELAB_REST_CPUSET="0-1", WIRELAB_GRPC_CPUSET="1")
    services = stack(config, "wl")["services"]
    assert services["rest"]["deploy"]["resources"]["reservations"] == {"cpus": "2"}
    assert services["grpc"]["deploy"]["resources"]["reservations"] == {"cpus": "1"}
    assert "reservations" not in services["locust"]["deploy"]["resources"]


def test_vip_on_request_and_the_balancers_restart_after_their_replicas() -> None:
    config = resolved(*files("cluster"), COMPOSE_PROFILES="node")
    services = stack(config, "wl", endpoint_mode="vip")["services"]
    assert services["rest-b"]["deploy"]["endpoint_mode"] == "vip"
    assert dependents_of_replicas(config) == ["lb", "lb-node"]
    assert dependents_of_replicas(resolved("compose.yaml")) == []


@pytest.fixture(scope="module")
def swarm_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """swarm.prometheus's config for stack "wl" with the rules beside it, as the stack mounts."""
    folder = tmp_path_factory.mktemp("prometheus")
    shutil.copytree(REPO / "prometheus" / "rules", folder / "rules")
    path = folder / "prometheus.yml"
    path.write_text(yaml.safe_dump(swarm_config("wl", REPO / "prometheus" / "prometheus.yml")))
    return path


def test_the_swarm_prometheus_config_passes_promtool(
    promtool: Path,
    swarm_prometheus: Path,
) -> None:
    done = run(promtool, "check", "config", str(swarm_prometheus))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 2 rule files found" in done.stdout, done.stdout


def test_every_job_keeps_its_name_and_labels_and_finds_the_stacks_tasks(
    swarm_prometheus: Path,
) -> None:
    original = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    swarm = {
        j["job_name"]: j for j in yaml.safe_load(swarm_prometheus.read_text())["scrape_configs"]
    }
    assert list(swarm) == [j["job_name"] for j in original["scrape_configs"]]
    for job in original["scrape_configs"]:
        made = swarm[job["job_name"]]
        if job["job_name"] == "prometheus":
            assert made == job
            continue
        assert "static_configs" not in made and "dns_sd_configs" not in made, made
        assert [sd["host"] for sd in made["dockerswarm_sd_configs"]] == [SOCKET]
        rules = made["relabel_configs"]
        # Only this stack's running tasks on its network, and only the job's services.
        kept = {tuple(r["source_labels"]): r["regex"] for r in rules if r.get("action") == "keep"}
        assert kept[("__meta_dockerswarm_service_label_com_docker_stack_namespace",)] == "wl"
        names = [t.split(":")[0] for g in job.get("static_configs", []) for t in g["targets"]]
        names += [n for d in job.get("dns_sd_configs", []) for n in d["names"]]
        service_keep = kept[("__meta_dockerswarm_container_label_com_docker_compose_service",)]
        assert service_keep.split("|") == names
        # Static labels (service, runtime, generator) and the job's own relabelling survive.
        for group in job.get("static_configs", []):
            for label, value in (group.get("labels") or {}).items():
                assert any(
                    r.get("target_label") == label and r.get("replacement") == value for r in rules
                ), (job["job_name"], label)
        for rule in job.get("relabel_configs", []):
            assert rule in rules, (job["job_name"], rule)

"""compose.yaml validates with `docker compose config` and mounts the observability config."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any
from urllib.parse import urlsplit

import pytest
from wirelab_bench.knobs import KNOBS

from tests.config.queries import REPO

COMPOSE = REPO / "compose.yaml"
# Every service others rely on, by name (bench sits behind the "bench" profile).
SERVICES = {
    "rest", "grpc", "prometheus", "cadvisor", "node-exporter", "grafana",
    "locust", "locust-worker", "jupyter", "bench",
}  # fmt: skip

pytestmark = pytest.mark.skipif(not COMPOSE.exists(), reason="compose.yaml is missing")


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    if shutil.which("docker") is None:
        pytest.fail("the docker CLI with the compose v2 plugin is needed (no engine is)")
    done = subprocess.run(
        ["docker", "compose", "--profile", "bench", "config", "--format", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def binds(config: dict[str, Any], service: str) -> dict[str, str]:
    """Container path -> repository-relative source of each bind mount."""
    return {
        v["target"]: str(v["source"]).removeprefix(str(REPO) + "/")
        for v in config["services"][service].get("volumes", [])
        if v["type"] == "bind"
    }


def test_compose_file_is_valid_and_names_the_services_relied_on(config: dict[str, Any]) -> None:
    assert config["name"] == "wirelab"
    assert set(config["services"]) >= SERVICES


def test_grafana_mounts_what_provisioning_expects(config: dict[str, Any]) -> None:
    mounts = binds(config, "grafana")
    assert mounts.get("/etc/grafana/grafana.ini") == "grafana/grafana.ini"
    assert mounts.get("/etc/grafana/provisioning") == "grafana/provisioning"
    assert mounts.get("/var/lib/grafana/dashboards") == "grafana/dashboards"


def test_prometheus_sees_its_config_with_the_rules_beside_it(config: dict[str, Any]) -> None:
    service = config["services"]["prometheus"]
    flags = [a for a in service.get("command") or [] if a.startswith("--config.file=")]
    config_file = flags[0].split("=", 1)[1] if flags else "/etc/prometheus/prometheus.yml"
    directory = config_file.rsplit("/", 1)[0]
    mounts = binds(config, "prometheus")
    whole = mounts.get(directory) == "prometheus"
    split = (
        mounts.get(config_file) == "prometheus/prometheus.yml"
        and mounts.get(f"{directory}/rules") == "prometheus/rules"
    )
    assert whole or split, f"prometheus.yml and rules/ must appear under {directory}: {mounts}"


def _published(config: dict[str, Any], service: str, container_port: int) -> tuple[str, str]:
    """(host address, host port) the lab publishes ``container_port`` of ``service`` on."""
    for port in config["services"][service].get("ports", []):
        if port["target"] == container_port:
            return port.get("host_ip", ""), port.get("published", "")
    raise AssertionError(f"{service} does not publish :{container_port}")


def test_wirelab_bench_host_defaults_reach_the_services_metrics(config: dict[str, Any]) -> None:
    """Guards against: from the host every bench run said "not measured" for both servers."""
    defaults = {name: default for name, _, default, _ in KNOBS}
    for service, knob in (("rest", "rest_metrics_url"), ("grpc", "grpc_metrics_url")):
        url = urlsplit(str(defaults[knob]))
        assert _published(config, service, 9100) == (url.hostname, str(url.port)), knob


def services_with(env: dict[str, str], unset: tuple[str, ...] = ()) -> dict[str, Any]:
    """`docker compose config`'s services with ``env`` set and ``unset`` removed from the host's."""
    host = {k: v for k, v in os.environ.items() if k not in unset}
    done = subprocess.run(
        ["docker", "compose", "config", "--format", "json"], cwd=REPO, capture_output=True,
        text=True, env={**host, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    services: dict[str, Any] = json.loads(done.stdout)["services"]
    return services


def test_the_metrics_ports_follow_wirelab_bind() -> None:
    config = {"services": services_with({"WIRELAB_BIND": "::1"})}
    assert _published(config, "rest", 9100)[0] == "::1"
    assert _published(config, "grpc", 9100)[0] == "::1"


def test_service_knobs_without_a_compose_default_pass_through_when_set() -> None:
    # No default in compose.yaml for these: the services' own defaults (contract/knobs.json)
    # apply unless the host sets one, and then both services under test get it alike.
    knobs = (
        "WIRELAB_METRICS",
        "WIRELAB_REST_HANDLERS",
        "WIRELAB_GRPC_SERVER",
        "WIRELAB_GRPC_THREADS",
        "WIRELAB_MAX_PAYLOAD_BYTES",
        "WIRELAB_GRACE_SECONDS",
        "WIRELAB_PAYLOAD_BUDGET_BYTES",
        "WIRELAB_MAX_ORDER_BYTES",
        "WIRELAB_REST_MAX_CONCURRENT_CALLS",
        "WIRELAB_GRPC_MAX_CONCURRENT_CALLS",
        "WIRELAB_REST_HTTP",
        "WIRELAB_TRACES",
        "WIRELAB_TRACE_SAMPLE_RATIO",
        "WIRELAB_TRACES_ENDPOINT",
    )
    for env, expected in (({}, None), (dict.fromkeys(knobs, "7"), "7")):
        services = services_with(env, unset=knobs)
        for service in ("rest", "grpc"):
            environment = services[service]["environment"]
            assert {k: environment.get(k) for k in knobs} == dict.fromkeys(knobs, expected)


def test_the_node_services_get_the_worker_count_when_set() -> None:
    for env, expected in (({}, None), ({"WIRELAB_NODE_WORKERS": "2"}, "2")):
        host = {"COMPOSE_PROFILES": "node", **env}
        services = services_with(host, unset=("WIRELAB_NODE_WORKERS",))
        for service in ("rest-node", "grpc-node"):
            assert services[service]["environment"].get("WIRELAB_NODE_WORKERS") == expected


def test_locust_can_be_pointed_at_the_node_services() -> None:
    """Both Locust processes call the Python services by default, and the Node.js ones (profile
    node) when the host says so: the same users, dashboards and rules for either runtime."""
    node = {
        "WIRELAB_LOCUST_REST_HOST": "http://rest-node:8000",
        "WIRELAB_LOCUST_GRPC_TARGET": "grpc-node:50051",
    }
    for env, hosts in (({}, ("http://rest:8000", "grpc:50051")), (node, tuple(node.values()))):
        services = services_with(env, unset=tuple(node))
        for name in ("locust", "locust-worker"):
            environment = services[name]["environment"]
            got = (environment["LOCUST_REST_HOST"], environment["LOCUST_GRPC_TARGET"])
            assert got == hosts, name


def test_the_bench_image_is_the_locust_image_plus_the_generator(config: dict[str, Any]) -> None:
    """One Dockerfile, two targets: Locust's image stops before the Go build, the bench
    service's adds wirelab-loadgen and the .proto, and its runner is told where they are."""
    services = config["services"]
    for name in ("locust", "locust-worker"):
        build = services[name]["build"]
        assert (build["dockerfile"], build["target"]) == ("locust/Dockerfile", "locust"), name
    bench = services["bench"]
    assert (bench["build"]["dockerfile"], bench["build"]["target"]) == (
        "locust/Dockerfile",
        "bench",
    )
    assert bench["image"] != services["locust"]["image"]
    dockerfile = (REPO / "locust" / "Dockerfile").read_text()
    env = bench["environment"]
    binary = env["WIRELAB_BENCH_LOADGEN"]
    assert f"COPY --from=loadgen /out/wirelab-loadgen {binary}\n" in dockerfile
    assert f"COPY proto {env['WIRELAB_BENCH_LOADGEN_PROTO']}\n" in dockerfile
    # The stages in this order: the legacy builder builds every stage up to the target's.
    stages = [line.split()[-1] for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert stages == ["locust", "loadgen", "bench"]

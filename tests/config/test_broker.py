"""The RabbitMQ broker of compose's amqp profile (docs/broker.md), as configured: only with its
profile, published on loopback only, no usable guest, a healthcheck, its memory bounded, an offline
stand-in, and scraped by DNS so a lab without it has no down target. No engine is needed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.config.queries import REPO
from tests.e2e.lab import HOST_PORT_VARIABLES

CONF = REPO / "rabbitmq" / "rabbitmq.conf"
UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
CONF_UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "KB": 1000, "MB": 1000**2, "GB": 1000**3}


def compose_config(*profiles: str, **env: str) -> dict[str, Any]:
    """`docker compose config` with these profiles, the host's WIRELAB_* knobs unset."""
    if shutil.which("docker") is None:
        pytest.fail("the docker CLI with the compose v2 plugin is needed (no engine is)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WIRELAB_", "RABBITMQ_"))}
    clean.pop("COMPOSE_PROFILES", None)
    flags = [arg for profile in profiles for arg in ("--profile", profile)]
    done = subprocess.run(
        ["docker", "compose", *flags, "config", "--format", "json"], cwd=REPO,
        capture_output=True, text=True, env={**clean, **env}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout)
    return parsed


def broker(**env: str) -> dict[str, Any]:
    service: dict[str, Any] = compose_config("amqp", **env)["services"]["rabbitmq"]
    return service


def settings() -> dict[str, str]:
    """rabbitmq.conf's `key = value` lines (sysctl-like, as RabbitMQ reads it)."""
    pairs = (
        line.split("=", 1)
        for line in CONF.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    return {key.strip(): value.strip() for key, value in pairs}


def test_the_broker_starts_only_with_the_amqp_profile() -> None:
    assert "rabbitmq" not in compose_config()["services"]
    assert broker()["profiles"] == ["amqp"]


def test_the_pinned_image_is_a_4x_management_release_and_overridable() -> None:
    assert re.fullmatch(r"rabbitmq:4\.\d+\.\d+-management", broker()["image"]), broker()["image"]
    assert broker(RABBITMQ_IMAGE="mirror/rabbitmq:x")["image"] == "mirror/rabbitmq:x"


def test_amqp_and_the_ui_are_published_on_loopback_only_and_the_metrics_not_at_all() -> None:
    published = {p["target"]: (p.get("host_ip"), p.get("published")) for p in broker()["ports"]}
    assert published == {5672: ("127.0.0.1", "5672"), 15672: ("127.0.0.1", "15672")}
    moved = broker(WIRELAB_RABBITMQ_HOST_PORT="25672", WIRELAB_RABBITMQ_UI_HOST_PORT="")
    assert {p["target"]: p.get("published", "") for p in moved["ports"]} == {
        5672: "25672",
        15672: "",
    }


def test_the_e2e_lab_gives_the_broker_ports_ephemeral_host_ports() -> None:
    """A broker someone already runs on 5672 must not make the e2e test fail (tests/e2e/lab.py)."""
    raw = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]["rabbitmq"]
    variables = {v for port in raw["ports"] for v in re.findall(r"(WIRELAB_\w+_HOST_PORT)", port)}
    assert len(variables) == 2
    assert variables <= set(HOST_PORT_VARIABLES)


def test_the_broker_has_its_own_user_and_guest_can_only_log_in_from_inside() -> None:
    environment = broker()["environment"]
    assert (environment["RABBITMQ_DEFAULT_USER"], environment["RABBITMQ_DEFAULT_PASS"]) == (
        "wirelab",
        "wirelab",
    )
    chosen = broker(WIRELAB_AMQP_USER="ann", WIRELAB_AMQP_PASSWORD="s3cret")["environment"]
    assert (chosen["RABBITMQ_DEFAULT_USER"], chosen["RABBITMQ_DEFAULT_PASS"]) == ("ann", "s3cret")
    assert settings()["loopback_users.guest"] == "true"
    assert not {"default_user", "default_pass"} & set(settings()), "credentials come from compose"


def test_the_config_is_mounted_read_only_after_the_images_own_defaults() -> None:
    """The official image's conf.d/10-defaults.conf opens guest to the network; conf.d files load
    in name order and the last one wins, so ours must sort after it."""
    (mount,) = [v for v in broker()["volumes"] if v["type"] == "bind"]
    assert mount["source"] == str(CONF)
    assert mount["read_only"] is True
    directory, name = mount["target"].rsplit("/", 1)
    assert directory == "/etc/rabbitmq/conf.d"
    assert name.endswith(".conf") and name > "10-defaults.conf"


def test_the_healthcheck_waits_for_the_listeners_with_the_images_own_cli() -> None:
    health = broker()["healthcheck"]
    assert health["test"][:2] == ["CMD", "rabbitmq-diagnostics"]
    assert health["test"][-1] == "check_port_connectivity"


def _bytes(text: str, units: dict[str, int]) -> int:
    number, unit = re.fullmatch(r"(\d+)\s*([A-Za-z]*)", text).groups()  # type: ignore[union-attr]
    return int(number) * units[unit]


def test_publishers_are_blocked_well_below_the_containers_memory_limit() -> None:
    """Neither RabbitMQ release reads the cgroup limit reliably: an absolute watermark, below the
    limit with room for the Erlang VM's own memory."""
    limit = int(broker()["mem_limit"])
    assert limit == _bytes("1g", UNITS)
    assert int(broker(WIRELAB_RABBITMQ_MEMORY="2g")["mem_limit"]) == _bytes("2g", UNITS)
    watermark = _bytes(settings()["vm_memory_high_watermark.absolute"], CONF_UNITS)
    assert 0.3 * limit <= watermark <= 0.6 * limit


def _jobs() -> dict[str, dict[str, Any]]:
    config = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    return {job["job_name"]: job for job in config["scrape_configs"]}


@pytest.mark.parametrize("job", ["rabbitmq", "rabbitmq-queues"])
def test_prometheus_finds_the_broker_by_dns_so_without_the_profile_no_target_is_down(
    job: str,
) -> None:
    scrape = _jobs()[job]
    assert "static_configs" not in scrape
    (dns,) = scrape["dns_sd_configs"]
    assert (dns["names"], dns["type"], dns["port"]) == (["rabbitmq"], "A", 15692)
    assert scrape["relabel_configs"] == [
        {"source_labels": ["__meta_dns_name"], "target_label": "service"}
    ]
    assert scrape["scrape_interval"] == "5s"


def test_queue_depth_comes_per_queue_from_the_detailed_endpoint_and_the_rest_aggregated() -> None:
    queues = _jobs()["rabbitmq-queues"]
    assert queues["metrics_path"] == "/metrics/detailed"
    assert "queue_coarse_metrics" in queues["params"]["family"]
    assert _jobs()["rabbitmq"].get("metrics_path", "/metrics") == "/metrics"
    assert settings()["prometheus.return_per_object_metrics"] == "false"


def test_the_offline_stand_in_is_debians_broker_with_both_plugins_in_the_foreground() -> None:
    offline = REPO / "offline"
    assert "RABBITMQ_IMAGE=wirelab/rabbitmq:bookworm" in (offline / "stand-ins.env").read_text()
    assert '["$RABBITMQ_IMAGE"]="rabbitmq.Dockerfile"' in (offline / "build-images").read_text()
    lines = (offline / "rabbitmq.Dockerfile").read_text().splitlines()
    text = "\n".join(lines)
    assert "apt-get install -y --no-install-recommends rabbitmq-server" in text
    assert "rabbitmq-plugins enable --offline rabbitmq_prometheus rabbitmq_management" in text
    assert lines[-1] == 'CMD ["rabbitmq-server"]'
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users == ["rabbitmq"]


def test_the_broker_gets_one_core_like_each_service_under_test() -> None:
    services = compose_config("amqp")["services"]
    assert float(broker()["cpus"]) == float(services["grpc"]["cpus"]) == 1.0
    assert float(broker(WIRELAB_RABBITMQ_CPUS="0.5")["cpus"]) == 0.5


def test_every_key_is_one_the_pinned_release_accepts() -> None:
    """RabbitMQ 4.2 cannot be built here (it needs an Erlang newer than Debian's; CI boots 3.10),
    so the config's keys are checked against the schemas of the pinned 4.2.5 (a `$user` key
    stands for any user name); an unknown key would stop the broker at start."""
    lines = (Path(__file__).with_name("rabbitmq-4.2.5-keys.txt")).read_text().splitlines()
    known = {line for line in lines if line and not line.startswith("#")}
    patterns = [re.compile(re.escape(k).replace(r"\$user", r"[^.]+") + "$") for k in known]
    used = set(settings())
    assert {"loopback_users.guest", "vm_memory_high_watermark.absolute"} <= used
    unknown = {key for key in used if not any(p.match(key) for p in patterns)}
    assert not unknown, unknown

"""The metric names the lab really exports: real registries, the rules, and exporter lists."""

from __future__ import annotations

from pathlib import Path

import yaml
from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.parser import text_string_to_metric_families
from wirelab.contract import PROTOCOLS
from wirelab.metrics import ServerMetrics
from wirelab_locust.metrics import ClientCollector, Gauges, Observations

from tests.config.queries import RULES

HERE = Path(__file__).resolve().parent
EXPORTER_LISTS = {
    "cAdvisor 0.60": HERE / "cadvisor-0.60.txt",
    "node-exporter 1.12.1": HERE / "node-exporter-1.12.1.txt",
    "RabbitMQ 3.10": HERE / "rabbitmq-3.10.txt",
    "prom-client 15.1 defaults": HERE / "prom-client-15.1.txt",
}
# Series Prometheus makes itself: `up` per target (the down alert) and ALERTS.
PROMETHEUS_SYNTHETIC = frozenset({"up", "ALERTS", "ALERTS_FOR_STATE"})


def catalogue() -> dict[str, str]:
    """Metric name -> who produces it."""
    names: dict[str, str] = {}
    for origin, found in (
        ("server registry (wirelab.metrics)", server_metric_names()),
        ("client registry (wirelab_locust.metrics)", client_metric_names()),
        ("recording rules", recorded_names()),
        ("Prometheus itself", set(PROMETHEUS_SYNTHETIC)),
        *((origin, listed_names(path)) for origin, path in EXPORTER_LISTS.items()),
    ):
        names.update(dict.fromkeys(found, origin))
    return names


def server_metric_names() -> set[str]:
    """Sample names a service exposes: a real ServerMetrics per protocol, exposition parsed.

    The services' /metrics also carries prometheus_client's default REGISTRY with its process,
    platform and GC collectors (wirelab/serving.py): registered here too.
    """
    names: set[str] = set()
    for protocol in PROTOCOLS:  # one process, so one registry, per protocol
        registry = CollectorRegistry()
        ServerMetrics(protocol, registry, "async")
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        names |= _exposed(registry)
    return names


def client_metric_names() -> set[str]:
    """Sample names the Locust master exposes: its collector over pre-initialised observations."""
    observations = Observations()
    observations.preinitialise({"rest": "rest", "grpc": "grpc"})
    registry = CollectorRegistry()
    registry.register(
        ClientCollector(observations, lambda: Gauges(users=0, workers=0, cpu={"master": 0.0}))
    )
    return _exposed(registry)


def recorded_names() -> set[str]:
    return {
        rule["record"]
        for path in sorted(RULES.glob("*.yml"))
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "record" in rule
    }


def listed_names(path: Path) -> set[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return {line for line in lines if line and not line.startswith("#")}


def _exposed(registry: CollectorRegistry) -> set[str]:
    text = generate_latest(registry).decode()
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}

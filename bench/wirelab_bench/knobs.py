"""The runner's knobs: one table gives each a default, a --help line and a WIRELAB_BENCH_* name."""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from wirelab.contract import host_address, host_url

# Source checkout root, for defaults that point at the repository's own files.
REPO = Path(__file__).resolve().parents[2]


def _repo_path(relative: str) -> str:
    # Prefer the working directory (a compose service mounts the repo at its workdir), else the
    # checkout this package was installed from in editable mode.
    return relative if Path(relative).exists() else str(REPO / relative)


NETWORK_PROFILES = _repo_path("toxiproxy/profiles.toml")
# Where `make tools` installs the lab's precise generator (loadgen/, offline/go-tools).
LOADGEN_BINARY = str(Path.home() / "go" / "bin" / "wirelab-loadgen")

# (name, type, default, help)
KNOBS: tuple[tuple[str, type, object, str], ...] = (
    ("rest_url", str, host_url("rest"), "REST service base URL"),
    ("grpc_target", str, host_address("grpc"), "gRPC service host:port"),
    ("amqp_target", str, host_address("amqp_edge"),
     "the AMQP arm's gRPC edge host:port (order chain, profile amqp; docs/broker.md)"),
    ("prometheus_url", str, host_url("prometheus"),
     "Prometheus for range exports and container columns; empty = none"),
    ("rest_metrics_url", str, host_url("rest_metrics", "/metrics"),
     "REST service /metrics, scraped directly at window start and end (else via Prometheus)"),
    ("grpc_metrics_url", str, host_url("grpc_metrics", "/metrics"),
     "gRPC service /metrics, scraped directly at window start and end (else via Prometheus)"),
    ("amqp_metrics_url", str, host_url("amqp_edge_metrics", "/metrics"),
     "the AMQP arm's edge /metrics, scraped directly at window start and end (else Prometheus)"),
    ("node_rest_url", str, host_url("rest_node"),
     "the Node.js REST service base URL (profile node), for runtime node cells"),
    ("node_grpc_target", str, host_address("grpc_node"),
     "the Node.js gRPC service host:port (profile node), for runtime node cells"),
    ("node_rest_metrics_url", str, host_url("rest_node_metrics", "/metrics"),
     "the Node.js REST service /metrics, scraped directly at window start and end"),
    ("node_grpc_metrics_url", str, host_url("grpc_node_metrics", "/metrics"),
     "the Node.js gRPC service /metrics, scraped directly at window start and end"),
    ("client_metrics_port", int, 0, "port of the Locust child's client /metrics; 0 = a free port"),
    ("results_dir", str, "results", "folder that receives one sub-folder per run"),
    ("scenarios_dir", str, _repo_path("scenarios"), "where scenario names are looked up"),
    ("locustfile", str, _repo_path("locust/locustfile.py"), "the project's locustfile"),
    ("locust_args", str, "", "extra Locust arguments for every cell (shell-quoted)"),
    ("loadgen", str, LOADGEN_BINARY,
     'wirelab-loadgen, for groups with generator = "loadgen" (make tools)'),
    ("loadgen_proto", str, str(REPO / "proto"),
     "the folder holding wirelab/v1/wirelab.proto (wirelab-loadgen compiles it for gRPC calls)"),
    ("health_timeout_s", float, 60.0, "seconds to wait for both services to be healthy per cell"),
    ("export_delay_s", float, 1.0,
     "seconds after a window before exporting it from Prometheus (lets the last scrape land)"),
    ("export_step_s", float, 0.0, "Prometheus range-export step; 0 = window/120, at least 1 s"),
    ("compose_project", str, "wirelab", "compose project whose image versions go in the manifest"),
    ("progress", str, "on", "progress display on stderr: on or off"),
    ("network", str, "",
     "network profile for every cell (lan, zone, region, ...; direct = no proxy);"
     " empty = each group's own"),
    ("network_profiles", str, NETWORK_PROFILES, "the network profiles file (docs/network.md)"),
    ("toxiproxy_url", str, host_url("toxiproxy"), "Toxiproxy API (compose profile netem)"),
    ("net_rest_url", str, host_url("net_rest"),
     "the REST service through Toxiproxy, for cells with a network profile"),
    ("net_grpc_target", str, host_address("net_grpc"),
     "the gRPC service through Toxiproxy, for cells with a network profile"),
    ("net_node_rest_url", str, host_url("net_rest_node"),
     "the Node.js REST service through Toxiproxy, for runtime node cells with a network profile"),
    ("net_node_grpc_target", str, host_address("net_grpc_node"),
     "the Node.js gRPC service through Toxiproxy, for runtime node cells with a network profile"),
    ("net_amqp_target", str, host_address("net_amqp_edge"),
     "the AMQP arm's edge through Toxiproxy, for its cells with a network profile"
     " (order chain, PROFILES=amqp,netem)"),
)  # fmt: skip


def env_name(name: str) -> str:
    return "WIRELAB_BENCH_" + name.upper()


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Knobs:
    rest_url: str
    grpc_target: str
    amqp_target: str
    prometheus_url: str
    rest_metrics_url: str
    grpc_metrics_url: str
    amqp_metrics_url: str
    node_rest_url: str
    node_grpc_target: str
    node_rest_metrics_url: str
    node_grpc_metrics_url: str
    client_metrics_port: int
    results_dir: str
    scenarios_dir: str
    locustfile: str
    locust_args: str
    loadgen: str
    loadgen_proto: str
    health_timeout_s: float
    export_delay_s: float
    export_step_s: float
    compose_project: str
    progress: str
    network: str
    network_profiles: str
    toxiproxy_url: str
    net_rest_url: str
    net_grpc_target: str
    net_node_rest_url: str
    net_node_grpc_target: str
    net_amqp_target: str


def add_arguments(parser: argparse.ArgumentParser, only: Collection[str] = ()) -> None:
    """One option per knob (or per knob named in ``only``); its default comes from the
    environment variable when set."""
    for name, kind, default, text in KNOBS:
        if only and name not in only:
            continue
        env = env_name(name)
        raw = os.environ.get(env)
        try:
            value = kind(raw) if raw is not None else default
        except ValueError:
            parser.error(f"{env}={raw!r} is not a valid {kind.__name__}")
        parser.add_argument(
            flag(name),
            dest=name,
            type=kind,
            default=value,
            help=f"{text} (default {default!r}; env {env})",
        )


def from_namespace(ns: argparse.Namespace) -> Knobs:
    return Knobs(**{name: getattr(ns, name) for name, *_ in KNOBS})

"""The runner's knobs as typed fields: generated from contract/knobs-lab.json (part
"runner") by `python -m wirelab.contract.fieldgen`; do not edit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Knobs:
    """The runner's knobs resolved (wirelab_bench.knobs.from_namespace)."""

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
    jaeger_url: str

"""The published host ports of compose.yaml and topologies/*.yaml are the knob table's
(its WIRELAB_<NAME>_HOST_PORT knobs, wirelab.contract.HOST_PORTS), which gives Locust and the runner
their default targets."""

from __future__ import annotations

import re

from wirelab.contract import HOST_PORTS, host_address, host_url
from wirelab_bench.knobs import KNOBS
from wirelab_locust.options import OPTIONS

from tests.config.queries import REPO

_PUBLISHED = re.compile(r"\$\{WIRELAB_([A-Z_]+)_HOST_PORT-(\d+)\}")


def published() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in [REPO / "compose.yaml", *sorted((REPO / "topologies").glob("*.yaml"))]:
        for name, port in _PUBLISHED.findall(path.read_text()):
            assert found.setdefault(name.lower(), int(port)) == int(port), (path, name)
    return found


def test_every_published_port_is_the_tables_and_the_table_has_no_other() -> None:
    assert published() == HOST_PORTS


def test_locust_and_the_runner_take_their_default_targets_from_the_table() -> None:
    runner = {name: default for name, _, default, _ in KNOBS}
    assert runner["rest_url"] == host_url("rest") == "http://127.0.0.1:8000"
    assert runner["grpc_target"] == host_address("grpc") == "127.0.0.1:50051"
    assert runner["amqp_target"] == host_address("amqp_edge")
    assert runner["grpc_metrics_url"] == host_url("grpc_metrics", "/metrics")
    assert runner["net_node_grpc_target"] == host_address("net_grpc_node")
    locust = {flag: default for flag, _, default, _, _ in OPTIONS}
    assert (locust["grpc-target"], locust["amqp-target"]) == (
        runner["grpc_target"],
        runner["amqp_target"],
    )

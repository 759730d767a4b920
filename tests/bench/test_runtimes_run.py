"""The runner over both runtimes (scenario key `runtimes`): the Python and the Node.js services as
real processes, parity across runtimes before measuring, each cell measured on its own runtime's
service, then the report's runtime comparison."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from wirelab_bench.cell import Lab, Route, route
from wirelab_bench.cli import main
from wirelab_bench.report import render
from wirelab_bench.scenario_file import ScenarioError, load_scenario

from tests.bench.lab import Services
from tests.node.conftest import node_binary
from tests.node.test_conformance import start_node
from tests.services.test_integration import Service

SCENARIO = """
runtimes = ["python", "node"]
kinds = ["unary"]
loads = [{ users = 1, label = "one" }]
warmup_s = 0.5
duration_s = 1.5
cooldown_s = 0

[gates]
max_error_ratio = 0.0
"""


@pytest.fixture(scope="module")
def node_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Service]]:
    node = node_binary()
    logs = tmp_path_factory.mktemp("node-logs")
    started: dict[str, Service] = {}
    try:
        for protocol in ("rest", "grpc"):
            started[protocol] = start_node(node, protocol, logs)
        yield started
    finally:
        for service in started.values():
            service.stop()


@pytest.mark.integration
def test_a_run_over_both_runtimes_measures_each_on_its_own_services(
    services: Services, node_services: dict[str, Service], tmp_path: Path
) -> None:
    scenario = tmp_path / "runtimes.toml"
    scenario.write_text(SCENARIO)
    rest, grpc = node_services["rest"], node_services["grpc"]
    node_args = [
        "--node-rest-url", f"http://127.0.0.1:{rest.port}",
        "--node-grpc-target", f"127.0.0.1:{grpc.port}",
        "--node-rest-metrics-url", f"http://127.0.0.1:{rest.metrics_port}/metrics",
        "--node-grpc-metrics-url", f"http://127.0.0.1:{grpc.metrics_port}/metrics",
    ]  # fmt: skip
    args = [*services.args(tmp_path / "results"), *node_args, "--progress", "off"]
    assert main(["bench", str(scenario), *args]) == 0
    (run,) = (tmp_path / "results").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert {"unary", "unary (node)", "unary (python = node)"} <= set(manifest["parity"])
    assert {"rest-node", "grpc-node"} <= set(manifest["servers"])
    tidy = pd.read_csv(run / "tidy.csv")
    assert set(zip(tidy.runtime, tidy.protocol, strict=True)) == {
        (r, p) for r in ("python", "node") for p in ("rest", "grpc")
    }
    assert (tidy.errors == 0).all() and (tidy.server_source == "scrape").all(), tidy.to_string()
    # Each row's server side is its own runtime's service: it served about what Locust sent it
    # (the other runtime's served nothing meanwhile; the two sides' snapshots are a few ms apart
    # at about 1,000 calls/s, more on a busy host).
    ratio = tidy.server_requests_per_s * tidy.window_s / tidy.requests
    assert ratio.between(0.5, 1.5).all(), tidy.to_string()
    assert tidy[tidy.runtime == "node"].cell_id.str.contains("_node_").all()
    html = render(run).read_text()
    assert "node/python calls/s" in html
    nb = json.loads((run / "report.ipynb").read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('runtimes = ["deno"]\n', "unknown runtimes value 'deno'"),
        (
            'runtimes = ["node"]\ntopology = "order-chain"\nprotocols = ["grpc", "amqp"]\n',
            "runtime node has no AMQP arm",
        ),
    ],
)
def test_node_cells_are_refused_where_the_lab_cannot_run_them(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(f'kinds = ["unary"]\nloads = [{{users = 1}}]\n{text}')
    with pytest.raises(ScenarioError, match=message):
        load_scenario(path)


@pytest.mark.parametrize("topology", ["one-hop", "a-to-b", "cluster", "order-chain"])
def test_node_cells_run_in_every_topology(tmp_path: Path, topology: str) -> None:
    """Each topology file wires the Node.js services too (PROFILES=node)."""
    path = tmp_path / "s.toml"
    path.write_text(
        f'topology = "{topology}"\nruntimes = ["python", "node"]\nkinds = ["unary"]\n'
        "loads = [{users = 1}]\n"
    )
    cells = load_scenario(path).cells()
    assert {(c.runtime, c.protocol) for c in cells} == {
        (r, p) for r in ("python", "node") for p in ("rest", "grpc")
    }


def test_runtimes_interleave_and_alternate_by_repetition(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        'repetitions = 2\nruntimes = ["python", "node"]\nkinds = ["unary"]\nloads = [{users = 1}]\n'
    )
    order = [(c.runtime, c.protocol, c.repetition) for c in load_scenario(path).cells()]
    assert order == [
        ("python", "rest", 0), ("python", "grpc", 0), ("node", "rest", 0), ("node", "grpc", 0),
        ("node", "grpc", 1), ("node", "rest", 1), ("python", "grpc", 1), ("python", "rest", 1),
    ]  # fmt: skip


def test_each_runtimes_cells_go_to_its_own_services_through_its_own_proxies(
    tmp_path: Path,
) -> None:
    """A network group's cells reach each runtime through that runtime's Toxiproxy proxies
    (toxiproxy/toxiproxy.json has rest-node and grpc-node beside rest and grpc); the /metrics
    that measure them are the services' own either way."""
    path = tmp_path / "s.toml"
    path.write_text(
        'kinds = ["unary"]\nloads = [{users = 1}]\nruntimes = ["python", "node"]\n'
        '[[groups]]\nname = "direct"\n[[groups]]\nname = "region"\nnetwork = "region"\n'
    )
    scenario = load_scenario(path)
    lab = Lab("py-rest", "py-grpc", Path(), (), 0, server_urls={"rest": "py-metrics"},
              net_rest_url="py-rest-via", net_grpc_target="py-grpc-via",
              node_rest_url="node-rest", node_grpc_target="node-grpc",
              node_server_urls={"rest": "node-metrics"},
              net_node_rest_url="node-rest-via", net_node_grpc_target="node-grpc-via")  # fmt: skip
    routes = {(c.runtime, c.group.network): route(c, lab) for c in scenario.cells()}
    assert routes == {
        ("python", "direct"): Route("py-rest", "py-grpc", "", {"rest": "py-metrics"}),
        ("python", "region"): Route("py-rest-via", "py-grpc-via", "", {"rest": "py-metrics"}),
        ("node", "direct"): Route("node-rest", "node-grpc", "", {"rest": "node-metrics"}),
        ("node", "region"): Route("node-rest-via", "node-grpc-via", "", {"rest": "node-metrics"}),
    }

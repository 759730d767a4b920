"""The AMQP arm as a third protocol of a run: scenarios, exports, rows, health and parity."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from wirelab.hops.outgoing import Outgoing, families
from wirelab.metrics import ServerMetrics
from wirelab_bench.cell import Lab, route
from wirelab_bench.cli import main
from wirelab_bench.health import wait_healthy
from wirelab_bench.histo import delta, key
from wirelab_bench.knobs import NETWORK_PROFILES, REPO
from wirelab_bench.network import AMQP_PROXIES, Network, NetworkUnavailable, Profile
from wirelab_bench.promql import EXPORTS, TOPOLOGY_EXPORTS, aggregate
from wirelab_bench.scenario import Gates
from wirelab_bench.scenario_file import ScenarioError, load_scenario
from wirelab_bench.scrape import parse
from wirelab_bench.tidy import Window, build_row

from tests.bench.test_network import FakeToxiproxy

QUEUES = ("amqp://broker:5672/product", "amqp://broker:5672/customer")


def _scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "arm.toml"
    path.write_text(f'kinds = ["unary"]\nloads = [{{users = 1}}]\n{text}')
    return path


def test_the_order_chain_scenario_measures_three_arms() -> None:
    chain = load_scenario(REPO / "scenarios" / "order-chain.toml")
    assert {c.protocol for c in chain.cells()} == {"rest", "grpc", "amqp"}


def test_amqp_cells_are_refused_outside_the_order_chain(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="protocol amqp runs in topology order-chain only"):
        load_scenario(_scenario(tmp_path, 'protocols = ["amqp"]\n'))


def test_amqp_cells_may_run_under_a_network_profile(tmp_path: Path) -> None:
    """Through Toxiproxy (PROFILES=amqp,netem): its edge's proxy and its broker link's."""
    text = 'topology = "order-chain"\nprotocols = ["amqp"]\nnetwork = "region"\n'
    (cell,) = load_scenario(_scenario(tmp_path, text)).cells()
    links = (cell.group.network, cell.group.hops_network)
    assert (cell.protocol, *links) == ("amqp", "region", "region")


def test_a_run_wide_network_puts_the_amqp_arm_behind_toxiproxy_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _scenario(tmp_path, 'topology = "order-chain"\nprotocols = ["grpc", "amqp"]\n')
    assert main(["bench", str(path), "--network", "region", "--dry-run"]) == 0
    assert "001_amqp_unary_u1_0b_region_r0" in capsys.readouterr().out


def test_an_amqp_cell_with_a_network_goes_to_its_edges_proxy(tmp_path: Path) -> None:
    text = (
        'topology = "order-chain"\nprotocols = ["amqp"]\n'
        '[[groups]]\nname = "direct"\n[[groups]]\nname = "far"\nnetwork = "direct"\n'
        'hop_network = "region"\n[[groups]]\nname = "region"\nnetwork = "region"\n'
    )
    cells = load_scenario(_scenario(tmp_path, text)).cells()
    lab = Lab("rest", "grpc", Path(), (), 0, amqp_target="edge", net_amqp_target="toxiproxy-edge")
    # Only the edge's link decides where the load goes: the hop link is the edge's own business.
    assert [route(c, lab).amqp_target for c in cells] == ["edge", "edge", "toxiproxy-edge"]


def _fake_network(proxies: tuple[str, ...], amqp: bool) -> Network:
    fake = FakeToxiproxy(proxies)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("wirelab_bench.network.Toxiproxy", lambda url: fake.client())
        return Network(Path(NETWORK_PROFILES), "http://toxiproxy:8474", ("region",), amqp)


def test_amqp_cells_with_a_network_need_the_arms_two_proxies() -> None:
    chain = ("rest", "grpc", "rest-product", "grpc-product")
    assert _fake_network(chain, amqp=False)  # the other arms' cells do not need them
    refused = r"no proxy amqp, amqp-broker.*PROFILES=amqp,netem"
    with pytest.raises(NetworkUnavailable, match=refused):
        _fake_network(chain, amqp=True)
    assert _fake_network((*chain, *AMQP_PROXIES), amqp=True)


def test_the_amqp_edges_proxy_takes_the_edge_profile_and_the_broker_link_the_hops() -> None:
    fake = FakeToxiproxy(("rest", "grpc", "grpc-product", *AMQP_PROXIES))
    fake.client().apply(Profile("zone", "", 2), Profile("region", "", 40, 6))
    latency = {p: sorted(t["attributes"]["latency"] for t in fake.toxics[p]) for p in fake.toxics}
    assert latency == {
        "rest": [1, 1], "grpc": [1, 1], "amqp": [1, 1],
        "grpc-product": [20, 20], "amqp-broker": [20, 20],
    }  # fmt: skip


def _edge_page(protocol: str, server: int, hops: int) -> str:
    """An edge's /metrics: its gRPC server side, and its calls to downstreams of ``protocol``."""
    registry = CollectorRegistry()
    metrics = ServerMetrics("grpc", registry, "async", "sequential")
    measured = families(registry)
    outgoing = [Outgoing(measured, protocol, p) for p in QUEUES]
    for _ in range(server):
        metrics.start("unary", time.perf_counter() - 0.45).finish("ok", "OK")
    for call in outgoing:
        for _ in range(hops):
            call.record("ok", 0.11, 100, 40)
    metrics.flush()
    return generate_latest(registry).decode()


def test_the_amqp_arms_edge_is_counted_as_its_arm_never_into_the_grpc_arm() -> None:
    # Both edges are gRPC servers; the arm is the scrape job. Exported through the same
    # aggregation Prometheus applies (label_replace), their rows stay apart.
    names = [*EXPORTS, *TOPOLOGY_EXPORTS]
    samples = parse(_edge_page("grpc", 3, 1), "grpc") + parse(_edge_page("amqp", 5, 2), "amqp")
    snap = aggregate(samples, names)
    served = {"kind": "unary", "outcome": "ok"}
    assert snap[key("server_requests", {"protocol": "grpc", **served})] == 3
    assert snap[key("server_requests", {"protocol": "amqp", **served})] == 5
    hop = {"kind": "unary", "outcome": "ok"}
    assert snap[key("hop_requests", {"protocol": "amqp", "peer": QUEUES[0], **hop})] == 2
    assert "label_replace(" in EXPORTS["server_requests"].promql
    assert '"protocol", "$1", "job", "(amqp)"' in TOPOLOGY_EXPORTS["hop_requests"].promql


def test_an_amqp_row_takes_its_edge_and_the_whole_arms_cpu_with_the_broker(
    tmp_path: Path,
) -> None:
    path = _scenario(tmp_path, 'topology = "order-chain"\nprotocols = ["amqp"]\nwork_ms = 100\n')
    cell = load_scenario(path).cells()[0]
    names = [*EXPORTS, *TOPOLOGY_EXPORTS]
    start = aggregate(parse(_edge_page("amqp", 0, 0), "amqp"), names)
    end = aggregate(parse(_edge_page("amqp", 10, 10), "amqp"), names)
    svc = "container_label_com_docker_compose_service"
    containers = {
        key("container_cpu_seconds", {svc: name}): cpu
        for name, cpu in (
            ("amqp", 0.5), ("amqp-product", 0.2), ("amqp-customer", 0.2),
            ("rabbitmq", 0.3), ("grpc", 9.0), ("grpc-product", 9.0),
        )
    }  # fmt: skip
    w = Window(cell, 0.0, 10.0, server=delta(start, end), containers=containers)
    row = build_row(w, Gates(), "order-chain")
    assert row["protocol"] == "amqp" and row["server_requests_per_s"] == pytest.approx(1.0)
    assert row["hop_calls_per_order"] == pytest.approx(2.0)
    assert row["chain_cpu_s_per_request"] == pytest.approx((0.5 + 0.4 + 0.3) / 10)
    assert row["broker_cpu_s_per_request"] == pytest.approx(0.03)
    one_hop = build_row(w, Gates())
    assert math.isnan(one_hop["chain_cpu_s_per_request"])


def test_an_absent_amqp_edge_says_how_to_start_it() -> None:
    with pytest.raises(TimeoutError, match="PROFILES=amqp"):
        wait_healthy("", "", ("amqp",), timeout=0.1, amqp_target="127.0.0.1:9")

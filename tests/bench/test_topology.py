"""Topology scenarios: the key, the refusal against an edge's real /metrics, per-hop columns."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from wirelab.hops.outgoing import Outgoing, families
from wirelab.metrics import ServerMetrics
from wirelab_bench.cell import SERVER, Lab, histogram_rows
from wirelab_bench.histo import delta, key
from wirelab_bench.knobs import REPO
from wirelab_bench.promql import aggregate
from wirelab_bench.scenario import Gates
from wirelab_bench.scenario_file import ScenarioError, load_scenario
from wirelab_bench.scrape import parse
from wirelab_bench.tidy import Window, build_row
from wirelab_bench.tidy_hops import replica_rows
from wirelab_bench.topology import TOPOLOGIES, Peers, edge_peers, refusal, work_floor_ms

SCENARIOS = REPO / "scenarios"


def _scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(f'kinds = ["unary"]\nloads = [{{users = 1}}]\n{text}')
    return path


def test_topology_key_defaults_to_one_hop_and_is_checked(tmp_path: Path) -> None:
    assert load_scenario(_scenario(tmp_path, "")).topology == "one-hop"
    assert load_scenario(_scenario(tmp_path, 'topology = "a-to-b"')).topology == "a-to-b"
    with pytest.raises(ScenarioError, match=r"unknown topology 'ring' \(known: one-hop, a-to-b"):
        load_scenario(_scenario(tmp_path, 'topology = "ring"'))
    with pytest.raises(ScenarioError, match="topology has the wrong type"):
        load_scenario(_scenario(tmp_path, "topology = 3"))
    with pytest.raises(ScenarioError, match="unknown key 'topology'"):  # one lab per run
        load_scenario(_scenario(tmp_path, '[[groups]]\nname = "g"\ntopology = "a-to-b"'))


def test_shipped_topology_scenarios_carry_the_studies_parameters() -> None:
    for name, work in (("a-to-b", 10), ("cluster", 10), ("order-chain", 100)):
        scenario = load_scenario(SCENARIOS / f"{name}.toml")
        assert scenario.topology == name
        assert {g.work_ms for g in scenario.groups} == {work}
        assert {k for g in scenario.groups for k in g.kinds} == {"unary"}
    chain = load_scenario(SCENARIOS / "order-chain.toml").groups[0]
    assert [ld.users for ld in chain.loads] == [10, 100, 300]
    assert chain.failure_threshold_ms == 900
    assert work_floor_ms("order-chain", chain.work_ms) == 400  # the study's 4 x 100 ms
    assert work_floor_ms("a-to-b", 10) == work_floor_ms("cluster", 10) == 10  # A works not
    # The table knows exactly the topologies with a compose file, and the plain lab.
    files = {p.stem for p in (REPO / "topologies").glob("*.yaml")}
    assert files == set(TOPOLOGIES) - {"one-hop"}


def _edge_page(peers: tuple[str, ...]) -> bytes:
    """What a REST edge serves: its server families, and one client family set per downstream
    (pre-initialised, so a peer shows before its first call)."""
    registry = CollectorRegistry()
    ServerMetrics("rest", registry, "async")
    if peers:
        measured = families(registry)
        for peer in peers:
            Outgoing(measured, "rest", peer)
    return generate_latest(registry)


class FakeEdge:
    """A loopback /metrics serving whatever page a test sets."""

    def __init__(self) -> None:
        self.page = b""
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(served.page)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def peers(self, page: bytes) -> Peers:
        self.page = page
        return edge_peers(["rest"], {"rest": self.url}, None)


@pytest.fixture
def edge() -> Iterator[FakeEdge]:
    fake = FakeEdge()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def test_peers_are_read_from_the_edges_metrics(edge: FakeEdge) -> None:
    found = edge.peers(_edge_page(("rest-product", "rest-customer", "rest-shipping")))
    assert found.found == {"rest": ["rest-customer", "rest-product", "rest-shipping"]}
    assert found.source == {"rest": "scrape"}
    assert edge.peers(_edge_page(())).found == {"rest": []}


def test_a_topology_scenario_refuses_the_plain_lab_and_the_wrong_topology(
    edge: FakeEdge,
) -> None:
    plain = edge.peers(_edge_page(()))
    why = refusal("a-to-b", "a-to-b", plain)
    assert why is not None
    assert "rest edge calls no downstream" in why and "`make lab TOPOLOGY=a-to-b`" in why
    assert refusal("smoke", "one-hop", plain) is None
    relay = edge.peers(_edge_page(("rest-b",)))
    assert refusal("a-to-b", "a-to-b", relay) is None
    assert refusal("cluster", "cluster", relay) is None
    why = refusal("order-chain", "order-chain", relay)
    assert why is not None and "calls 1 (rest-b)" in why
    assert "`make lab TOPOLOGY=order-chain`" in why


def test_a_one_hop_scenario_refuses_a_topology(edge: FakeEdge) -> None:
    why = refusal("smoke", "one-hop", edge.peers(_edge_page(("rest-b",))))
    assert why is not None
    assert "calls downstreams (rest-b)" in why and "labelled one-hop" in why
    assert "`make lab`" in why


def test_unknown_downstreams_are_recorded_not_held_against_the_run() -> None:
    peers = edge_peers(["rest", "grpc"], {"rest": "http://127.0.0.1:9/metrics"}, None)
    assert peers.found == {"rest": None, "grpc": None}
    assert "127.0.0.1:9" in peers.source["rest"]
    assert peers.source["grpc"] == "no direct scrape and no Prometheus"
    assert refusal("a-to-b", "a-to-b", peers) is None


def _edge_window(tmp_path: Path, topology: str, peers: tuple[str, ...], work_ms: int) -> Window:
    """Ten orders through a REST edge with ``peers``: each order served in 0.35 s at the edge,
    each downstream call 0.1 s (0.6 s for the last order's), Locust timing each order 0.42 s;
    one call fails. Snapshots are real expositions, read as the runner reads them."""
    registry = CollectorRegistry()
    server = ServerMetrics("rest", registry, "async")
    measured = families(registry)
    outgoing = [Outgoing(measured, "rest", p) for p in peers]
    lab = Lab("", "", Path(), (), 0, topology=topology)
    before = aggregate(parse(generate_latest(registry).decode(), "rest"), lab.edge)
    for i in range(10):
        server.start("unary", time.perf_counter() - 0.35).finish("ok", "200")
        for n, call in enumerate(outgoing):
            last = i == 9 and n == len(outgoing) - 1
            call.record("server_error" if last else "ok", 0.6 if last else 0.1, 200, 180)
    server.flush()
    after = aggregate(parse(generate_latest(registry).decode(), "rest"), lab.edge)
    locust = {"job": "locust", "protocol": "rest", "kind": "unary", "call": "ProcessOrder"}
    client = aggregate(
        [
            ("wirelab_client_requests_total", {**locust, "outcome": "ok"}, 10.0),
            ("wirelab_client_request_duration_seconds_bucket", {**locust, "le": "0.3"}, 0.0),
            ("wirelab_client_request_duration_seconds_bucket", {**locust, "le": "0.5"}, 10.0),
            ("wirelab_client_request_duration_seconds_bucket", {**locust, "le": "+Inf"}, 10.0),
            ("wirelab_client_request_duration_seconds_sum", locust, 4.2),
        ]
    )
    path = _scenario(tmp_path, f'work_ms = {work_ms}\ntopology = "{topology}"')
    cell = next(c for c in load_scenario(path).cells() if c.protocol == "rest")
    return Window(cell, 0.0, 5.0, server=delta(before, after), client=client)


def test_per_hop_columns_of_an_a_to_b_window(tmp_path: Path) -> None:
    w = _edge_window(tmp_path, "a-to-b", ("rest-b",), work_ms=10)
    row = build_row(w, Gates(), "a-to-b")
    assert row["topology"] == "a-to-b"
    assert row["requests"] == 10 and row["client_mean_ms"] == pytest.approx(420.0)
    assert row["hop_peers"] == "rest-b"
    assert row["hop_calls"] == 10 and row["hop_calls_per_order"] == pytest.approx(1.0)
    assert row["hop_error_pct"] == pytest.approx(10.0)
    assert row["hop_mean_ms"] == pytest.approx((9 * 100 + 600) / 10)
    assert 75 < row["hop_p50_ms"] <= 100  # inside the 75-100 ms bucket
    assert 500 < row["hop_p99_ms"] <= 750
    assert row["work_floor_ms"] == 10 and row["overhead_above_floor_ms"] == pytest.approx(410.0)
    hist = {r["side"] for r in histogram_rows(w)}
    assert hist == {"client", "server", "hop"}


def test_order_chain_floor_and_three_calls_per_order(tmp_path: Path) -> None:
    peers = ("rest-product", "rest-customer", "rest-shipping")
    row = build_row(
        _edge_window(tmp_path, "order-chain", peers, work_ms=100), Gates(), "order-chain"
    )
    assert row["hop_peers"] == "rest-customer,rest-product,rest-shipping"
    assert row["hop_calls"] == 30 and row["hop_calls_per_order"] == pytest.approx(3.0)
    assert row["work_floor_ms"] == 400
    assert row["overhead_above_floor_ms"] == pytest.approx(20.0)
    # All at once (WIRELAB_FANOUT=parallel, as the edge's wirelab_server_info says): one 100 ms.
    window = _edge_window(tmp_path, "order-chain", peers, work_ms=100)
    at_once = build_row(window, Gates(), "order-chain", fanout="parallel")
    assert (at_once["fanout"], at_once["work_floor_ms"]) == ("parallel", 100)
    assert at_once["overhead_above_floor_ms"] == pytest.approx(320.0)


@pytest.mark.parametrize(
    ("topology", "fanout", "floor"),
    [
        ("order-chain", "sequential", 400), ("order-chain", "parallel", 100),
        ("order-chain", "split", 100), ("order-chain", "unknown", 400),
        ("cluster", "split", 100), ("one-hop", "none", 100),
    ],
)  # fmt: skip
def test_the_floor_follows_the_edges_fanout(topology: str, fanout: str, floor: float) -> None:
    assert work_floor_ms(topology, 100, fanout) == floor


def test_one_hop_rows_have_the_floor_but_no_hop_figures(tmp_path: Path) -> None:
    w = _edge_window(tmp_path, "one-hop", (), work_ms=100)
    assert set(Lab("", "", Path(), (), 0).edge) == set(SERVER)
    row = build_row(w, Gates())
    assert row["topology"] == "one-hop" and row["hop_peers"] == ""
    assert math.isnan(row["hop_calls"]) and math.isnan(row["hop_mean_ms"])
    assert row["work_floor_ms"] == 100 and row["overhead_above_floor_ms"] == pytest.approx(320.0)


def test_replica_rows_keep_the_cells_protocol() -> None:
    snap = {
        key("replica_requests", {"protocol": "rest", "service": "rest-b", "instance": i}): n
        for i, n in (("10.0.0.2:9100", 40.0), ("10.0.0.3:9100", 38.0))
    }
    snap[key("replica_requests", {"protocol": "grpc", "service": "grpc-b", "instance": "x"})] = 0
    w = Window(next(iter(load_scenario(SCENARIOS / "cluster.toml").cells())), 0.0, 1.0)
    rows = replica_rows(w.cell, snap)
    assert [(r["service"], r["requests"]) for r in rows] == [("rest-b", 40.0), ("rest-b", 38.0)]
    assert replica_rows(w.cell, None) == []

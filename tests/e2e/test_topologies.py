"""Each topology of topologies/ booted in turn (docs/topologies.md): orders through the edge on
both protocols, every hop's metrics moving, client and server counts agreeing hop by hop, each
order one trace across its hops (compose's traces profile, every trace kept), and for the cluster
the spread over replicas and a replica killed mid-run."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc
from wirelab_bench import jaeger

from tests.config.queries import ANY_TOPOLOGY, REPO, all_queries
from tests.e2e.bench_run import bench, bench_env, host_env, report
from tests.e2e.engine import engine_for
from tests.e2e.lab import Lab, booted, healthy, wait_for
from tests.e2e.prom import Prometheus

pytestmark = pytest.mark.topology


@dataclass(frozen=True)
class Shape:
    """What a topology wires per protocol: (peer the edge calls, service that answers) pairs,
    the extra services to start, and the work per order that keeps a run short."""

    hops: dict[str, tuple[tuple[str, str], ...]]
    extra: tuple[str, ...] = ()
    work_ms: int = 10
    # The same for the Node.js edges (rest-node, grpc-node), booted with compose's node profile
    # where NODE_TOPOLOGIES names the topology.
    node_hops: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    node_extra: tuple[str, ...] = ()


# The topologies booted with their Node.js wiring too: every one, so each arm of each topology is
# one trace in both runtimes (the cluster and the order chain together, Node's edges and hops
# included, took 3 min 47 s on 29 Nov 2026); WIRELAB_E2E_NODE_TOPOLOGIES names fewer for a
# shorter run.
NODE_TOPOLOGIES = set(
    os.environ.get("WIRELAB_E2E_NODE_TOPOLOGIES", "a-to-b cluster order-chain")
    .replace(",", " ")
    .split()
)


def _node(
    topology: str, hops: dict[str, tuple[tuple[str, str], ...]]
) -> dict[str, tuple[tuple[str, str], ...]]:
    return hops if topology in NODE_TOPOLOGIES else {}


SHAPES = {
    "a-to-b": Shape(
        {"rest": (("rest-b", "rest-b"),), "grpc": (("grpc-b", "grpc-b"),)},
        node_hops=_node(
            "a-to-b",
            {"rest": (("rest-node-b", "rest-node-b"),), "grpc": (("grpc-node-b", "grpc-node-b"),)},
        ),
    ),
    "order-chain": Shape(
        {
            p: tuple((f"{p}-{s}", f"{p}-{s}") for s in ("product", "customer", "shipping"))
            for p in ("rest", "grpc")
        },
        work_ms=5,
        node_hops=_node(
            "order-chain",
            {
                p: tuple(
                    (f"{p}-node-{s}", f"{p}-node-{s}") for s in ("product", "customer", "shipping")
                )
                for p in ("rest", "grpc")
            },
        ),
    ),
    "cluster": Shape(
        {"rest": (("lb", "rest-b"),), "grpc": (("lb", "grpc-b"),)},
        extra=("lb",),
        node_hops=_node(
            "cluster",
            {"rest": (("lb-node", "rest-node-b"),), "grpc": (("lb-node", "grpc-node-b"),)},
        ),
        node_extra=("lb-node",),
    ),
}
ORDERS = 60  # per protocol and topology: a few seconds of load, bounded by count
CALL_TIMEOUT = 10.0
# Every topology runs traced, as `make lab PROFILES=traces` with every trace kept: the order
# chain's own end-to-end test (test_traces_e2e.py) checks that nothing is exported when off.
TRACED = {
    "WIRELAB_TRACES": "on",
    "WIRELAB_TRACE_SAMPLE_RATIO": "1",
    "WIRELAB_TRACES_ENDPOINT": "http://jaeger:4318",
}
TRACED_ORDERS = 6  # per protocol and runtime


def _topologies() -> list[str]:
    return sorted(p.stem for p in (REPO / "topologies").glob("*.yaml"))


def test_every_topology_file_is_tested() -> None:
    assert set(_topologies()) == set(SHAPES)


@dataclass
class Running:
    name: str
    shape: Shape
    lab: Lab
    prometheus: Prometheus
    rest_url: str
    grpc_target: str
    # The Node.js edges (runtime -> URL or target), when the topology wires them.
    node_rest_url: str = ""
    node_grpc_target: str = ""
    jaeger: str = ""  # Jaeger's query API

    def edge(self, protocol: str, runtime: str) -> str:
        """Where orders of ``protocol`` go for ``runtime``'s edge."""
        if runtime == "node":
            return self.node_rest_url if protocol == "rest" else self.node_grpc_target
        return self.rest_url if protocol == "rest" else self.grpc_target


@pytest.fixture(scope="module")
def engine() -> Iterator[None]:
    with engine_for("the topology tests"):
        yield


@pytest.fixture(scope="module", params=sorted(SHAPES))
def topology(
    request: pytest.FixtureRequest, engine: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Running]:
    """One topology at a time: its edges, hops and Prometheus (no load generator, dashboards
    or exporters: the host sends the orders, so the topology has the machine to itself)."""
    name = str(request.param)
    shape = SHAPES[name]
    lab = Lab.create(tmp_path_factory.mktemp(name), topology=name)
    hops = {service for pairs in shape.hops.values() for _, service in pairs}
    lab.services = ["rest", "grpc", *sorted(hops), *shape.extra, "prometheus", "jaeger"]
    lab.env |= {"COMPOSE_PROFILES": "traces", **TRACED}
    node_hops = {service for pairs in shape.node_hops.values() for _, service in pairs}
    if node_hops:
        lab.env["COMPOSE_PROFILES"] = "traces,node"
        lab.services += ["rest-node", "grpc-node", *sorted(node_hops), *shape.node_extra]
    with booted(lab):
        grpc_address = lab.compose("port", "grpc", "50051", timeout=30).stdout.strip()
        running = Running(
            name,
            shape,
            lab,
            Prometheus(lab.url("prometheus", 9090)),
            lab.url("rest", 8000),
            grpc_address,
        )
        running.jaeger = lab.url("jaeger", 16686)
        if node_hops:
            running.node_rest_url = lab.url("rest-node", 8000)
            running.node_grpc_target = lab.url("grpc-node", 50051).removeprefix("http://")
        yield running


def _order(number: int, work_ms: int) -> dict[str, object]:
    order = {
        "order_id": f"o-{number}",
        "items": [{"sku": "s", "quantity": 1, "unit_price_cents": 7}],
    }
    return {"order": order, "work_ms": work_ms}


def send_orders(
    running: Running, protocol: str, count: int, runtime: str = "python"
) -> Counter[str]:
    """``count`` orders through ``runtime``'s edge, 6 at a time; the status of each (200, OK,
    502, ...)."""
    work = running.shape.work_ms
    edge = running.edge(protocol, runtime)
    if protocol == "rest":
        with httpx.Client(base_url=edge, timeout=CALL_TIMEOUT) as client:

            def rest_call(n: int) -> str:
                try:
                    return str(client.post("/v1/orders", json=_order(n, work)).status_code)
                except httpx.HTTPError as exc:
                    return type(exc).__name__

            with ThreadPoolExecutor(6) as pool:
                return Counter(pool.map(rest_call, range(count)))
    with grpc.insecure_channel(edge) as channel:
        stub = pb_grpc.WireLabStub(channel)

        def grpc_call(n: int) -> str:
            order = pb.Order(
                order_id=f"o-{n}", items=[pb.LineItem(sku="s", quantity=1, unit_price_cents=7)]
            )
            try:
                stub.ProcessOrder(pb.OrderRequest(order=order, work_ms=work), timeout=CALL_TIMEOUT)
            except grpc.RpcError as exc:
                return str(exc.code().name)
            return "OK"

        with ThreadPoolExecutor(6) as pool:
            return Counter(pool.map(grpc_call, range(count)))


OK = {"rest": "200", "grpc": "OK"}
# The replicas' tests run on the cluster topology's instance of the module fixture.
CLUSTER_ONLY = pytest.mark.parametrize("topology", ["cluster"], indirect=True)


def _counted(
    prometheus: Prometheus, expr: str, by: str, wanted: dict[str, float], exact: bool = False
) -> None:
    """Wait until ``expr`` grouped by ``by`` holds ``wanted`` (nothing else either, if
    ``exact``); fail with what Prometheus holds. The services count a call by the next 1 s scrape
    (they apply their records when scraped), so the wait ends a scrape or two after the orders."""
    seen: dict[str, float] = {}

    def there() -> bool:
        nonlocal seen
        seen = prometheus.values(expr, by)
        return seen == wanted if exact else all(seen.get(k) == v for k, v in wanted.items())

    try:
        wait_for(f"{expr} to count {wanted}", there, timeout=30, every=0.5)
    except AssertionError:
        pytest.fail(f"{expr}: Prometheus has {seen}, the test expected {wanted}")


def test_orders_cross_every_hop_and_counts_agree_hop_by_hop(topology: Running) -> None:
    prometheus = topology.prometheus
    for protocol, pairs in topology.shape.hops.items():
        statuses = send_orders(topology, protocol, ORDERS)
        assert statuses == Counter({OK[protocol]: ORDERS}), (topology.name, protocol, statuses)
        _counted(
            prometheus,
            f'sum by (service) (wirelab_server_requests_total{{job="{protocol}", kind="unary"}})',
            "service",
            {protocol: ORDERS},
            exact=True,
        )
        _counted(
            prometheus,
            f'sum by (peer) (wirelab_client_requests_total{{job="{protocol}", outcome="ok"}})',
            "peer",
            {peer: ORDERS for peer, _ in pairs},
        )
        _counted(
            prometheus,
            'sum by (service) (wirelab_server_requests_total{job="hops", kind="unary", '
            f'protocol="{protocol}", outcome="ok"}})',
            "service",
            {service: ORDERS for _, service in pairs},
        )


# The Node.js edges' tests run on the topologies that wire them (a-to-b).
NODE_WIRED = pytest.mark.parametrize(
    "topology", sorted(n for n, s in SHAPES.items() if s.node_hops), indirect=True
)


@NODE_WIRED
def test_the_node_edges_relay_to_their_node_hops_and_counts_agree(topology: Running) -> None:
    """The Node.js arm end to end (docs/node.md): its edges' calls counted by peer on their own
    jobs, and the same number served by the Node.js hops, which Prometheus labels runtime node."""
    prometheus = topology.prometheus
    for protocol, pairs in topology.shape.node_hops.items():
        statuses = send_orders(topology, protocol, ORDERS, "node")
        assert statuses == Counter({OK[protocol]: ORDERS}), (protocol, statuses)
        _counted(
            prometheus,
            f'sum by (peer) (wirelab_client_requests_total{{job="{protocol}-node", outcome="ok"}})',
            "peer",
            {peer: ORDERS for peer, _ in pairs},
        )
        _counted(
            prometheus,
            'sum by (service) (wirelab_server_requests_total{job="hops", runtime="node", '
            f'kind="unary", protocol="{protocol}", outcome="ok"}})',
            "service",
            {service: ORDERS for _, service in pairs},
        )
        fanout = prometheus.values(f'wirelab_server_info{{job="{protocol}-node"}}', "fanout")
        assert set(fanout) == {"sequential"}, fanout


SPAN_NAMES = {"rest": "POST /v1/orders", "grpc": "/wirelab.v1.WireLab/ProcessOrder"}
Hop = tuple[str, str, str]  # a span's service, kind and name


def _paths(trace: dict[str, Any]) -> list[tuple[Hop, ...]]:
    """Every span of ``trace`` as its path from the root (service, kind, name), sorted."""
    spans = {s["id"]: s for s in trace["spans"]}
    paths = []
    for span in spans.values():
        path = [(span["service"], span["kind"], span["name"])]
        while (span := spans.get(span["parent"] or "")) is not None:
            path.insert(0, (span["service"], span["kind"], span["name"]))
        paths.append(tuple(path))
    return sorted(paths)


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
@pytest.mark.parametrize("runtime", ["python", "node"])
def test_each_order_is_one_trace_across_its_hops(
    topology: Running, runtime: str, protocol: str
) -> None:
    """Every trace kept: an order through an edge is one trace of the edge's server span, its
    client span per downstream call and each downstream's server span, through the cluster's
    nginx balancer too (it passes ``traceparent`` on, untraced itself)."""
    hops = (topology.shape.hops if runtime == "python" else topology.shape.node_hops).get(protocol)
    if not hops:
        pytest.skip(f"{topology.name} runs no {runtime} edges here (WIRELAB_E2E_NODE_TOPOLOGIES)")
    edge = protocol if runtime == "python" else f"{protocol}-node"
    name = SPAN_NAMES[protocol]
    server, client = (edge, "server", name), (edge, "client", name)
    expected = sorted(
        [(server,), *[(server, client)] * len(hops)]
        + [(server, client, (hop, "server", name)) for _, hop in hops]
    )
    began = time.time()
    answered = send_orders(topology, protocol, TRACED_ORDERS, runtime)
    assert answered == {OK[protocol]: TRACED_ORDERS}, answered
    ended = time.time()

    def complete() -> list[dict[str, Any]] | None:
        traces = [jaeger.compact(t) for t in jaeger.fetch(topology.jaeger, edge, began, ended + 1)]
        whole = all(len(t["spans"]) == len(expected) for t in traces)
        return traces if len(traces) == TRACED_ORDERS and whole else None

    try:
        traces = wait_for(f"{TRACED_ORDERS} {edge} traces", complete, timeout=40, every=2)
    except AssertionError:
        found = jaeger.fetch(topology.jaeger, edge, began, ended + 1)
        shapes = Counter(len(t.get("spans", [])) for t in found)
        pytest.fail(f"{edge}: Jaeger has {len(found)} traces of span counts {shapes}, "
                    f"expected {TRACED_ORDERS} of {len(expected)}")  # fmt: skip
    for trace in traces:
        assert jaeger.root_of(trace) is not None, trace["trace_id"]
        assert _paths(trace) == expected, (trace["trace_id"], _paths(trace))


def test_the_queries_of_this_topology_return_data(topology: Running) -> None:
    """Dashboard panels and runner exports over series that only a topology has (the one-hop
    lab's e2e test runs the others). Rules evaluate every 10 s over 30 s windows: re-checked
    for 60 s after the orders of the test before."""
    wanted = [
        q for q in all_queries() if q.expect_data and q.needs in (ANY_TOPOLOGY, topology.name)
    ]
    assert wanted, "tests/config/queries.py marks no query as needing a topology"
    missing: list[str] = []

    def all_have_data() -> bool:
        if not missing:  # first round: make sure the window has orders in it
            send_orders(topology, "rest", 10)
            send_orders(topology, "grpc", 10)
        missing[:] = [q.source for q in wanted if not topology.prometheus.query(q.expr)]
        return not missing

    try:
        wait_for("every topology query to return data", all_have_data, timeout=60, every=5)
    except AssertionError:
        pytest.fail(f"{topology.name}: queries without data:\n" + "\n".join(missing))


def _per_replica(prometheus: Prometheus, service: str) -> dict[str, float]:
    expr = f'sum by (instance) (wirelab_server_requests_total{{service="{service}", kind="unary"}})'
    return prometheus.values(expr, "instance")


@CLUSTER_ONLY
def test_the_load_balancer_spreads_orders_over_every_replica(topology: Running) -> None:
    """lb over the Python replicas, and lb-node over the Node.js ones where they are booted."""
    runtimes = ["python", "node"] if topology.shape.node_hops else ["python"]
    for runtime, protocol in ((r, p) for r in runtimes for p in ("rest", "grpc")):
        sent = send_orders(topology, protocol, ORDERS, runtime)
        assert sent[OK[protocol]] == ORDERS, (runtime, protocol, sent)
        service = f"{protocol}-b" if runtime == "python" else f"{protocol}-node-b"

        def three(s: str = service) -> dict[str, float] | None:
            found = _per_replica(topology.prometheus, s)
            return found if len(found) == 3 else None

        replicas = wait_for(f"three {service} replicas in Prometheus", three, timeout=30)
        assert all(count > 0 for count in replicas.values()), (service, replicas)


@CLUSTER_ONLY
def test_a_replica_killed_mid_run_gives_explicit_errors_then_recovers(topology: Running) -> None:
    explicit = {
        "rest": {"200", "502", "503", "504"},
        "grpc": {"OK", "UNAVAILABLE", "DEADLINE_EXCEEDED"},
    }
    for protocol in ("rest", "grpc"):
        with ThreadPoolExecutor(1) as background:
            started = time.monotonic()
            during = background.submit(send_orders, topology, protocol, 4 * ORDERS)
            time.sleep(0.5)
            container = topology.lab.kill(f"{protocol}-b")
            statuses = during.result(timeout=4 * ORDERS * CALL_TIMEOUT)
        # Every call ended with an answer: success or an explicit error, never a hang (a hang
        # would be a client-side timeout) and never a 500/INTERNAL for a downstream's fault.
        assert set(statuses) <= explicit[protocol], (protocol, statuses)
        assert time.monotonic() - started < 120
        wait_for(f"{container} healthy again", partial(healthy, container), timeout=90, every=2)
        _recovers(topology, protocol, explicit[protocol])


def _recovers(topology: Running, protocol: str, explicit: set[str]) -> None:
    """Every order of a batch answered OK within 30 s of the replica's healthcheck passing.
    Healthy is not yet back in the balancer: nginx leaves a replica that refused out for 10 s
    (fail_timeout, topologies/lb/python.conf) and may meet a kept connection to the killed
    process, which its caller hears as an explicit 502/UNAVAILABLE, never anything else."""
    seen: Counter[str] = Counter()

    def recovered() -> bool:
        seen.clear()
        seen.update(send_orders(topology, protocol, ORDERS))
        assert set(seen) <= explicit, (protocol, seen)
        return seen == Counter({OK[protocol]: ORDERS})

    try:
        wait_for(f"every {protocol} order answered again", recovered, timeout=30, every=2)
    except AssertionError as exc:
        pytest.fail(f"{protocol}: {dict(seen)} 30 s after the replica was healthy ({exc})")


def test_bench_and_report_on_this_topology(topology: Running, tmp_path: Path) -> None:
    """`make bench` with a scenario of this topology, seconds long, then `make report`: the
    runner finds the edges' downstreams, the tidy rows carry the topology and per-hop columns,
    it keeps each cell's traces (the lab runs traced), and the report's topology section runs
    without an error and draws each arm's orders hop by hop."""
    scenario = tmp_path / f"{topology.name}-smoke.toml"
    # Both runtimes where the topology wires the Node.js edges too: the runner checks their
    # downstreams as it checks the Python edges'.
    runtimes = '["python", "node"]' if topology.shape.node_hops else '["python"]'
    scenario.write_text(
        f'topology = "{topology.name}"\nkinds = ["unary"]\nwork_ms = {topology.shape.work_ms}\n'
        'loads = [{ users = 2, label = "smoke" }]\nwarmup_s = 0.5\nduration_s = 2\ncooldown_s = 0\n'
        f"runtimes = {runtimes}\n"
    )
    env = host_env(topology.lab) | {"WIRELAB_REPORT_OUTPUT": str(tmp_path)}
    env |= bench_env(topology.lab, jaeger_url=topology.jaeger)
    if topology.shape.node_hops:
        lab = topology.lab
        env |= bench_env(
            lab,
            node_rest_url=topology.node_rest_url,
            node_grpc_target=topology.node_grpc_target,
            node_rest_metrics_url=lab.url("rest-node", 9100) + "/metrics",
            node_grpc_metrics_url=lab.url("grpc-node", 9100) + "/metrics",
        )
    run_dir, manifest, tidy = bench(topology.lab, env, scenario)
    assert manifest["topology"]["name"] == topology.name, manifest["topology"]
    assert set(tidy["topology"]) == {topology.name}
    assert set(tidy["runtime"]) == ({"python", "node"} if topology.shape.node_hops else {"python"})
    if topology.shape.node_hops:
        assert set(manifest["topology"]["peers"]) == {"rest", "grpc", "rest-node", "grpc-node"}
    assert (tidy["errors"] == 0).all(), tidy.to_string()
    hops = {p: len(pairs) for p, pairs in topology.shape.hops.items()}
    for _, row in tidy.iterrows():
        # Window edges can split an order from its downstream calls: a few in a hundred.
        expected = pytest.approx(hops[row["protocol"]], rel=0.1)
        assert row["hop_calls_per_order"] == expected, row.to_dict()
    traces = manifest["traces"]
    assert traces["on"] is True and traces["captured"] is True, traces
    report(env, run_dir)
    # The report draws each arm's median order hop by hop from the cells' traces.
    for _, row in tidy.iterrows():
        runtime = "" if row["runtime"] == "python" else f"-{row['runtime']}"
        arm = f"{row['protocol']}{runtime}"
        drawn = tmp_path / f"waterfall_{topology.name}_{arm}_2.png"
        assert drawn.is_file(), (drawn.name, sorted(p.name for p in tmp_path.glob("waterfall_*")))

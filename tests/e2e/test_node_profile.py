"""compose.yaml's node profile booted (docs/node.md): the Node.js REST and gRPC services built
from node/Dockerfile on the pinned image or its stand-in, healthy, answering calls of several kinds
from the host, counted in Prometheus under runtime="node" by their DNS-found jobs, and shown by
every REST-vs-gRPC panel over the services once the dashboard's runtime is node; `make bench`
measures them as runtime node and `make report` reads the run."""

from __future__ import annotations

import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.config.queries import Query, dashboard_queries
from tests.e2e.bench_run import bench, bench_env, report
from tests.e2e.lab import Lab, profile_lab, wait_for
from tests.e2e.prom import Prometheus

pytestmark = pytest.mark.topology

# cAdvisor for the dashboard's container panels (CPU, memory, bytes per request).
SERVICES = ["rest-node", "grpc-node", "cadvisor", "prometheus"]
REST_VS_GRPC = "grafana/dashboards/rest-vs-grpc.json"
TIMEOUT = 10.0
BLOB = bytes(range(256)) * 64  # 16 KiB
# Calls per (protocol, kind, outcome) the test sends: a bounded, seconds-long mix.
ORDERS, STREAMS, BLOBS, REFUSED = 20, 5, 4, 3
WANTED = {
    ("rest", "unary", "ok"): ORDERS,
    ("rest", "unary", "client_error"): REFUSED,
    ("rest", "server_stream", "ok"): STREAMS,
    ("rest", "upload", "ok"): BLOBS,
    ("rest", "download", "ok"): BLOBS,
    ("grpc", "unary", "ok"): ORDERS,
    ("grpc", "unary", "client_error"): REFUSED,
    ("grpc", "server_stream", "ok"): STREAMS,
    ("grpc", "upload", "ok"): BLOBS,
    ("grpc", "download", "ok"): BLOBS,
}


@dataclass
class NodeLab:
    lab: Lab
    prometheus: Prometheus
    rest_url: str
    grpc_target: str


@pytest.fixture(scope="module")
def node_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeLab]:
    """The two Node.js services and Prometheus alone: the host sends the calls."""
    with profile_lab(tmp_path_factory.mktemp("node"), "node", SERVICES) as lab:
        grpc_target = lab.compose("port", "grpc-node", "50051", timeout=30).stdout.strip()
        yield NodeLab(
            lab, Prometheus(lab.url("prometheus", 9090)), lab.url("rest-node", 8000), grpc_target
        )


def _rest_calls(base_url: str) -> Counter[tuple[str, int]]:
    """Every REST call of WANTED; (kind, status) of each."""
    seen: Counter[tuple[str, int]] = Counter()
    order = {
        "order": {"order_id": "o", "items": [{"sku": "s", "quantity": 2, "unit_price_cents": 7}]}
    }
    with httpx.Client(base_url=base_url, timeout=TIMEOUT) as client:
        for _ in range(ORDERS):
            reply = client.post("/v1/orders", json=order)
            assert reply.json()["total_cents"] == 14
            seen["unary", reply.status_code] += 1
        for _ in range(REFUSED):
            seen["unary", client.post("/v1/orders", json={"work_ms": -1}).status_code] += 1
        for _ in range(STREAMS):
            reply = client.get("/v1/stream", params={"count": 3, "size": 10})
            assert reply.text.count("\n") == 3
            seen["server_stream", reply.status_code] += 1
        for _ in range(BLOBS):
            seen["upload", client.post("/v1/blobs", content=BLOB).status_code] += 1
            reply = client.get("/v1/blobs", params={"size": len(BLOB)})
            assert len(reply.content) == len(BLOB)
            seen["download", reply.status_code] += 1
    return seen


def _grpc_calls(target: str) -> Counter[tuple[str, str]]:
    """Every gRPC call of WANTED; (kind, status code name) of each."""
    seen: Counter[tuple[str, str]] = Counter()
    order = pb.Order(order_id="o", items=[pb.LineItem(sku="s", quantity=2, unit_price_cents=7)])
    refused = pb.Order(items=[pb.LineItem(quantity=4, unit_price_cents=2**62)])
    with grpc.insecure_channel(target) as channel:
        stub = pb_grpc.WireLabStub(channel)
        for _ in range(ORDERS):
            reply = stub.ProcessOrder(pb.OrderRequest(order=order), timeout=TIMEOUT)
            assert reply.total_cents == 14
            seen["unary", "OK"] += 1
        for _ in range(REFUSED):
            try:
                stub.ProcessOrder(pb.OrderRequest(order=refused), timeout=TIMEOUT)
                seen["unary", "OK"] += 1
            except grpc.RpcError as exc:
                seen["unary", exc.code().name] += 1
        for _ in range(STREAMS):
            messages = list(
                stub.StreamMessages(pb.StreamRequest(count=3, size=10), timeout=TIMEOUT)
            )
            assert len(messages) == 3
            seen["server_stream", "OK"] += 1
        for _ in range(BLOBS):
            stub.Upload(pb.Blob(data=BLOB), timeout=TIMEOUT)
            seen["upload", "OK"] += 1
            assert len(stub.Download(pb.BlobRequest(size=len(BLOB)), timeout=TIMEOUT).data) == len(
                BLOB
            )
            seen["download", "OK"] += 1
    return seen


def _counted(prometheus: Prometheus) -> dict[tuple[str, str, str, str], float]:
    """Non-zero node series: {(service, protocol, kind, outcome): requests}."""
    expr = (
        "sum by (service, protocol, kind, outcome) "
        '(wirelab_server_requests_total{runtime="node"}) > 0'
    )
    keys = ("service", "protocol", "kind", "outcome")
    return {
        tuple(r["metric"][k] for k in keys): float(r["value"][1]) for r in prometheus.query(expr)
    }


def test_both_node_services_are_healthy_and_scraped_as_runtime_node(node_lab: NodeLab) -> None:
    for service in ("rest-node", "grpc-node"):
        container = node_lab.lab.container(service)
        health = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Health.Status}} {{.Config.User}}", container],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.split()  # fmt: skip
        assert health == ["healthy", "10001:10001"], (service, health)

    def node_targets_up() -> list[dict[str, str]] | None:
        targets = [t for t in node_lab.prometheus.targets() if t["labels"]["job"].endswith("-node")]
        up = [t["labels"] for t in targets if t["health"] == "up"]
        return up if len(up) == len(targets) == 2 else None

    labels = wait_for("both node targets up", node_targets_up, timeout=30)
    assert {(t["job"], t["service"], t["runtime"]) for t in labels} == {
        ("rest-node", "rest-node", "node"),
        ("grpc-node", "grpc-node", "node"),
    }


def test_calls_of_several_kinds_are_counted_per_protocol_kind_and_outcome(
    node_lab: NodeLab,
) -> None:
    rest = _rest_calls(node_lab.rest_url)
    assert rest == Counter(
        {("unary", 200): ORDERS, ("unary", 400): REFUSED, ("server_stream", 200): STREAMS,
         ("upload", 200): BLOBS, ("download", 200): BLOBS}
    )  # fmt: skip
    grpc_seen = _grpc_calls(node_lab.grpc_target)
    assert grpc_seen == Counter(
        {("unary", "OK"): ORDERS, ("unary", "INVALID_ARGUMENT"): REFUSED,
         ("server_stream", "OK"): STREAMS, ("upload", "OK"): BLOBS, ("download", "OK"): BLOBS}
    )  # fmt: skip
    wanted = {(f"{p}-node", p, k, o): float(n) for (p, k, o), n in WANTED.items()}
    last: dict[tuple[str, str, str, str], float] = {}

    def counted_as_sent() -> bool:
        last.clear()
        last.update(_counted(node_lab.prometheus))
        return last == wanted

    try:
        wait_for("Prometheus to count every call", counted_as_sent, timeout=30)
    except AssertionError:
        pytest.fail(f"Prometheus counts {last}, the test sent {wanted}")


def _node_dashboard_queries() -> list[Query]:
    """The REST-vs-gRPC dashboard's queries over the services, as Grafana sends them with the
    runtime node picked: those that read $runtime (Locust's lines do not, and no Locust runs)."""
    return [
        q
        for q in dashboard_queries({"runtime": "node"})
        if q.source.startswith(REST_VS_GRPC)
        and "$runtime" in q.template
        and q.expect_data
        and q.needs in ("", "node")
    ]


def test_every_rest_vs_grpc_query_over_the_services_returns_data_for_node(
    node_lab: NodeLab,
) -> None:
    """Recording rules need an evaluation after two scrapes in their window (10 s groups over
    30 s; the cAdvisor rules' 1 m over 5 s scrapes): re-checked for 90 s."""
    wanted = _node_dashboard_queries()
    assert wanted, f"no query of {REST_VS_GRPC} reads $runtime"
    missing: list[str] = []

    def all_have_data() -> bool:
        missing[:] = [
            f"{q.source}: {q.expr}" for q in wanted if not node_lab.prometheus.query(q.expr)
        ]
        return not missing

    try:
        wait_for("every node dashboard query to return data", all_have_data, timeout=90, every=5)
    except AssertionError:
        pytest.fail("queries without data for runtime node:\n" + "\n".join(missing))


def test_bench_measures_the_node_runtime_and_the_report_reads_it(
    node_lab: NodeLab, tmp_path: Path
) -> None:
    """`make bench` with a seconds-long `runtimes = ["node"]` scenario from the host: parity of
    the Node services' REST and gRPC, each row counted from its own service's /metrics and from
    cAdvisor's container of that service; then `make report` without an error."""
    scenario = tmp_path / "node.toml"
    scenario.write_text(
        'runtimes = ["node"]\nkinds = ["unary", "download"]\npayload_sizes = [4096]\n'
        'loads = [{ users = 2, label = "smoke" }]\nwarmup_s = 0.5\nduration_s = 3\ncooldown_s = 0\n'
    )
    lab = node_lab.lab
    env = bench_env(
        lab,
        tmp_path,
        node_rest_url=node_lab.rest_url,
        node_grpc_target=node_lab.grpc_target,
        node_rest_metrics_url=lab.url("rest-node", 9100) + "/metrics",
        node_grpc_metrics_url=lab.url("grpc-node", 9100) + "/metrics",
        prometheus_url=lab.url("prometheus", 9090),
        rest_metrics_url="",
        grpc_metrics_url="",
    )
    run_dir, manifest, tidy = bench(lab, env, scenario)
    assert {"unary (node)", "download (node)"} <= set(manifest["parity"]), manifest["parity"]
    assert set(tidy["runtime"]) == {"node"} and set(tidy["protocol"]) == {"rest", "grpc"}
    assert (tidy["errors"] == 0).all(), tidy.to_string()
    assert (tidy["server_source"] == "scrape").all(), tidy.to_string()
    ratio = tidy["server_requests_per_s"] * tidy["window_s"] / tidy["requests"]
    assert ratio.between(0.5, 1.5).all(), tidy.to_string()
    report(env, run_dir)

"""The Node.js benchmark (wirelab_perf.node): its comparisons, its processes, its method."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format
from wirelab.v1 import wirelab_pb2, wirelab_pb2_grpc
from wirelab_perf import ORDER
from wirelab_perf import node as nodeperf
from wirelab_perf.h2 import outcomes
from wirelab_perf.h2load import grpc_body
from wirelab_perf.overhead import (
    Run,
    counter_for,
    h2load_grpc_count,
    otlp_sink,
    summarize,
    together,
    unary_reply,
    verdict,
)
from wirelab_perf.svcprocs import SERVER_CPU, Service

NODE = shutil.which("node")
H2LOAD = shutil.which("h2load")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")
OPENMETRICS = {"Accept": "application/openmetrics-text; version=1.0.0"}


def test_each_comparison_sets_the_right_processes_side_by_side() -> None:
    names = {
        c: tuple(name for name, _ in nodeperf.variants("node", c, "rest"))
        for c in nodeperf.COMPARISONS
    }
    assert names == {
        "metrics": ("on", "off"),
        "echo": ("service", "echo"),
        "runtimes": ("node", "python"),
        "workers": ("2 workers", "1 worker"),
        "floor": ("floor", "echo"),
        "conforming": ("service", "floor"),
        "traces": ("traced", "off"),
        "same": ("first", "second"),
    }


@pytest.mark.parametrize(
    "argv",
    [["--compare", "speed"], ["--protocols", "soap"], ["--compare", ""], ["--grpc-load", "curl"]],
)
def test_unknown_comparisons_and_protocols_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        nodeperf.main(argv)
    assert exited.value.code == 2


def test_a_comparison_without_a_goal_gets_no_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    firsts = [Run(110 + i, 1.0) for i in range(8)]
    seconds = [Run(100, 1.0) for _ in range(8)]
    summarize("rest", firsts, seconds, ("node", "python"), False, None, 8, 4)
    out = capsys.readouterr().out
    assert "a comparison, without a goal" in out
    assert "meets" not in out and "MISSES" not in out
    assert verdict(0.8, 0.89, False, 8, 0.9) == "MISSES the goal"


@pytest.mark.integration
@needs_node
def test_the_bare_echo_servers_answer_what_the_load_tools_check() -> None:
    assert NODE is not None
    with nodeperf.node_process(NODE, "rest", nodeperf.ECHOES["rest"], None) as svc:
        assert svc.metrics_url == ""  # nothing to scrape: together() leaves it alone
        body = json.dumps(ORDER).encode()
        request = urllib.request.Request(
            f"{svc.address}/v1/orders", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=5) as reply:
            assert reply.status == 200 and reply.read() == body
        runs = together(lambda s, _: 1, [svc], 1, 1.0)
        assert runs[0].scrapes == 0
    echo = nodeperf.node_process(NODE, "grpc", nodeperf.ECHOES["grpc"], None)
    with echo as svc, grpc.insecure_channel(svc.address) as channel:
        stub = wirelab_pb2_grpc.WireLabStub(channel)
        order = wirelab_pb2.OrderRequest(order=wirelab_pb2.Order(order_id="o-1"))
        assert stub.ProcessOrder(order, timeout=5) == wirelab_pb2.OrderReply()


@pytest.mark.integration
@needs_node
def test_the_least_order_servers_answer_the_order_as_the_services_do() -> None:
    assert NODE is not None
    body = json.dumps(ORDER).encode()
    replies = []
    for script in (nodeperf.FLOORS["rest"], nodeperf.SERVICES["rest"]):
        with nodeperf.node_process(
            NODE, "rest", script, None if "floor" in script.name else "on"
        ) as svc:
            request = urllib.request.Request(
                f"{svc.address}/v1/orders", body, {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=5) as reply:
                replies.append(json.loads(reply.read()))
    assert replies[0] == replies[1] and replies[0]["total_cents"] == 300
    order = wirelab_pb2.OrderRequest()
    json_format.ParseDict(ORDER, order)
    answers = []
    for script in (nodeperf.FLOORS["grpc"], nodeperf.SERVICES["grpc"]):
        started = nodeperf.node_process(
            NODE, "grpc", script, None if "floor" in script.name else "on"
        )
        with started as svc, grpc.insecure_channel(svc.address) as channel:
            answers.append(wirelab_pb2_grpc.WireLabStub(channel).ProcessOrder(order, timeout=5))
    assert answers[0] == answers[1] and answers[0].total_cents == 300


@pytest.mark.integration
@needs_node
@pytest.mark.parametrize("metrics", ["on", "off"])
def test_a_node_service_runs_pinned_with_its_metrics_knob(metrics: str) -> None:
    assert NODE is not None
    with nodeperf.node_process(NODE, "rest", nodeperf.SERVICES["rest"], metrics) as svc:
        with urllib.request.urlopen(svc.metrics_url, timeout=5) as page:
            text = page.read().decode()
        assert ("wirelab_server_requests_total" in text) == (metrics == "on")
        assert svc.process.cpu_affinity() == [SERVER_CPU]


@pytest.mark.integration
@needs_node
def test_a_clustered_node_service_runs_its_workers_pinned_and_counts_their_cpu() -> None:
    assert NODE is not None
    with nodeperf.node_process(NODE, "grpc", nodeperf.SERVICES["grpc"], "on", 2) as svc:
        workers = svc.process.children()
        assert len(workers) == 2
        assert all(w.cpu_affinity() == [SERVER_CPU] for w in workers)
        with urllib.request.urlopen(svc.metrics_url, timeout=5) as page:
            assert 'concurrency="cluster-2"' in page.read().decode()
        own = sum(sum(p.cpu_times()[:2]) for p in (svc.process, *workers))
        assert svc.cpu_seconds() >= own


@pytest.mark.integration
@needs_node
def test_the_traced_arm_traces_its_calls_and_the_untraced_one_does_not() -> None:
    """--compare traces: the first arm's order leaves its trace id as an exemplar on its
    OpenMetrics page (here at ratio 1), the second's page has none."""
    assert NODE is not None
    with otlp_sink() as endpoint:
        knobs = ["WIRELAB_TRACES=on", "WIRELAB_TRACE_SAMPLE_RATIO=1"]
        knobs.append(f"WIRELAB_TRACES_ENDPOINT={endpoint}")
        arms = nodeperf.variants(NODE, "traces", "rest", traced=knobs)
        for (name, start), exemplar in zip(arms, (True, False), strict=True):
            with start() as svc:
                text = ordered_page(svc)
                assert ('# {trace_id="' in text) == exemplar, name


@pytest.mark.integration
@needs_node
def test_the_same_comparison_runs_one_service_twice_in_two_processes() -> None:
    """--compare same: two processes of one service, side by side on the server core, each
    answering an order and serving the same metric families, neither traced."""
    assert NODE is not None
    (_, start_first), (_, start_second) = nodeperf.variants(NODE, "same", "rest")
    with start_first() as a, start_second() as b:
        assert a.process.pid != b.process.pid
        families = []
        for svc in (a, b):
            assert svc.process.cpu_affinity() == [SERVER_CPU]
            text = ordered_page(svc)
            assert "trace_id" not in text
            families.append(sorted(line for line in text.splitlines() if line.startswith("# TYPE")))
        assert families[0] == families[1]
        assert any("wirelab_server_requests" in line for line in families[0])


@pytest.mark.integration
@needs_node
@pytest.mark.skipif(H2LOAD is None, reason="h2load is not installed (tests/run installs it)")
def test_h2load_loads_node_grpc_and_fails_a_run_whose_calls_fail(tmp_path: Path) -> None:
    """--grpc-load h2load: the calls it counts are the calls the service answered ok (a few
    cut in flight aside); a call the service refuses (a 200 with INVALID_ARGUMENT in its
    trailers, which h2load counts as succeeded) fails the run."""
    assert NODE is not None and H2LOAD is not None
    count = counter_for("grpc", 8, "", tmp_path, grpc_load="h2load")
    with nodeperf.node_process(NODE, "grpc", nodeperf.SERVICES["grpc"], "on") as svc:
        count(svc, 1)  # the first load also asks the service for its reply's size (one call)
        before = outcomes(svc)
        answered = count(svc, 1)
        after = outcomes(svc)
        assert 0 < answered <= after["ok"] - before["ok"] <= answered + 8
        assert all(after[k] == before[k] for k in after if k != "ok")
        refused = json.loads(json.dumps(ORDER))
        refused["order"]["items"] = [{"sku": "a", "quantity": 4, "unit_price_cents": 2**62}] * 2
        body = tmp_path / "refused.grpc"
        body.write_bytes(grpc_body(refused))
        reply = 5 + len(unary_reply(svc.address, grpc_body(ORDER)[5:]))
        with pytest.raises(RuntimeError, match="some failed"):
            h2load_grpc_count(H2LOAD, svc.address, 1, 8, body, reply)
        assert outcomes(svc).get("client_error", 0) > 0


def ordered_page(svc: Service) -> str:
    """One small order answered by the REST service ``svc``, then its OpenMetrics page."""
    order = urllib.request.Request(
        f"{svc.address}/v1/orders",
        json.dumps(ORDER).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(order, timeout=5) as reply:
        assert reply.status == 200
    page = urllib.request.Request(svc.metrics_url, headers=OPENMETRICS)
    with urllib.request.urlopen(page, timeout=5) as answered:
        return str(answered.read().decode())

"""Traces end to end (docs/traces.md): the order chain's three arms booted once
with compose's amqp and traces profiles, every trace kept (WIRELAB_TRACE_SAMPLE_RATIO=1).

First with the services' tracing off (WIRELAB_TRACES=off, as `make lab` leaves it without the
profile) while Jaeger listens on the endpoint they would export to: orders on every arm, and
Jaeger lists no service, Prometheus holds no exemplar. Then with it on (the same containers
recreated with WIRELAB_TRACES=on, as `make lab PROFILES=traces` sets it): each order on each arm
is one trace in Jaeger's API with the spans its hops make (the edge's server span, a client span
per downstream call and each downstream's server span; on the AMQP arm each queue's publish,
process, reply publish and receive); an exemplar of an edge's latency histogram in Prometheus
names a trace Jaeger returns; and `make bench` keeps each cell's traces, which `make report`
draws hop by hop."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from wirelab_bench import jaeger

from tests.e2e.bench_run import bench, bench_env, report
from tests.e2e.lab import Lab, profile_lab, wait_for
from tests.e2e.netcalls import order_grpc, order_rest

pytestmark = pytest.mark.topology

QUEUES = ("product", "customer", "shipping")
ARMS = ("rest", "grpc", "amqp")
# Every Python service of the three arms: recreated with tracing on after the off phase.
TRACED = [*ARMS, *(f"{arm}-{q}" for arm in ARMS for q in QUEUES)]
SERVICES = ["rabbitmq", *TRACED, "jaeger", "prometheus"]
ORDERS = 8  # per arm and phase
GRPC_NAME = "/wirelab.v1.WireLab/ProcessOrder"
REST_NAME = "POST /v1/orders"
# The services' batch export every 5 s (jaeger.SETTLE_S), and Jaeger's own.
SETTLED = jaeger.SETTLE_S + 4
# The AMQP edge's job finds it by DNS, refreshed every 30 s: its recreated container may be at
# a new address until then.
EXEMPLAR_WAIT = 60.0


@dataclass
class Phase:
    """What one phase's orders left: their window and what Jaeger and Prometheus then held."""

    began: float
    ended: float
    services: list[str]
    exemplars: list[dict[str, Any]]


@dataclass
class Chain:
    lab: Lab
    prometheus: str  # the API's URL
    jaeger: str  # the query API's URL
    edges: dict[str, str]  # arm -> REST base URL or gRPC target
    off: Phase
    on: Phase


def _get(url: str, path: str, **params: str) -> Any:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{url}{path}{query}", timeout=30) as answer:
        return json.load(answer)


def _exemplars(prometheus: str, began: float, ended: float) -> list[dict[str, Any]]:
    """The edges' latency exemplars Prometheus holds for [began, ended]: one entry per series."""
    expr = f'wirelab_server_request_duration_seconds_bucket{{job=~"{"|".join(ARMS)}"}}'
    answer = _get(prometheus, "/api/v1/query_exemplars", query=expr, start=f"{began:.3f}",
                  end=f"{ended:.3f}")  # fmt: skip
    assert answer["status"] == "success", answer
    found: list[dict[str, Any]] = answer["data"] or []
    return found


def _edges(lab: Lab) -> dict[str, str]:
    """Each arm's edge as the host reaches it: REST's base URL, the gRPC edges' targets."""
    return {
        "rest": lab.url("rest", 8000),
        "grpc": lab.url("grpc", 50051).removeprefix("http://"),
        "amqp": lab.url("amqp", 50051).removeprefix("http://"),
    }


def _orders(edges: dict[str, str]) -> Phase:
    """ORDERS orders through each arm's edge, one after another, all answered."""
    began = time.time()
    with httpx.Client(base_url=edges["rest"], timeout=10) as client:
        for _ in range(ORDERS):
            order_rest(client)
    for arm in ("grpc", "amqp"):
        with grpc.insecure_channel(edges[arm]) as channel:
            for _ in range(ORDERS):
                order_grpc(channel)
    return Phase(began, time.time(), [], [])


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    """One boot: the off phase's orders and what they left, then every service recreated with
    tracing on and the on phase's orders."""
    traced = {"WIRELAB_TRACE_SAMPLE_RATIO": "1", "WIRELAB_TRACES_ENDPOINT": "http://jaeger:4318"}
    # "off" rather than unset: the knob's default, and the host's environment cannot leak an "on".
    folder = tmp_path_factory.mktemp("traces")
    with profile_lab(folder, "amqp,traces", SERVICES, "order-chain", WIRELAB_TRACES="off",
                     **traced) as lab:  # fmt: skip
        url, prometheus = lab.url("jaeger", 16686), lab.url("prometheus", 9090)
        off = _orders(_edges(lab))
        time.sleep(SETTLED)  # anything exported would have reached Jaeger by now
        off.services = _get(url, "/api/services")["data"] or []
        off.exemplars = _exemplars(prometheus, off.began, time.time())
        lab.env["WIRELAB_TRACES"] = "on"
        lab.compose("up", "-d", "--wait", "--wait-timeout", "240", *TRACED, timeout=300)
        # Recreated, the edges publish on new ephemeral ports.
        edges = _edges(lab)
        on = _orders(edges)
        yield Chain(lab, prometheus, url, edges, off, on)


def test_with_tracing_off_nothing_is_exported(chain: Chain) -> None:
    """Jaeger listened on the endpoint the services were given throughout the off phase."""
    assert chain.off.services == [], chain.off.services
    with_exemplars = [e for e in chain.off.exemplars if e.get("exemplars")]
    assert with_exemplars == [], with_exemplars


def _edge_traces(chain: Chain, service: str) -> list[dict[str, Any]]:
    """Jaeger's traces with a span of ``service`` in the on phase's window (1 s either side)."""
    found: list[dict[str, Any]] = jaeger.fetch(
        chain.jaeger, service, chain.on.began - 1, chain.on.ended + 1, limit=1000
    )
    return [jaeger.compact(t) for t in found]


Hop = tuple[str, str, str]  # a span's service, kind and name
Route = tuple[Hop, ...]  # from the root to a span


def _paths(trace: dict[str, Any]) -> list[Route]:
    """Every span as its path from the root, sorted: the tree whatever order siblings ran in.
    The AMQP edge's reply queue, named per process, is one placeholder."""
    spans = {s["id"]: s for s in trace["spans"]}
    assert jaeger.root_of(trace) is not None, f"{trace['trace_id']}: not one root"

    def hop(span: dict[str, Any]) -> Hop:
        verb, _, queue = span["name"].partition(" ")
        replies = verb in ("publish", "receive") and queue.startswith("wirelab.replies.")
        return span["service"], span["kind"], f"{verb} <reply queue>" if replies else span["name"]

    paths = []
    for span in spans.values():
        path = [hop(span)]
        while (span := spans.get(span["parent"] or "")) is not None:
            path.insert(0, hop(span))
        paths.append(tuple(path))
    return sorted(paths)


def _expected(arm: str) -> list[Route]:
    """The paths of one order's trace through ``arm``'s edge and its three downstreams."""
    if arm == "amqp":
        edge: Hop = ("amqp", "server", GRPC_NAME)
        paths: list[Route] = [(edge,)]
        for q in QUEUES:
            publish: Hop = ("amqp", "producer", f"publish amqp-{q}")
            process: Hop = (f"amqp-{q}", "consumer", f"process amqp-{q}")
            reply: Hop = (f"amqp-{q}", "producer", "publish <reply queue>")
            received: Hop = ("amqp", "consumer", "receive <reply queue>")
            paths += [(edge, publish), (edge, publish, process), (edge, publish, process, reply),
                      (edge, publish, process, reply, received)]  # fmt: skip
        return sorted(paths)
    name = REST_NAME if arm == "rest" else GRPC_NAME
    edge, call = (arm, "server", name), (arm, "client", name)
    served = [(edge, call, (f"{arm}-{q}", "server", name)) for q in QUEUES]
    return sorted([(edge,), *[(edge, call)] * len(QUEUES), *served])


@pytest.mark.parametrize("arm", ARMS)
def test_each_order_is_one_trace_with_every_hops_spans(chain: Chain, arm: str) -> None:
    def all_there() -> list[dict[str, Any]] | None:
        found = _edge_traces(chain, arm)
        complete = len(found) == ORDERS and all(
            len(t["spans"]) == len(_expected(arm)) for t in found
        )
        return found if complete else None

    try:
        traces = wait_for(f"{ORDERS} complete {arm} traces in Jaeger", all_there, timeout=30)
    except AssertionError:
        found = _edge_traces(chain, arm)
        pytest.fail(f"{arm}: Jaeger has {len(found)} traces of span counts "
                    f"{Counter(len(t['spans']) for t in found)}, expected {ORDERS} of "
                    f"{len(_expected(arm))}")  # fmt: skip
    ids = {t["trace_id"] for t in traces}
    for trace in traces:
        assert _paths(trace) == _expected(arm), trace["trace_id"]
    # No downstream began a trace of its own: every trace its spans are in is one of the orders'.
    for q in QUEUES:
        downstream = {t["trace_id"] for t in _edge_traces(chain, f"{arm}-{q}")}
        assert downstream == ids, (arm, q)


def test_an_edges_exemplar_names_a_trace_jaeger_returns(chain: Chain) -> None:
    """Prometheus (exemplar storage on) keeps the trace id of a sampled call on the bucket it
    fell in; per arm, the latest of the on phase's orders is the exemplar of its bucket."""
    wanted = set(ARMS)
    named: dict[str, set[str]] = {}

    def every_edge() -> bool:
        named.clear()
        for series in _exemplars(chain.prometheus, chain.on.began, time.time()):
            job = series["seriesLabels"].get("job", "")
            for exemplar in series.get("exemplars") or []:
                named.setdefault(job, set()).add(exemplar["labels"]["trace_id"])
        return wanted <= set(named)

    try:
        wait_for("an exemplar on every edge's latency histogram", every_edge, EXEMPLAR_WAIT, 2)
    except AssertionError:
        pytest.fail(f"exemplars by job: {named}; expected some on each of {sorted(wanted)}")
    for arm in ARMS:
        orders = {t["trace_id"] for t in _edge_traces(chain, arm)}
        kept = named[arm] & orders
        assert kept, (arm, named[arm], orders)
        trace_id = sorted(kept)[0]
        (trace,) = _get(chain.jaeger, f"/api/traces/{trace_id}")["data"]
        assert trace["traceID"] == trace_id
        assert jaeger.root_of(jaeger.compact(trace)) is not None


def test_bench_keeps_each_cells_traces_and_the_report_draws_them(
    chain: Chain, tmp_path: Path
) -> None:
    """`make bench` from the host reads the edges' environment (traces on, ratio 1), keeps each
    cell's traces from Jaeger, and `make report` draws a median and a p99 order per arm."""
    lab = chain.lab
    scenario = tmp_path / "order-chain-traced.toml"
    scenario.write_text(
        'topology = "order-chain"\nprotocols = ["rest", "grpc", "amqp"]\nkinds = ["unary"]\n'
        'work_ms = 2\nloads = [{ users = 2, label = "smoke" }]\n'
        "warmup_s = 0.5\nduration_s = 3\ncooldown_s = 0\n"
    )
    env = bench_env(
        lab,
        tmp_path,
        rest_url=chain.edges["rest"],
        rest_metrics_url=lab.url("rest", 9100) + "/metrics",
        grpc_target=chain.edges["grpc"],
        grpc_metrics_url=lab.url("grpc", 9100) + "/metrics",
        amqp_target=chain.edges["amqp"],
        amqp_metrics_url=lab.url("amqp", 9100) + "/metrics",
        prometheus_url=chain.prometheus,
        jaeger_url=chain.jaeger,
    )
    run_dir, manifest, tidy = bench(lab, env, scenario)
    traces = manifest["traces"]
    assert traces["on"] is True and traces["ratio"] == 1.0, traces
    assert traces["captured"] is True and traces["jaeger_url"] == chain.jaeger, traces
    assert set(traces["cells"]) == set(tidy["cell_id"]), traces["cells"]
    for cell, kept in traces["cells"].items():
        assert kept.get("traces", 0) > 0, (cell, kept)
    report(env, run_dir)
    html = (tmp_path / "report.html").read_text()
    assert "Hop by hop: a median and a p99 order" in html and "sampling ratio 1.0" in html
    for arm in ARMS:
        assert (tmp_path / f"waterfall_order-chain_{arm}_2.png").is_file(), arm

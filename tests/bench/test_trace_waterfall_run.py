"""The waterfall from real processes: an A -> B chain of Python services on loopback, traced at
ratio 1 and exporting to the Jaeger stand-in (offline/go-build jaeger, as the lab runs it), its
orders fetched through the runner's capture (wirelab_bench.jaeger) and drawn (wirelab_bench
.waterfall); then `wirelab bench` on the chain keeps each cell's traces and the report draws a
median and a p99 order beside the hop histograms."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from wirelab_bench import jaeger, waterfall
from wirelab_bench.cli import main
from wirelab_bench.report import render

from tests.bench.lab import Services, free_ports, running_services
from tests.gobuild import go_build

matplotlib.use("Agg")
pytestmark = pytest.mark.integration

ORDERS = 30
# The stand-in as the lab runs it, less what the test does not use, on free loopback ports (the
# all-in-one config binds a dozen fixed ones): OTLP/HTTP in, the memory store, the query API.
CONFIG = """
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces: {{receivers: [otlp], processors: [batch], exporters: [jaeger_storage_exporter]}}
  telemetry: {{metrics: {{level: none}}, logs: {{level: warn}}}}
extensions:
  jaeger_query:
    storage: {{traces: memstore}}
    http: {{endpoint: "127.0.0.1:{query}"}}
    grpc: {{endpoint: "127.0.0.1:{query_grpc}"}}
  jaeger_storage: {{backends: {{memstore: {{memory: {{max_traces: 100000}}}}}}}}
  healthcheckv2: {{use_v2: true, http: {{endpoint: "127.0.0.1:{health}"}}}}
receivers:
  otlp: {{protocols: {{http: {{endpoint: "127.0.0.1:{otlp}"}}}}}}
processors: {{batch: {{}}}}
exporters: {{jaeger_storage_exporter: {{trace_storage: memstore}}}}
"""
A_TO_B = """
description = "integration test: A -> B on loopback, traced"
topology = "a-to-b"
kinds = ["unary"]
work_ms = 5
warmup_s = 0.5
duration_s = 2
cooldown_s = 0
loads = [{ users = 2 }]
"""


@pytest.fixture(scope="module")
def jaeger_ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The Jaeger stand-in: its query API's URL and its OTLP/HTTP endpoint."""
    folder = tmp_path_factory.mktemp("jaeger")
    query, query_grpc, health, otlp = free_ports(4)
    config = folder / "config.yaml"
    config.write_text(CONFIG.format(query=query, query_grpc=query_grpc, health=health, otlp=otlp))
    binary = go_build("jaeger") / "jaeger"
    log = (folder / "jaeger.log").open("wb")
    proc = subprocess.Popen([str(binary), "--config", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{health}/status", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (
                f"Jaeger did not start: {(folder / 'jaeger.log').read_text()[-2000:]}"
            )
            time.sleep(0.2)
        yield f"http://127.0.0.1:{query}", f"http://127.0.0.1:{otlp}"
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.fixture(scope="module")
def chain(
    jaeger_ports: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    """A (the edges, named rest and grpc in traces) relaying each order to B (rest-b, grpc-b),
    every call traced and exported to Jaeger."""
    _, otlp = jaeger_ports
    traced = {"WIRELAB_TRACES": "on", "WIRELAB_TRACE_SAMPLE_RATIO": "1",
              "WIRELAB_TRACES_ENDPOINT": otlp}  # fmt: skip
    logs = tmp_path_factory.mktemp("traced-chain")
    named = {
        "wirelab.rest": {**traced, "WIRELAB_SERVICE_NAME": "rest-b"},
        "wirelab.rpc": {**traced, "WIRELAB_SERVICE_NAME": "grpc-b"},
    }
    with running_services(logs, named) as b:
        relay = {**traced, "WIRELAB_LOCAL_WORK": "off"}
        extra = {
            "wirelab.rest": {**relay, "WIRELAB_DOWNSTREAM": b.rest_url},
            "wirelab.rpc": {**relay, "WIRELAB_DOWNSTREAM": f"grpc://{b.grpc_target}"},
        }
        (logs / "a").mkdir()
        with running_services(logs / "a", extra) as a:
            yield a


def test_orders_through_the_chain_are_captured_and_drawn_hop_by_hop(
    chain: Services, jaeger_ports: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = jaeger_ports
    order = {"order_id": "w", "items": [{"sku": "s", "quantity": 1, "unit_price_cents": 7}]}
    began = time.time()
    with httpx.Client(base_url=chain.rest_url, timeout=10) as client:
        for _ in range(ORDERS):
            reply = client.post("/v1/orders", json={"order": order, "work_ms": 2})
            assert reply.status_code == 200, reply.text
    ended = time.time()
    time.sleep(jaeger.SETTLE_S)  # the services' last batch
    path = tmp_path / "traces" / "cell.json"
    got = jaeger.capture(url, "rest", began, ended, path)
    assert got == jaeger.Captured(traces=ORDERS, rootless=0, truncated=False)
    found = waterfall.orders(json.loads(path.read_text()))
    assert len(found) == ORDERS
    for o in found:
        shape = [(depth, s.service, s.kind, s.name) for depth, s in o.rows()]
        assert shape == [
            (0, "rest", "server", "POST /v1/orders"),
            (1, "rest", "client", "POST /v1/orders"),
            (2, "rest-b", "server", "POST /v1/orders"),
        ]
        ((call, extent),) = o.hops()
        # The call holds B's span; B works 2 ms per order.
        assert extent == pytest.approx(call.duration_ms)
        assert 2.0 <= call.duration_ms <= o.duration_ms
    picks = waterfall.pick(found)
    assert picks.median is not None and picks.p99 is not None and picks.p99_rank == ORDERS
    assert picks.median.duration_ms <= picks.p99.duration_ms == max(o.duration_ms for o in found)
    fig, axes = plt.subplots(2, 1)
    for ax, o in zip(axes, (picks.median, picks.p99), strict=True):
        waterfall.draw(ax, o, "a-to-b", lambda service: "tab:blue")
    fig.savefig(tmp_path / "waterfall.png")
    plt.close(fig)
    assert (tmp_path / "waterfall.png").stat().st_size > 10_000


def test_a_traced_topology_run_keeps_each_cells_traces_and_the_report_draws_them(
    chain: Services, jaeger_ports: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = jaeger_ports
    scenario = tmp_path / "a2b.toml"
    scenario.write_text(A_TO_B)
    # A compose project no container has: the runner cannot read the edges' environment here,
    # so it tries the Jaeger it is given.
    project = f"wirelab-none-{uuid.uuid4().hex[:8]}"
    args = [*chain.args(tmp_path / "results"), "--progress", "off", "--jaeger-url", url,
            "--compose-project", project]  # fmt: skip
    code = main(["bench", str(scenario), *args])
    (run,) = (tmp_path / "results").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == 0, manifest.get("interrupted") or manifest.get("gates")
    traces = manifest["traces"]
    assert traces["captured"] is True and traces["jaeger_url"] == url
    assert traces["on"] is None and "environment not read" in traces["source"]
    assert set(traces["cells"]) == set(manifest["cells_done"])
    for cell, kept in traces["cells"].items():
        doc = json.loads((run / "traces" / f"{cell}.json").read_text())
        assert kept["traces"] == len(doc["traces"]) >= waterfall.MIN_FOR_P99, (cell, kept)
        assert doc["service"] in ("rest", "grpc")
    html = render(run, tmp_path / "report").read_text()
    nb = json.loads((tmp_path / "report" / "report.ipynb").read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors, errors
    assert "Hop by hop: a median and a p99 order" in html
    assert (
        "traced orders of the" in html
        and "sampling ratio unknown (rest's environment not read" in html
    )
    for proto in ("rest", "grpc"):
        assert (tmp_path / "report" / f"waterfall_a-to-b_{proto}_2.png").is_file()
        assert f"<strong>{proto}, 2 users</strong> (repetitions pooled)" in html
    assert html.count("The median order (trace <code>") == html.count("The p99 order (trace") == 2
    assert "against the hop histogram's p99 of" in html
    assert "edge → downstream call p99" in html

    # The REST cells again as a Node.js edge's (a runtimes scenario), with five traced orders a
    # cell, as a low ratio leaves: drawn apart, never pooled, and with no p99 named.
    mixed = tmp_path / "mixed"
    shutil.copytree(run, mixed)
    tidy = pd.read_csv(mixed / "tidy.csv")
    node = tidy[tidy.protocol == "rest"].assign(runtime="node")
    node["cell_id"] = node.cell_id + "_node"
    pd.concat([tidy, node]).to_csv(mixed / "tidy.csv", index=False)
    hist = pd.read_csv(mixed / "histograms.csv")
    copied = hist[hist.cell_id.isin(tidy[tidy.protocol == "rest"].cell_id)]
    pd.concat([hist, copied.assign(cell_id=copied.cell_id + "_node")]).to_csv(
        mixed / "histograms.csv", index=False
    )
    for cell in node.cell_id:
        doc = json.loads((mixed / "traces" / f"{cell.removesuffix('_node')}.json").read_text())
        (mixed / "traces" / f"{cell}.json").write_text(
            json.dumps({**doc, "traces": doc["traces"][:5]})
        )
    html = render(mixed, tmp_path / "mixed-report").read_text()
    for arm in ("rest", "rest-node", "grpc"):
        assert f"<strong>{arm}, 2 users</strong> (repetitions pooled)" in html, arm
        assert (tmp_path / "mixed-report" / f"waterfall_a-to-b_{arm}_2.png").is_file(), arm
    assert "<strong>rest-node, 2 users</strong> (repetitions pooled): 5 traced orders" in html
    assert html.count("(under 20) a p99 order is not meaningful: only the median is drawn") == 1
    assert html.count("The median order (trace <code>") == 3
    assert html.count("The p99 order (trace <code>") == 2

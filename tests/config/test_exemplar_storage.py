"""The lab's Prometheus stores the services' exemplars and they name traces Jaeger has
(docs/traces.md#exemplars): the pinned Prometheus release (offline/go-build), started with
compose's command line, scrapes a REST and a gRPC service traced at ratio 1 and exporting to the
Jaeger stand-in; after a few orders to each, /api/v1/query_exemplars returns trace ids of their
duration histograms, negotiated as OpenMetrics by Prometheus's default scrape protocols (no
scrape_protocols in the config), so does the exemplar query of Grafana's server latency panel,
and Jaeger's API returns each of those traces. Everything runs
in a network namespace of its own (loopback only), so the fixed ports collide with nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.config.queries import dashboard_queries
from tests.config.test_pinned_flags import compose_config
from tests.gobuild import REPO, go_build

pytestmark = pytest.mark.integration

# Inside the namespace, with Jaeger started: the two services, Prometheus, the orders, then what
# Prometheus and Jaeger answer, printed as JSON.
DRIVER = """
import json, os, subprocess, sys, time, urllib.parse, urllib.request
import grpc
from wirelab.v1 import wirelab_pb2 as pb, wirelab_pb2_grpc as pb_grpc

def get(url):
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.read()

def until(ready, what, seconds=60):
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = ready()
            if found:
                return found
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f"no {what} within {seconds} s")
        time.sleep(0.5)

until(lambda: get("http://127.0.0.1:13133/status"), "Jaeger")
traced = {"WIRELAB_HOST": "127.0.0.1", "WIRELAB_TRACES": "on", "WIRELAB_TRACE_SAMPLE_RATIO": "1",
          "WIRELAB_TRACES_ENDPOINT": "http://127.0.0.1:4318"}
procs = [
    subprocess.Popen([sys.executable, "-m", module], env={**os.environ, **traced, **env},
                     stdout=subprocess.DEVNULL, stderr=open(os.environ["LOGS"] + module, "wb"))
    for module, env in (
        ("wirelab.rest", {"WIRELAB_REST_PORT": "8000", "WIRELAB_METRICS_PORT": "9100"}),
        ("wirelab.rpc", {"WIRELAB_GRPC_PORT": "50051", "WIRELAB_METRICS_PORT": "9101"}),
    )
]
prometheus = subprocess.Popen(json.loads(os.environ["PROMETHEUS_ARGS"]), stdout=subprocess.DEVNULL,
                              stderr=open(os.environ["LOGS"] + "prometheus", "wb"))
try:
    until(lambda: get("http://127.0.0.1:8000/healthz"), "REST service")
    until(lambda: get("http://127.0.0.1:9090/-/ready"), "Prometheus")
    order = {"order_id": "o-1", "items": [{"sku": "a", "quantity": 1, "unit_price_cents": 1}]}
    with grpc.insecure_channel("127.0.0.1:50051") as channel:
        stub = pb_grpc.WireLabStub(channel)
        for _ in range(5):
            request = urllib.request.Request("http://127.0.0.1:8000/v1/orders",
                                             data=json.dumps({"order": order}).encode(),
                                             headers={"Content-Type": "application/json"})
            get(request)
            stub.ProcessOrder(pb.OrderRequest(order=pb.Order(order_id="o-2")), timeout=10)

    def exemplars(expr="wirelab_server_request_duration_seconds_bucket"):
        now = time.time()
        query = urllib.parse.urlencode({"query": expr, "start": now - 600, "end": now + 60})
        data = json.loads(get("http://127.0.0.1:9090/api/v1/query_exemplars?" + query))["data"]
        found = {s["seriesLabels"]["job"]: s["exemplars"] for s in data}
        return found if set(found) == {"rest", "grpc"} else None

    stored = until(exemplars, "exemplars in Prometheus")
    panel = sorted(exemplars(os.environ["PANEL_QUERY"]) or {})
    ids = {e["labels"]["trace_id"] for series in stored.values() for e in series}
    traces = {}
    for trace_id in sorted(ids):
        found = until(lambda: json.loads(get(f"http://127.0.0.1:16686/api/traces/{trace_id}"))["data"],
                      f"trace {trace_id} in Jaeger")
        traces[trace_id] = [s["operationName"] for t in found for s in t["spans"]]
    print(json.dumps({"stored": stored, "traces": traces, "panel": panel}))
finally:
    for proc in (*procs, prometheus):
        proc.terminate()
        proc.wait(15)
"""
CONFIG = """global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: rest
    static_configs: [{targets: ["127.0.0.1:9100"], labels: {runtime: python}}]
  - job_name: grpc
    static_configs: [{targets: ["127.0.0.1:9101"], labels: {runtime: python}}]
"""
# The exemplars-only target of REST vs gRPC's server latency panel, as Grafana sends it with the
# dashboard's defaults (runtime python, kind unary).
(PANEL,) = [
    q.expr
    for q in dashboard_queries()
    if "'Latency, server side'" in q.source and q.template.endswith(" < 0")
]


def prometheus_args(binary: Path, folder: Path) -> list[str]:
    """Compose's command line for the lab's Prometheus, its config and storage here."""
    command = compose_config("")["services"]["prometheus"]["command"]
    assert "--enable-feature=exemplar-storage" in command  # else no exemplar is kept
    config = folder / "prometheus.yml"
    config.write_text(CONFIG)
    kept = [a for a in command if not a.startswith(("--config.file=", "--storage.tsdb.path="))]
    return [str(binary), f"--config.file={config}", f"--storage.tsdb.path={folder / 'tsdb'}", *kept]


def test_prometheus_stores_the_services_exemplars_and_jaeger_has_their_traces(
    tmp_path: Path,
) -> None:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("the test needs unshare (util-linux) and ip (iproute2)")
    jaeger = go_build("jaeger") / "jaeger"
    args = prometheus_args(go_build("prometheus") / "prometheus", tmp_path)
    namespace = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "-rn"]
    harness = 'ip link set lo up; "$JAEGER" >/dev/null 2>&1 & "$PYTHON" -c "$DRIVER"; s=$?; kill $!'
    harness += "; exit $s"
    env = {
        **os.environ,
        "JAEGER": str(jaeger),
        "PYTHON": sys.executable,
        "DRIVER": DRIVER,
        "PROMETHEUS_ARGS": json.dumps(args),
        "PANEL_QUERY": PANEL,
        "LOGS": f"{tmp_path}/",
    }
    done = subprocess.run(
        [*namespace, "bash", "-c", harness],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    logs = {
        p.name: p.read_text(errors="replace")[-1500:] for p in tmp_path.glob("*") if p.is_file()
    }
    assert done.returncode == 0, (done.stderr[-3000:], logs)
    read = json.loads(done.stdout.splitlines()[-1])
    # Only the OpenMetrics page has exemplars: Prometheus asked for it by default.
    for exemplars in read["stored"].values():
        for exemplar in exemplars:
            assert re.fullmatch(r"[0-9a-f]{32}", exemplar["labels"]["trace_id"]), exemplar
    # Grafana's latency panel finds them too: its exemplar query selects the raw buckets.
    assert read["panel"] == ["grpc", "rest"]
    assert read["traces"] and all(
        names in (["POST /v1/orders"], ["/wirelab.v1.WireLab/ProcessOrder"])
        for names in read["traces"].values()
    ), read["traces"]

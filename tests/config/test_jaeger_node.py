"""The Jaeger stand-in takes the Node.js services' spans as they export them (OTLP/HTTP, the SDK's
exporter in node/src/traces.js) and its query API returns an order through a Node relay and its
Node B as one trace (docs/traces.md). Run, as tests/config/test_jaeger.py runs it, in a network
namespace of its own (loopback only), with the services as real processes in it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.gobuild import REPO, go_build
from tests.node.conftest import NODE_DIR, node_binary

pytestmark = pytest.mark.integration

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
# Inside the namespace: wait for Jaeger's health, start B and its relay A (ports 8001, 8000),
# send one order with a sampled traceparent, stop both (SIGTERM's drain exports their spans),
# then read the trace back from the query API; prints what it read as JSON.
CLIENT = """
import json, os, signal, subprocess, time, urllib.error, urllib.request

def get(url, data=None, headers={}):
    request = urllib.request.Request(url, data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=5) as reply:
        return reply.read()

def until(check):
    deadline = time.monotonic() + 30
    while True:
        try:
            return check()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)

until(lambda: get("http://127.0.0.1:13133/status"))
started = []
for name, port, metrics, downstream in (("rest-node-b", 8001, 9101, ""),
                                         ("rest-node", 8000, 9100, "http://127.0.0.1:8001")):
    env = {**os.environ, "WIRELAB_HOST": "127.0.0.1", "WIRELAB_REST_PORT": str(port),
           "WIRELAB_METRICS_PORT": str(metrics), "WIRELAB_DOWNSTREAM": downstream,
           "WIRELAB_TRACES": "on", "WIRELAB_SERVICE_NAME": name}
    started.append(subprocess.Popen([os.environ["NODE"], os.environ["MAIN"]], env=env))
    until(lambda: get(f"http://127.0.0.1:{port}/healthz"))
parent = "00-" + os.environ["TRACE"] + "-00f067aa0ba902b7-01"
order = json.dumps({"order": {"order_id": "jaeger", "note": "one two"}, "count_words": True})
answer = json.loads(get("http://127.0.0.1:8000/v1/orders", order.encode(),
                        {"content-type": "application/json", "traceparent": parent}))
codes = []
for process in reversed(started):
    process.send_signal(signal.SIGTERM)
    codes.append(process.wait(timeout=20))
trace = []
deadline = time.monotonic() + 30
while len(trace[0]["spans"] if trace else []) < 3 and time.monotonic() < deadline:
    time.sleep(0.5)
    try:
        trace = json.loads(get(f"http://127.0.0.1:16686/api/traces/{os.environ['TRACE']}"))["data"]
    except urllib.error.HTTPError:  # 404 until its spans have arrived
        trace = []
print(json.dumps({"answer": answer, "codes": codes, "trace": trace}))
"""


def test_the_stand_in_takes_an_order_through_node_services_as_one_trace() -> None:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("the test needs unshare (util-linux) and ip (iproute2)")
    node = node_binary()
    jaeger = go_build("jaeger") / "jaeger"
    namespace = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "-rn"]
    harness = 'ip link set lo up; "$JAEGER" >/dev/null 2>&1 & "$PYTHON" -c "$CLIENT"; kill $!'
    env = {
        **os.environ,
        "JAEGER": str(jaeger),
        "PYTHON": sys.executable,
        "CLIENT": CLIENT,
        "NODE": node,
        "MAIN": str(NODE_DIR / "src" / "rest" / "main.js"),
        "TRACE": TRACE,
    }
    done = subprocess.run(
        [*namespace, "bash", "-c", harness],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.splitlines()[-1])
    assert read["answer"]["word_count"] == 2 and read["codes"] == [0, 0]
    ((trace,),) = [read["trace"]]
    assert trace["traceID"] == TRACE
    assert len(trace["spans"]) == 3
    for span in trace["spans"]:
        assert span["operationName"] == "POST /v1/orders"
        tags = {t["key"]: t["value"] for t in span["tags"]}
        assert tags["wirelab.runtime"] == "node" and tags["wirelab.protocol"] == "rest"
    kind = {s["spanID"]: next(t["value"] for t in s["tags"] if t["key"] == "span.kind")
            for s in trace["spans"]}  # fmt: skip
    parent = {s["spanID"]: [r["spanID"] for r in s["references"]] for s in trace["spans"]}
    service = {s["spanID"]: trace["processes"][s["processID"]]["serviceName"]
               for s in trace["spans"]}  # fmt: skip
    (edge,) = [i for i in parent if parent[i] == ["00f067aa0ba902b7"]]  # the caller's span
    (call,) = [i for i in parent if parent[i] == [edge]]
    (b,) = [i for i in parent if parent[i] == [call]]
    assert [(service[i], kind[i]) for i in (edge, call, b)] == [
        ("rest-node", "server"),
        ("rest-node", "client"),
        ("rest-node-b", "server"),
    ]

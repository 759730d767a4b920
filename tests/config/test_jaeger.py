"""The Jaeger stand-in (offline/go-build jaeger, the pinned release built from source) takes the
services' spans as wirelab.traces exports them (OTLP/HTTP) and its query API returns them, the
API the docs and the e2e checks read (docs/traces.md): /api/services, /api/traces/<id>. It has
no web UI: / is Jaeger's placeholder page. Run in a network namespace of its own (loopback only),
so its many ports collide with nothing on the host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.gobuild import REPO, go_build

pytestmark = pytest.mark.integration

# Inside the namespace: wait for the health extension, export one traced call as a service would,
# then read it back from the query API and the UI's address; prints what it read as JSON.
CLIENT = """
import json, sys, time, urllib.request
from wirelab import settings
from wirelab.traces import start

def get(path):
    with urllib.request.urlopen("http://127.0.0.1" + path, timeout=5) as reply:
        return reply.read()

deadline = time.monotonic() + 30
while True:
    try:
        get(":13133/status")
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
environ = {"WIRELAB_TRACES": "on", "WIRELAB_TRACE_SAMPLE_RATIO": "1",
           "WIRELAB_SERVICE_NAME": "rest-check"}
tracing = start(settings.load([], environ=environ), "rest")
with tracing.tracer.start_as_current_span("POST /v1/orders") as span:
    trace_id = f"{span.get_span_context().trace_id:032x}"
tracing.shutdown()
services = []
while "rest-check" not in services and time.monotonic() < deadline + 30:
    time.sleep(0.5)
    services = json.loads(get(":16686/api/services"))["data"] or []
trace = json.loads(get(f":16686/api/traces/{trace_id}"))["data"]
print(json.dumps({"services": services, "trace_id": trace_id, "trace": trace,
                  "ui": get(":16686/").decode(errors="replace")}))
"""


def test_the_stand_in_takes_otlp_from_the_services_and_answers_its_query_api() -> None:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("the test needs unshare (util-linux) and ip (iproute2)")
    jaeger = go_build("jaeger") / "jaeger"
    namespace = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "-rn"]
    harness = 'ip link set lo up; "$JAEGER" >/dev/null 2>&1 & "$PYTHON" -c "$CLIENT"; kill $!'
    env = {**os.environ, "JAEGER": str(jaeger), "PYTHON": sys.executable, "CLIENT": CLIENT}
    done = subprocess.run(
        [*namespace, "bash", "-c", harness],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.splitlines()[-1])
    assert "rest-check" in read["services"]
    ((trace,),) = [read["trace"]]
    assert trace["traceID"] == read["trace_id"]
    (span,) = trace["spans"]
    assert span["operationName"] == "POST /v1/orders"
    tags = {t["key"]: t["value"] for t in span["tags"]}
    assert tags["wirelab.service"] == "rest-check" and tags["wirelab.runtime"] == "python"
    assert trace["processes"][span["processID"]]["serviceName"] == "rest-check"
    assert "placeholder for the Jaeger UI" in read["ui"]

"""k6 runs of the small order call at a constant arrival rate (k6/order.js), as figures."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wirelab_bench.knobs import REPO

SCRIPT = REPO / "k6" / "order.js"
PROTO_ROOT = REPO / "proto"


@dataclass(frozen=True)
class K6Run:
    """One open-loop run: what was offered, what was answered and how fast, what never started.

    k6's constant-arrival-rate executor starts each call at its scheduled time on a free VU; with
    none free the call is not started late but dropped and counted (``dropped``), so every
    latency is measured from the intended start and the schedule's misses are explicit.
    """

    offered_per_s: float
    answered_per_s: float
    median_ms: float
    mean_ms: float
    p99_ms: float
    dropped: int
    failed: int

    @property
    def on_time(self) -> bool:
        """Every call started on schedule and answered as offered (within 5 %)."""
        return self.dropped == 0 and self.answered_per_s >= 0.95 * self.offered_per_s


def figures(summary: dict[str, Any], protocol: str, rate: float, seconds: float) -> K6Run:
    """The run's figures from k6's --summary-export JSON."""
    metrics = summary["metrics"]
    trend = metrics["grpc_req_duration" if protocol == "grpc" else "http_req_duration"]
    return K6Run(
        offered_per_s=rate,
        answered_per_s=trend["count"] / seconds,
        median_ms=trend["med"],
        mean_ms=trend["avg"],
        p99_ms=trend["p(99)"],
        dropped=int(metrics.get("dropped_iterations", {}).get("count", 0)),
        failed=int(metrics["checks"]["fails"]),
    )


def run_k6(
    binary: str, protocol: str, target: str, body: dict[str, Any], rate: float, vus: int,
    seconds: int, cpu: int | None = None,
) -> K6Run:  # fmt: skip
    """k6/order.js against ``target`` (http://host:port or host:port) for ``seconds``."""
    env = {
        **os.environ,
        "WIRELAB_PROTOCOL": protocol,
        "WIRELAB_TARGET": target,
        "WIRELAB_RATE": f"{rate:g}",
        "WIRELAB_VUS": str(vus),
        "WIRELAB_SECONDS": str(seconds),
        "WIRELAB_BODY": json.dumps(body),
        "WIRELAB_PROTO_ROOT": str(PROTO_ROOT),
        "K6_NO_USAGE_REPORT": "true",
    }
    taskset = [] if cpu is None else ["taskset", "--cpu-list", str(cpu)]
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.json"
        cmd = [*taskset, binary, "run", "--quiet", "--no-color", "--summary-export", str(summary)]
        done = subprocess.run([*cmd, str(SCRIPT)], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"k6 failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return figures(json.loads(summary.read_text()), protocol, rate, seconds)

"""k6 runs of the small order call at a constant arrival rate (k6/order.js), as figures."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wirelab_bench.knobs import REPO

SCRIPT = REPO / "k6" / "order.js"
# Where _k6 adds k6's CPU-seconds (this process's children's, over the run) to its summary.
CLIENT_CPU_KEY = "wirelab_client_cpu_s"
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
    # k6's own CPU-seconds per second of the run: near 1, the generator (one core) set the pace.
    client_cpu: float = 0.0

    @property
    def on_time(self) -> bool:
        """Every call started on schedule and answered as offered (within 5 %)."""
        return self.dropped == 0 and self.answered_per_s >= 0.95 * self.offered_per_s


def figures(
    summary: dict[str, Any], protocol: str, rate: float, seconds: float, ticks_per_call: int = 1
) -> K6Run:
    """The run's figures from k6's --summary-export JSON. With Poisson arrivals (``ticks_per_call``
    ticks per call, see ticks_for) a dropped tick would have sent a call with probability
    1/ticks_per_call: ``dropped`` is then the expected number of calls dropped, rounded up."""
    metrics = summary["metrics"]
    trend = metrics["grpc_req_duration" if protocol == "grpc" else "http_req_duration"]
    ticks = int(metrics.get("dropped_iterations", {}).get("count", 0))
    return K6Run(
        offered_per_s=rate,
        answered_per_s=trend["count"] / seconds,
        median_ms=trend["med"],
        mean_ms=trend["avg"],
        p99_ms=trend["p(99)"],
        dropped=-(-ticks // ticks_per_call),
        failed=int(metrics["checks"]["fails"]),
        client_cpu=summary.get(CLIENT_CPU_KEY, 0.0) / seconds,
    )


ARRIVALS = ("constant", "poisson")


def ticks_for(arrivals: str, rate: float, ticks_per_call: int) -> dict[str, str]:
    """k6/order.js's schedule for ``rate`` calls/s: constant, one call per tick; or Poisson,
    approximated by ``ticks_per_call`` ticks per call each sending it with probability
    1/ticks_per_call (a Bernoulli process on a grid of 1/(rate x ticks_per_call) s: calls per
    interval have (1 - 1/ticks_per_call) of a Poisson process's variance)."""
    if arrivals == "constant":
        return {"WIRELAB_RATE": f"{rate:g}"}
    if arrivals != "poisson" or ticks_per_call < 2:
        raise ValueError(f"arrivals {arrivals!r} with {ticks_per_call} ticks per call")
    fire = 1 / ticks_per_call
    return {"WIRELAB_RATE": f"{rate * ticks_per_call:g}", "WIRELAB_FIRE": f"{fire:.6g}"}


def run_k6(
    binary: str, protocol: str, target: str, body: dict[str, Any], rate: float, vus: int,
    seconds: int, cpu: int | None = None, arrivals: str = "constant", ticks_per_call: int = 4,
) -> K6Run:  # fmt: skip
    """k6/order.js against ``target`` (http://host:port or host:port) for ``seconds``, ``rate``
    calls/s arriving evenly spaced or as a Poisson process (``arrivals``)."""
    schedule = ticks_for(arrivals, rate, ticks_per_call)
    summary = _k6(binary, protocol, target, body, vus, seconds, schedule, cpu)
    per_call = 1 if arrivals == "constant" else ticks_per_call
    return figures(summary, protocol, rate, seconds, per_call)


@dataclass(frozen=True)
class ClosedRun:
    """One closed-loop run: ``users`` each sending the next order once the last is answered.

    ``confirmed_per_s`` counts the orders answered within the threshold; ``failed`` those
    answered with an error plus those answered later than it (``late``), as the order-chain
    study counted failed orders. Percentiles are of every answered call.
    """

    users: int
    answered_per_s: float
    confirmed_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    failed: int
    late: int


def run_k6_closed(
    binary: str, protocol: str, target: str, body: dict[str, Any], users: int, seconds: int,
    fail_over_ms: float, cpu: int | None = None,
) -> ClosedRun:  # fmt: skip
    """k6/order.js as a closed loop of ``users`` (constant-vus) against ``target``."""
    extra = {"WIRELAB_EXECUTOR": "constant-vus", "WIRELAB_FAIL_OVER_MS": f"{fail_over_ms:g}"}
    summary = _k6(binary, protocol, target, body, users, seconds, extra, cpu)
    return closed_figures(summary, protocol, users, seconds)


def closed_figures(summary: dict[str, Any], protocol: str, users: int, seconds: int) -> ClosedRun:
    """A closed-loop run's figures from k6's --summary-export JSON (``orders_late`` is absent
    when no order was late)."""
    metrics = summary["metrics"]
    trend = metrics["grpc_req_duration" if protocol == "grpc" else "http_req_duration"]
    errors = int(metrics["checks"]["fails"])
    late = int(metrics.get("orders_late", {}).get("count", 0))
    answered = trend["count"]
    return ClosedRun(
        users=users,
        answered_per_s=answered / seconds,
        confirmed_per_s=(answered - errors - late) / seconds,
        p50_ms=trend["med"],
        p95_ms=trend["p(95)"],
        p99_ms=trend["p(99)"],
        failed=errors + late,
        late=late,
    )


def _k6(
    binary: str, protocol: str, target: str, body: dict[str, Any], vus: int, seconds: int,
    extra: dict[str, str], cpu: int | None,
) -> dict[str, Any]:  # fmt: skip
    """Run k6/order.js with these settings; its --summary-export JSON."""
    env = {
        **os.environ,
        "WIRELAB_PROTOCOL": protocol,
        "WIRELAB_TARGET": target,
        "WIRELAB_VUS": str(vus),
        "WIRELAB_SECONDS": str(seconds),
        "WIRELAB_BODY": json.dumps(body),
        "WIRELAB_PROTO_ROOT": str(PROTO_ROOT),
        "K6_NO_USAGE_REPORT": "true",
        **extra,
    }
    taskset = [] if cpu is None else ["taskset", "--cpu-list", str(cpu)]
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.json"
        cmd = [*taskset, binary, "run", "--quiet", "--no-color", "--summary-export", str(summary)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run([*cmd, str(SCRIPT)], capture_output=True, text=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(f"k6 failed ({done.returncode}):\n{done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(summary.read_text())
        used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        result[CLIENT_CPU_KEY] = used
        return result

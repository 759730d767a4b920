"""Benchmark: head-of-line blocking on an event loop, and what more loops or threads do about it.

The event-loop study's question (docs/studies.md): a server on one event loop runs every call on
it, so a call that computes holds the small ones behind it. Each arm is a REST service pinned to
one core, loaded from the other by two wrk processes at once for ``--seconds``: ``--heavy``
connections fetching a ``--blob``-byte blob as JSON (GET /v1/blobs/json: base64 and JSON
encoding on the server's CPU) and ``--light`` connections POSTing the small order, whose p50 and
p99 (wrk's, closed loop) are the figures. Arms (``--arms``):

- ``node``: the Node.js service, one event loop;
- ``node-cluster``: the same with ``--workers`` loops (WIRELAB_NODE_WORKERS, Node's cluster
  module: connections handed to the loops in turn), all on the one core;
- ``python-async``: the Python service on uvicorn, ``async def`` handlers on one loop;
- ``python-threads``: the same with ``sync`` handlers, run in a thread pool
  (WIRELAB_REST_HANDLERS=sync).

Every round starts each arm afresh, in an order that rotates, and runs the same load; the summary
is the median over rounds of each figure and of each arm's ratio to the first arm in the same
round. The Node arms also report ``nodejs_eventloop_lag_p99_seconds`` over the loaded window
(prom-client resets its lag histogram at each scrape; scraped just before and after).
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass

from wirelab_bench.knobs import parser
from wirelab_bench.medians import median_interval
from wirelab_bench.scrape import scrape

from wirelab_perf.loadtools import Load, wrk
from wirelab_perf.node import SERVICES, node_process
from wirelab_perf.svcprocs import CLIENT_CPU, SERVER_CPU, Service, service

ARMS = ("node", "node-cluster", "python-async", "python-threads")
LAG = "nodejs_eventloop_lag_p99_seconds"


@dataclass(frozen=True)
class Result:
    """One arm's loaded run: the small orders (wrk's), heavy calls answered per second, and the
    event loop's p99 lag over the run (None where the server has no such series)."""

    light: Load
    heavy_per_s: float
    lag_p99_ms: float | None
    cpu_s: float


Starter = Callable[[], AbstractContextManager[Service]]


def arm_starter(name: str, node: str, workers: int) -> Starter:
    if name == "node":
        return lambda: node_process(node, "rest", SERVICES["rest"], "on")
    if name == "node-cluster":
        return lambda: node_process(node, "rest", SERVICES["rest"], "on", workers)
    if name == "python-async":
        return lambda: service("rest", SERVER_CPU)
    return lambda: service("rest", SERVER_CPU, ["--rest-handlers", "sync"])


def heavy_calls(url: str, connections: int, seconds: int) -> int:
    """GETs of ``url`` from ``connections`` connections for ``seconds``, every one answered 2xx."""
    cmd = ["taskset", "--cpu-list", str(CLIENT_CPU), "wrk", "-t1", f"-c{connections}"]
    cmd += [f"-d{seconds}s", "--timeout=10s", url]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors on the heavy calls:\n{out}")
    match = re.search(r"(\d+) requests in", out)
    assert match, out
    return int(match.group(1))


def lag_ms(svc: Service) -> float | None:
    found = [v for name, _, v in scrape(svc.metrics_url, "eventloop") if name == LAG]
    return found[0] * 1e3 if found else None


def measure(svc: Service, light: int, heavy: int, blob: int, seconds: int) -> Result:
    wrk(svc.address, light, 1)  # warm: connections, JIT, first replies
    lag_ms(svc)  # resets prom-client's lag histogram: the next reading is this run's
    cpu = svc.cpu_seconds()
    with ThreadPoolExecutor(2) as pool:
        heavy_done = (
            pool.submit(heavy_calls, f"{svc.address}/v1/blobs/json?size={blob}", heavy, seconds)
            if heavy
            else None
        )
        small = pool.submit(wrk, svc.address, light, seconds)
        load = small.result()
        answered = heavy_done.result() if heavy_done else 0
    if load.errors:
        raise RuntimeError(f"small orders failed: {dict(load.errors)}")
    return Result(load, answered / seconds, lag_ms(svc), svc.cpu_seconds() - cpu)


def rotation(arms: Sequence[str], r: int) -> list[str]:
    """Round ``r``'s order: the arms rotated by ``r``, so each runs first as often as the others."""
    k = r % len(arms)
    return [*arms[k:], *arms[:k]]


def rounds_of(
    arms: Sequence[str], rounds: int, run: Callable[[str], Result]
) -> Iterator[dict[str, Result]]:
    for r in range(rounds):
        got = {}
        for name in rotation(arms, r):
            got[name] = run(name)
            res = got[name]
            lag = f"{res.lag_p99_ms:6.1f}" if res.lag_p99_ms is not None else "     -"
            print(f"round {r} {name:15} small p50 {res.light.p50_ms:7.2f} ms p99 "
                  f"{res.light.p99_ms:7.2f} ms {res.light.ok_per_second:8.1f}/s | heavy "
                  f"{res.heavy_per_s:6.1f}/s | lag p99 {lag} ms | CPU {res.cpu_s:5.2f} s",
                  flush=True)  # fmt: skip
        yield got


FIGURES: dict[str, Callable[[Result], float | None]] = {
    "small p50 ms": lambda r: r.light.p50_ms,
    "small p99 ms": lambda r: r.light.p99_ms,
    "small/s": lambda r: r.light.ok_per_second,
    "heavy/s": lambda r: r.heavy_per_s,
    "lag p99 ms": lambda r: r.lag_p99_ms,
}


def summary(arms: Sequence[str], runs: list[dict[str, Result]]) -> list[str]:
    """Per arm and figure: the median over rounds, and the median of the round-by-round ratio
    to the first arm with its 95 % interval."""
    ref = arms[0]
    lines = []
    for figure, read in FIGURES.items():
        lines.append(f"\n{figure}  (median; ratio to {ref} in the same round [95 % interval])")
        for name in arms:
            values = [read(run[name]) for run in runs]
            if any(v is None for v in values):
                lines.append(f"  {name:15} -")
                continue
            own = statistics.median(v for v in values if v is not None)
            text = f"  {name:15} {own:9.2f}"
            base = [read(run[ref]) for run in runs]
            if name != ref and all(b for b in base):
                ratios = [v / b for v, b in zip(values, base, strict=True) if v is not None and b]
                low, high = median_interval(ratios)
                text += f"   x{statistics.median(ratios):.2f} [{low:.2f}-{high:.2f}]"
            lines.append(text)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    prog = "wirelab perf eventloop"
    cli = parser(prog, __doc__, "WIRELAB_EVENTLOOP")
    args = cli.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown or not arms or args.light < 1 or args.workers < 2 or args.rounds < 1:
        cli.error(f"arms from {', '.join(ARMS)}; --light >= 1, --workers >= 2, --rounds >= 1")
    node = args.node or shutil.which("node") or ""
    if not node and any(a.startswith("node") for a in arms):
        cli.error("node not found: install Node.js 20 (or pass --node)")
    print(f"server CPU {SERVER_CPU}, wrk on CPU {CLIENT_CPU}: {args.light} connections of small "
          f"orders beside {args.heavy} fetching {args.blob} B as JSON, {args.seconds}s per run, "
          f"{args.rounds} rounds", flush=True)  # fmt: skip
    starters = {name: arm_starter(name, node, args.workers) for name in arms}

    def run(name: str) -> Result:
        with starters[name]() as svc:
            return measure(svc, args.light, args.heavy, args.blob, args.seconds)

    runs = list(rounds_of(arms, args.rounds, run))
    print("\n".join(summary(arms, runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

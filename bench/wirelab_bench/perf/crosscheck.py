"""Benchmark: wirelab-loadgen's and Locust's small-call medians vs ghz and wrk at one load."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from wirelab_locust.content import order_request

from wirelab_bench.histo import buckets, quantile
from wirelab_bench.knobs import REPO, parser
from wirelab_bench.loadgen import run_open
from wirelab_bench.perf.locust_overhead import (
    LAB_LOCUSTFILE,
    Lab,
    arm_args,
    exit_on_sigterm,
    run_locust,
    services,
)
from wirelab_bench.perf.svcprocs import CLIENT_CPU, free_port, pinned
from wirelab_bench.scrape import scrape

WRK_SCRIPT = Path(__file__).with_name("wrk_paced.lua")
PROTO = REPO / "proto" / "wirelab" / "v1" / "wirelab.proto"
BODY = order_request()
# (flag, type, default, help); each also reads WIRELAB_CROSSCHECK_<FLAG>.


@dataclass(frozen=True)
class Figures:
    tool: str
    rate: float
    median_ms: float
    mean_ms: float
    note: str = ""


def ghz(binary: str, lab: Lab, rate: float, conns: int, seconds: int) -> Figures:
    # The .proto rather than server reflection (which works too): the contract file is the
    # source of truth, and the server under test then answers no reflection calls.
    cmd = [binary, "--insecure", "--proto", str(PROTO), "--import-paths", str(PROTO.parents[2])]
    cmd += ["--call", "wirelab.v1.WireLab.ProcessOrder", "-d", json.dumps(BODY)]
    cmd += ["--rps", f"{rate:g}", "-c", str(conns), "--connections", str(conns)]
    cmd += ["-z", f"{seconds}s", "-O", "json", lab.grpc]
    done = subprocess.run(pinned(cmd, CLIENT_CPU), check=True, capture_output=True)
    out = json.loads(done.stdout)
    p50 = next(d["latency"] for d in out["latencyDistribution"] if d["percentage"] == 50)
    return Figures("ghz", out["rps"], p50 / 1e6, out["average"] / 1e6)


def wrk(lab: Lab, rate: float, conns: int, seconds: int) -> Figures:
    # Each connection pauses between calls so that conns / pause ~= rate (latency adds a little).
    env = {
        **os.environ,
        "WIRELAB_WRK_BODY": json.dumps(BODY),
        "WIRELAB_WRK_DELAY_MS": f"{conns * 1000 / rate:.0f}",
    }
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", str(WRK_SCRIPT)]
    out = subprocess.run(
        pinned([*cmd, f"{lab.rest}/v1/orders"], CLIENT_CPU),
        check=True,
        capture_output=True,
        text=True,
        env=env,
    ).stdout
    median = _duration_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M))
    mean = _duration_ms(re.search(r"^\s+Latency\s+(\S+)", out, re.M))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    return Figures("wrk", rps, median, mean)


def loadgen(binary: str, protocol: str, lab: Lab, rate: float, conns: int, seconds: int) -> Figures:
    """wirelab-loadgen at a constant arrival rate (open loop) from ``conns`` workers; median and
    mean from the generator's own summary."""
    target = lab.grpc if protocol == "grpc" else lab.rest
    r = run_open(binary, protocol, target, BODY, rate, conns, seconds, CLIENT_CPU)
    note = f"{r.dropped} calls not started on time, {r.failed} failed"
    return Figures("loadgen", r.answered_per_s, r.median_ms, r.mean_ms, note)


def _duration_ms(match: re.Match[str] | None) -> float:
    if match is None:
        raise ValueError("wrk output without latency figures")
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", match.group(1)).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def locust(protocol: str, lab: Lab, rate: float, users: int, seconds: int) -> Figures:
    """The lab's user, paced to ``rate``; median from its client histogram (50 µs buckets) and
    from Locust's own stats (whole milliseconds below 100 ms)."""
    web, metrics = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(LAB_LOCUSTFILE),
            "--autostart",
            "--autoquit",
            "30",
        ]
        cmd += [
            "-t",
            f"{seconds}s",
            "-u",
            str(users),
            "-r",
            str(users),
            "--pace",
            f"{rate / users:g}",
        ]
        cmd += ["-H", lab.rest, "--rest-host", lab.rest, "--grpc-target", lab.grpc]
        cmd += [
            "--protocols",
            protocol,
            "--mix",
            "unary=1",
            "--web-host",
            "127.0.0.1",
            "--web-port",
            str(web),
        ]
        cmd += [
            "--metrics-bind",
            "127.0.0.1",
            "--metrics-port",
            str(metrics),
            "--loglevel",
            "WARNING",
        ]
        proc = subprocess.Popen(
            pinned(cmd, CLIENT_CPU),
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            stats = _wait_stopped(f"http://127.0.0.1:{web}/stats/requests", seconds + 30)
            snap = {
                (n, tuple(sorted((k, v) for k, v in ls.items() if k != "job"))): v
                for n, ls, v in scrape(f"http://127.0.0.1:{metrics}/metrics", "locust")
            }
        finally:
            proc.terminate()
            proc.wait(15)
    row = next(s for s in stats["stats"] if s["name"] == "unary/ProcessOrder")
    # Every outcome: the histogram has no outcome label; failures are in the note.
    cumulative = buckets(snap, "wirelab_client_request_duration_seconds", protocol=protocol)
    note = f"Locust's own median {row['median_response_time']} ms, {row['num_failures']} failures"
    return Figures(
        "locust", row["total_rps"], quantile(0.5, cumulative) * 1000, row["avg_response_time"], note
    )


def locust_bare(protocol: str, lab: Lab, rate: float, users: int, seconds: int) -> Figures:
    """Bare Locust users (no lab glue) paced the same way: tells the lab's wrapper apart from
    what a Python/gevent client costs by itself."""
    pace = {"WIRELAB_BASELINE_PACE": f"{rate / users:g}"}
    r = run_locust(arm_args("bare", protocol, lab, users), seconds, env=pace)
    note = f"Locust's own median, whole ms; {r.failures} failures"
    return Figures("bare", r.rps, r.median_ms, r.mean_ms, note)


def _wait_stopped(url: str, timeout: float) -> dict[str, Any]:
    deadline, started = time.monotonic() + timeout, False
    while time.monotonic() < deadline:
        try:
            stats = httpx.get(url, timeout=2).json()
        except httpx.HTTPError:
            stats = {}
        started = started or stats.get("state") in ("running", "spawning")
        if started and stats.get("state") == "stopped":
            return dict(stats)
        time.sleep(0.5)
    raise TimeoutError(f"Locust did not finish within {timeout} s")


def main(argv: list[str] | None = None) -> int:
    prog = "wirelab perf crosscheck"
    args = parser(prog, __doc__, "WIRELAB_CROSSCHECK").parse_args(argv)
    missing = [tool for tool in (args.ghz, args.loadgen, "wrk") if shutil.which(tool) is None]
    if missing:
        print(f"missing {missing}: make tools (ghz, wirelab-loadgen); apt install wrk")
        return 2
    exit_on_sigterm()
    rate, conns, seconds = args.rate, args.connections, args.seconds
    tools: dict[str, dict[str, Callable[[Lab], Figures]]] = {
        "grpc": {
            "ghz": lambda lab: ghz(args.ghz, lab, rate, conns, seconds),
            "loadgen": lambda lab: loadgen(args.loadgen, "grpc", lab, rate, conns, seconds),
            "locust": lambda lab: locust("grpc", lab, rate, conns, seconds),
            "bare": lambda lab: locust_bare("grpc", lab, rate, conns, seconds),
        },
        "rest": {
            "wrk": lambda lab: wrk(lab, rate, conns, seconds),
            "loadgen": lambda lab: loadgen(args.loadgen, "rest", lab, rate, conns, seconds),
            "locust": lambda lab: locust("rest", lab, rate, conns, seconds),
            "bare": lambda lab: locust_bare("rest", lab, rate, conns, seconds),
        },
    }
    print(f"offered load {rate:g}/s over {conns} connections, {seconds} s per run; ProcessOrder")
    ratios = {}
    with services() as lab:
        for protocol, pair in tools.items():
            medians: dict[str, list[float]] = {name: [] for name in pair}
            for round_ in range(args.rounds):
                # Reverse the order every other round so drift on a shared machine hits all alike.
                for name in list(pair) if round_ % 2 == 0 else list(pair)[::-1]:
                    f = pair[name](lab)
                    medians[name].append(f.median_ms)
                    print(
                        f"{protocol:4} {f.tool:7} {f.rate:7.1f} calls/s"
                        f"  median {f.median_ms:6.3f} ms  mean {f.mean_ms:6.3f} ms  {f.note}",
                        flush=True,
                    )
            reference = next(iter(pair))
            base = statistics.median(medians[reference])
            for name in list(pair)[1:]:
                ratios[protocol, name] = (reference, statistics.median(medians[name]) / base)
    for (protocol, name), (reference, ratio) in ratios.items():
        goal = " (goal 0.85..1.15: the precise generator)" if name == "loadgen" else ""
        print(f"{protocol:4} {name}/{reference} median ratio {ratio:.3f}{goal}")
    precise = [r for (_, name), (_, r) in ratios.items() if name == "loadgen"]
    return 0 if all(0.85 <= r <= 1.15 for r in precise) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: every kind's gRPC/REST ratio by ghz with wrk or vegeta, beside Locust's and loadgen's.

Per kind both protocols share (unary, server_stream, upload, upload_chunked, download,
download_chunked), each generator runs both protocols back to back, in rounds that alternate
the order, against the same two local services; each round gives each generator a gRPC/REST
ratio of successful calls per second and of median latency, and the rounds' median with its
distribution-free interval says whether Locust's and wirelab-loadgen's ratios are the reference
tools' (wirelab_bench.independence). Writes them to --out for the report. Closed loop at
--connections calls in flight, or paced to --rate calls/s. The exit code says whether
wirelab-loadgen's small-call median is within 15 % of ghz's and wrk's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from wirelab.contract import CALLS
from wirelab_bench import independence
from wirelab_bench.histo import buckets, quantile
from wirelab_bench.independence import Measured
from wirelab_bench.knobs import REPO, listed, parser
from wirelab_bench.loadgen import run_closed, run_open
from wirelab_bench.scrape import scrape

from wirelab_perf import kindcalls
from wirelab_perf.kindcalls import BODY, Shape
from wirelab_perf.loadtools import Load
from wirelab_perf.locust_overhead import (
    LAB_LOCUSTFILE,
    Lab,
    arm_args,
    exit_on_sigterm,
    run_locust,
    services,
)
from wirelab_perf.svcprocs import CLIENT_CPU, free_port, pinned

__all__ = ["BODY", "main"]
# Generators by name: a reference pairs a compiled tool on each side; the lab's own follow.
GENERATORS = ("ghz+wrk", "ghz+vegeta", "loadgen", "locust", "bare")
SMALL_CALL_ONLY = {"loadgen", "bare"}  # wirelab-loadgen and the bare users send orders only
# wirelab-loadgen's small-call median against the reference's (docs/locust.md).
GOAL = (0.85, 1.15)


@dataclass(frozen=True)
class Figures:
    ok_per_s: float
    p50_ms: float
    failed: int
    note: str = ""


def _load(load: Load | None) -> Figures | None:
    if load is None:
        return None
    return Figures(load.ok_per_second, load.p50_ms, sum(load.errors.values()))


def loadgen(binary: str, protocol: str, lab: Lab, rate: float, conns: int, seconds: int) -> Figures:
    """wirelab-loadgen with ``conns`` workers: a closed loop, or open at ``rate`` (latency from
    each call's intended start)."""
    target = lab.grpc if protocol == "grpc" else lab.rest
    if rate <= 0:
        c = run_closed(binary, protocol, target, BODY, conns, seconds, 0, CLIENT_CPU)
        return Figures(c.confirmed_per_s, c.p50_ms, c.failed)
    r = run_open(binary, protocol, target, BODY, rate, conns, seconds, CLIENT_CPU)
    note = f"{r.dropped} calls not started on time"
    return Figures(r.answered_per_s * (1 - r.failed / max(1, r.answered)), r.median_ms, r.failed,
                   note)  # fmt: skip


def locust(
    protocol: str, lab: Lab, kind: str, shape: Shape, rate: float, users: int, seconds: int
) -> Figures:
    """The lab's users on one kind, back to back or paced to ``rate`` in all; median from the
    client histogram (the contract's buckets) and Locust's own (whole ms below 100 ms) noted."""
    web, metrics = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "locust", "-f", str(LAB_LOCUSTFILE), "--autostart"]
        cmd += ["--autoquit", "30", "-t", f"{seconds}s", "-u", str(users), "-r", str(users)]
        cmd += ["--pace", f"{rate / users:g}" if rate > 0 else "0"]
        cmd += ["-H", lab.rest, "--rest-host", lab.rest, "--grpc-target", lab.grpc]
        cmd += ["--protocols", protocol, "--mix", f"{kind}=1"]
        cmd += [
            "--payload-bytes",
            str(shape.payload_bytes),
            "--chunk-bytes",
            str(shape.chunk_bytes),
        ]
        cmd += ["--stream-count", str(shape.stream_count), "--stream-size", str(shape.stream_size)]
        cmd += ["--web-host", "127.0.0.1", "--web-port", str(web)]
        cmd += ["--metrics-bind", "127.0.0.1", "--metrics-port", str(metrics)]
        cmd += ["--loglevel", "WARNING"]
        proc = subprocess.Popen(
            pinned(cmd, CLIENT_CPU), cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            # Start-up alone took over 30 s once at load average 16 (grpc, gevent, the lab's glue).
            stats = _wait_stopped(f"http://127.0.0.1:{web}/stats/requests", seconds + 90)
            snap = {
                (n, tuple(sorted((k, v) for k, v in ls.items() if k != "job"))): v
                for n, ls, v in scrape(f"http://127.0.0.1:{metrics}/metrics", "locust")
            }
        finally:
            proc.terminate()
            proc.wait(15)
    row = next(s for s in stats["stats"] if s["name"] == f"{kind}/{CALLS[kind]}")
    # Every outcome: the histogram has no outcome label; failures are counted apart.
    cumulative = buckets(snap, "wirelab_client_request_duration_seconds", protocol=protocol)
    calls, failed = row["num_requests"], row["num_failures"]
    ok = row["total_rps"] * (calls - failed) / calls if calls else 0.0
    note = f"Locust's own median {row['median_response_time']} ms"
    return Figures(ok, quantile(0.5, cumulative) * 1000, failed, note)


def locust_bare(protocol: str, lab: Lab, rate: float, users: int, seconds: int) -> Figures:
    """Bare Locust users (no lab glue) paced the same way: tells the lab's wrapper apart from
    what a Python/gevent client costs by itself. Locust's own median, whole milliseconds."""
    pace = {"WIRELAB_BASELINE_PACE": f"{rate / users:g}" if rate > 0 else "0"}
    r = run_locust(arm_args("bare", protocol, lab, users), seconds, env=pace)
    ok = r.rps * (r.requests - r.failures) / r.requests if r.requests else 0.0
    return Figures(ok, r.median_ms, r.failures, "Locust's own median, whole ms")


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


Run = Callable[[Lab, str], Figures | None]  # (services, kind) -> figures, None: cannot drive it


def drivers(args: Any, shape: Shape) -> dict[str, dict[str, Run]]:
    """Each generator's run per protocol, at the command's load."""
    rate, conns, sec = args.rate, args.connections, args.seconds

    def ghz(lab: Lab, kind: str) -> Figures | None:
        return _load(kindcalls.ghz(args.ghz, lab.grpc, kind, shape, conns, sec, rate))

    def wrk(lab: Lab, kind: str) -> Figures | None:
        return _load(kindcalls.wrk(lab.rest, kind, shape, conns, sec, rate))

    def vegeta(lab: Lab, kind: str) -> Figures | None:
        return _load(kindcalls.vegeta(args.vegeta, lab.rest, kind, shape, conns, sec, rate))

    def lab_users(protocol: str) -> Run:
        return lambda lab, kind: locust(protocol, lab, kind, shape, rate, conns, sec)

    def small(run: Callable[[str, Lab], Figures], protocol: str) -> Run:
        return lambda lab, kind: run(protocol, lab) if kind == "unary" else None

    gen = lambda p, lab: loadgen(args.loadgen, p, lab, rate, conns, sec)  # noqa: E731
    bare = lambda p, lab: locust_bare(p, lab, rate, conns, sec)  # noqa: E731
    return {
        "ghz+wrk": {"grpc": ghz, "rest": wrk},
        "ghz+vegeta": {"grpc": ghz, "rest": vegeta},
        "loadgen": {p: small(gen, p) for p in ("grpc", "rest")},
        "locust": {p: lab_users(p) for p in ("grpc", "rest")},
        "bare": {p: small(bare, p) for p in ("grpc", "rest")},
    }


def missing_tools(args: Any, generators: list[str]) -> list[str]:
    needed = {"ghz+wrk": [args.ghz, "wrk"], "ghz+vegeta": [args.ghz, args.vegeta]}
    needed["loadgen"] = [args.loadgen]
    tools = dict.fromkeys(t for g in generators for t in needed.get(g, []))
    return [t for t in tools if shutil.which(t) is None]


def measure(
    args: Any,
    kinds: list[str],
    generators: list[str],
    lab: Lab,
    shape: Shape,
    save: Callable[[list[Measured]], None],
) -> list[Measured]:
    """Every round: per kind, each generator on both protocols back to back; the generators'
    order and each pair's order alternate from round to round, so drift on a shared machine
    falls on all alike. ``save`` gets the rows after every run, so a run stopped halfway keeps
    what it measured."""
    runs = drivers(args, shape)
    # A second of each kind on each protocol first, discarded: the services' first calls.
    if "ghz+wrk" in generators:
        for kind in kinds:
            kindcalls.ghz(args.ghz, lab.grpc, kind, shape, args.connections, 1, 0)
            kindcalls.wrk(lab.rest, kind, shape, args.connections, 1, 0)
    rows = []
    for rnd in range(args.rounds):
        for kind in kinds:
            order = generators if rnd % 2 == 0 else generators[::-1]
            for i, generator in enumerate(order):
                protocols = ("grpc", "rest") if (rnd + i) % 2 == 0 else ("rest", "grpc")
                for protocol in protocols:
                    try:
                        f = runs[generator][protocol](lab, kind)
                    except (RuntimeError, TimeoutError, ValueError) as error:
                        # One run lost on a busy machine costs its round's ratio, not the rest.
                        print(f"round {rnd} {kind} {generator} {protocol} failed: {error}")
                        continue
                    if f is None:
                        continue
                    rows.append(
                        Measured(kind, generator, protocol, rnd, f.ok_per_s, f.p50_ms, f.failed)
                    )
                    save(rows)
                    print(
                        f"round {rnd} {kind:16} {generator:10} {protocol:4} {f.ok_per_s:8.1f} ok/s"
                        f"  median {f.p50_ms:8.3f} ms  {f.failed} failed  {f.note}",
                        flush=True,
                    )
    return rows


def _git() -> dict[str, Any]:
    def git(*a: str) -> str:
        done = subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True)
        return done.stdout.strip()

    return {"sha": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "--porcelain"))}


def goal_met(rows: list[Measured]) -> bool:
    """wirelab-loadgen's small-call median within GOAL of the reference's, per protocol (the
    median of the rounds' own ratios); met where it did not run."""
    met = True
    for protocol in ("grpc", "rest"):

        def p50(gen: str, p: str = protocol) -> dict[int, float]:
            return {r.round: r.p50_ms for r in rows
                    if (r.kind, r.generator, r.protocol) == ("unary", gen, p)}  # fmt: skip

        ours, ref = p50("loadgen"), p50("ghz+wrk")
        ratios = [ours[k] / ref[k] for k in ours.keys() & ref.keys() if ref[k]]
        if ratios:
            ratio = sorted(ratios)[len(ratios) // 2]
            ok = GOAL[0] <= ratio <= GOAL[1]
            met = met and ok
            print(f"{protocol:4} wirelab-loadgen / reference small-call median {ratio:.3f} "
                  f"(goal {GOAL[0]}..{GOAL[1]}: {'met' if ok else 'MISSED'})")  # fmt: skip
    return met


def main(argv: list[str] | None = None) -> int:
    prog = "wirelab perf crosscheck"
    cli = parser(prog, __doc__, "WIRELAB_CROSSCHECK")
    args = cli.parse_args(argv)
    kinds = listed(cli, args.kinds, independence.KINDS, "kinds")
    generators = listed(cli, args.generators, GENERATORS, "generators")
    missing = missing_tools(args, generators)
    if missing:
        print(f"missing {missing}: make tools (ghz, vegeta, wirelab-loadgen); apt install wrk")
        return 2
    exit_on_sigterm()
    shape = Shape(args.payload_bytes, args.chunk_bytes)
    load = f"{args.rate:g} calls/s" if args.rate > 0 else "closed loop"
    print(f"{load}, {args.connections} connections, {args.seconds} s per run, {args.rounds} rounds;"
          f" {shape}")  # fmt: skip
    meta: dict[str, Any] = {
        "command": " ".join([prog, *(argv if argv is not None else sys.argv[1:])]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average": [os.getloadavg()[0]],
        "git": _git(),
        "rate": args.rate,
        "connections": args.connections,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "shape": shape.__dict__,
        "generators": generators,
        "no_reference": independence.NO_REFERENCE,
    }
    out = Path(args.out)
    with services() as lab:
        rows = measure(
            args, kinds, generators, lab, shape, lambda r: independence.write(out, meta, r)
        )
    meta["load_average"].append(os.getloadavg()[0])
    meta["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    independence.write(out, meta, rows)
    print(f"\ngRPC/REST per kind and generator: the rounds' median [interval]; wrote {out}")
    for row in independence.table(rows):
        print("  ".join(str(v) for v in row.values()))
    for kind, verdict in independence.verdicts(rows).items():
        said = "DEPENDS on the generator" if verdict.depends else "not shown to depend on it"
        print(f"{kind}: {said}")
    return 0 if goal_met(rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: what one relay hop adds to each call, per protocol, at a fixed offered load.

Four arms against one downstream B (a wirelab service; the small order, work_ms=0):
direct, the load tool calls B; wirelab, it calls A, a wirelab service of the same protocol with
WIRELAB_DOWNSTREAM=B and WIRELAB_LOCAL_WORK=off (a pure relay answering with B's reply); bare,
it calls the bare relay of wirelab_bench.perf.barerelay, the transport's own cost of a hop;
nginx, it calls nginx proxying to B as the cluster topology's load balancer does (HTTP/1.1
keep-alive upstream, grpc_pass). Client-side balancing (gRPC's round_robin) puts no process
between client and B: its hop is the direct arm. Every arm is offered the same fixed rate, open
loop (vegeta for REST, ghz --rps for gRPC), so latencies are compared at one load rather than at
each arm's own saturation. B and the relays share the server CPU, the load tool has the other.
Each round runs every arm once, in a balanced order that changes from round to round, against
the same processes; fresh processes every few rounds. Printed per protocol: the hop's added
median and p99 latency (each round's via-relay figure minus that round's direct one) and the
relay's CPU per call (psutil, children included), each the median of the rounds with its 95 %
interval, and then what wirelab's hop adds over the bare one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
from google.protobuf import json_format
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from wirelab_bench.benchknobs import Knob, parser
from wirelab_bench.cell import free_port
from wirelab_bench.environment import git_info, host_info
from wirelab_bench.loadtools import Load, ghz
from wirelab_bench.overhead import ORDER, REPO, find_ghz, pair_rounds
from wirelab_bench.perf.hopstats import (
    ARMS,
    BARE,
    DIRECT,
    NGINX,
    WIRELAB,
    ArmRun,
    Round,
    added,
    arm_order,
    downstream_cpu,
    figure,
    p50,
    p99,
    relay_cpu,
)
from wirelab_bench.perf.vegeta import find_vegeta, vegeta
from wirelab_bench.results import new_run_dir, write_json
from wirelab_bench.svcprocs import CLIENT_CPU, SERVER_CPU, Service, running, service

KNOBS: tuple[Knob, ...] = (
    # 100 calls/s keeps the server core below saturation on every arm: REST's via-wirelab arm,
    # the dearest, spends 2.8-3.7 ms of A's CPU and about 1 ms of B's per call, 40-50 % of the
    # core. At 200/s that arm saturated it (A's CPU rose to 4.5-5.6 ms per call, its median
    # latency to 270-540 ms) and measured queueing, not the hop.
    ("rate", int, 100, "offered calls per second, the same for every arm and protocol"),
    # 3 s at 100/s: 300 calls per arm and round, so a round's p99 is its 3rd-slowest call.
    ("seconds", int, 3, "length of one arm's measured run (whole seconds)"),
    # 10 rounds: the 95 % interval of the median runs from the 2nd to the 9th value. About two
    # minutes per protocol with the defaults.
    ("rounds", int, 10, "measured rounds per protocol; each round runs every arm once"),
    ("sets", int, 3, "fresh process sets (B, A, bare relay) per protocol, the rounds split"),
    ("protocols", str, "rest,grpc", "comma-separated protocols to measure"),
    ("metrics", str, "on", "WIRELAB_METRICS of B and A (on: as the lab runs them)"),
    ("ghz", str, "", "path of the ghz binary (default: PATH, then ~/go/bin/ghz)"),
    ("vegeta", str, "", "path of the vegeta binary (default: PATH, then ~/go/bin/vegeta)"),
    ("results", str, str(REPO / "results"), "folder that gets this run's <UTC time>_hop/"),
)
# ghz's workers take the --rps ticks; far more than the calls in flight at this rate (one or
# two), so a tick never waits for a free worker.
GHZ_WORKERS = 16
# An arm that completes fewer calls than offered did not get the load the others got.
KEPT = 0.97

Offer = Callable[[str, int], Load]


def answer(protocol: str, address: str) -> dict[str, Any]:
    """The reply to the benchmark's order, as JSON."""
    if protocol == "rest":
        response = httpx.post(f"{address}/v1/orders", json=ORDER, timeout=5)
        response.raise_for_status()
        reply: dict[str, Any] = response.json()
        return reply
    request = json_format.ParseDict(ORDER, pb.OrderRequest())
    with grpc.insecure_channel(address) as channel:
        grpc_reply = pb_grpc.WireLabStub(channel).ProcessOrder(request, timeout=5)
    return json_format.MessageToDict(grpc_reply, preserving_proto_field_name=True)


def answering(protocol: str, address: str, timeout: float = 30) -> None:
    """Wait until ``address`` answers an order."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer(protocol, address)
            return
        except (httpx.HTTPError, grpc.RpcError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.3)


@contextmanager
def bare_relay(protocol: str, cpu: int, downstream: str) -> Iterator[Service]:
    port = free_port()
    cmd = [sys.executable, "-m", "wirelab_bench.perf.barerelay", protocol, str(port), downstream]
    address = f"http://127.0.0.1:{port}" if protocol == "rest" else f"127.0.0.1:{port}"
    with running(cmd, cpu, lambda: answering(protocol, address)) as process:
        yield Service(protocol, address, process, metrics_url="")  # no metrics at all


# The lab's load balancer (topologies/nginx.conf) reduced to one upstream: the same proxying
# directives, one worker (it is pinned to the server core), nothing written outside its prefix.
NGINX_CONF = """
worker_processes 1;
pid nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    client_body_temp_path tmp; proxy_temp_path tmp; fastcgi_temp_path tmp;
    uwsgi_temp_path tmp; scgi_temp_path tmp;
    access_log off;
    keepalive_requests 1000000;
    {server}
}}
"""
NGINX_REST = """
    upstream b {{ server {b}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://b;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
        }}
    }}
"""
NGINX_GRPC = """
    upstream b {{ server {b}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port} http2;
        location / {{ grpc_pass grpc://b; }}
    }}
"""


def nginx_binary() -> str:
    """Debian's nginx (1.22, the cluster's stand-in), unpacked by offline/deb-tool, never
    installed: its package would start a server on :80."""
    done = subprocess.run(
        [str(REPO / "offline" / "deb-tool"), "nginx", "usr/sbin/nginx"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


@contextmanager
def nginx_relay(protocol: str, cpu: int, downstream: str) -> Iterator[Service]:
    """nginx in front of B as the cluster topology's lb runs it: HTTP/1.1 keep-alive upstream
    for REST, grpc_pass over HTTP/2 for gRPC; its worker's CPU counts (Service.cpu_seconds)."""
    port = free_port()
    b = downstream.removeprefix("http://")
    server = (NGINX_REST if protocol == "rest" else NGINX_GRPC).format(b=b, port=port)
    address = f"http://127.0.0.1:{port}" if protocol == "rest" else f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as prefix:
        (Path(prefix) / "tmp").mkdir()
        conf = Path(prefix) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(server=server))
        cmd = [nginx_binary(), "-p", prefix, "-c", str(conf), "-e", "stderr", "-g", "daemon off;"]
        with running(cmd, cpu, lambda: answering(protocol, address)) as process:
            yield Service(protocol, address, process, metrics_url="")


@contextmanager
def process_set(protocol: str, metrics: str) -> Iterator[dict[str, Service]]:
    """B, and the two relays in front of it, by arm; each answers the order as B does."""
    with ExitStack() as stack:
        b = stack.enter_context(service(protocol, SERVER_CPU, ("--metrics", metrics)))
        downstream = b.address if protocol == "rest" else f"grpc://{b.address}"
        relay = ("--metrics", metrics, "--downstream", downstream, "--local-work", "off")
        procs = {
            DIRECT: b,
            WIRELAB: stack.enter_context(service(protocol, SERVER_CPU, relay)),
            BARE: stack.enter_context(bare_relay(protocol, SERVER_CPU, downstream)),
            NGINX: stack.enter_context(nginx_relay(protocol, SERVER_CPU, b.address)),
        }
        expected = answer(protocol, b.address)
        for arm in (WIRELAB, BARE, NGINX):
            got = answer(protocol, procs[arm].address)
            if got != expected:
                raise RuntimeError(f"{arm} relay answers {got}, B answers {expected}")
        yield procs


def offer_for(protocol: str, rate: int, ghz_path: str, vegeta_path: str) -> Offer:
    if protocol == "rest":
        binary = find_vegeta(vegeta_path)
        return lambda address, seconds: vegeta(binary, address, rate, seconds)
    binary = find_ghz(ghz_path)
    return lambda address, seconds: ghz(binary, address, GHZ_WORKERS, seconds, rps=rate)


def run_arm(offer: Offer, procs: dict[str, Service], arm: str, seconds: int, rate: int) -> ArmRun:
    """The fixed load on one arm; the CPU its relay (none when direct) and B spent meanwhile."""
    b, relay = procs[DIRECT], (procs[arm] if arm != DIRECT else None)
    relay_before = relay.cpu_seconds() if relay else 0.0
    b_before = b.cpu_seconds()
    load = offer(procs[arm].address, seconds)
    run = ArmRun(
        load, relay.cpu_seconds() - relay_before if relay else 0.0, b.cpu_seconds() - b_before
    )
    if load.errors:
        raise RuntimeError(f"{arm}: calls failed: {dict(load.errors)}")
    if load.ok < KEPT * rate * seconds:
        raise RuntimeError(f"{arm}: {load.ok} calls of the {rate * seconds} offered completed")
    return run


def measure(protocol: str, args: argparse.Namespace) -> list[Round]:
    offer = offer_for(protocol, args.rate, args.ghz, args.vegeta)
    rounds: list[Round] = []
    for number, share in enumerate(pair_rounds(args.rounds, args.sets)):
        with process_set(protocol, args.metrics) as procs:
            for arm in ARMS:  # warm-up, discarded
                run_arm(offer, procs, arm, 1, args.rate)
            for round_ in share:
                done = {arm: run_arm(offer, procs, arm, args.seconds, args.rate)
                        for arm in arm_order(round_)}  # fmt: skip
                rounds.append(done)
                cells = " | ".join(
                    f"{arm} p50 {r.load.p50_ms:.2f} p99 {r.load.p99_ms:.2f} ms, "
                    f"relay {r.relay_ms_per_call:.3f} B {r.downstream_ms_per_call:.3f} ms CPU"
                    for arm, r in sorted(done.items(), key=lambda kv: ARMS.index(kv[0]))
                )
                print(f"{protocol:4} set {number} round {round_} ({'>'.join(arm_order(round_))})"
                      f": {cells}", flush=True)  # fmt: skip
    return rounds


def report(protocol: str, rounds: list[Round]) -> None:
    direct = [r[DIRECT] for r in rounds]
    print(f"\n{protocol}: direct to B, medians of the rounds: p50 "
          f"{figure([p50(r) for r in direct]).median:.3f} ms, p99 "
          f"{figure([p99(r) for r in direct]).median:.3f} ms, B's CPU "
          f"{figure([downstream_cpu(r) for r in direct]).median:.3f} ms per call")  # fmt: skip
    print(f"  {'one hop via':16} {'added p50 latency':32} {'added p99 latency':32} "
          "relay CPU per call")  # fmt: skip
    for arm, base in ((WIRELAB, DIRECT), (BARE, DIRECT), (NGINX, DIRECT), (WIRELAB, BARE)):
        name = f"{arm} - {base}" if base != DIRECT else arm
        cpu = added(rounds, arm, base, relay_cpu)
        print(f"  {name:16} {added(rounds, arm, base, p50).text():32} "
              f"{added(rounds, arm, base, p99).text():32} {cpu.text()}")  # fmt: skip
    b_cpu = "  ".join(
        f"{arm} {added(rounds, arm, DIRECT, downstream_cpu).text()}"
        for arm in (WIRELAB, BARE, NGINX)
    )
    # Not part of any relay's cost: whether B, the same service doing the same work, costs
    # the same when a relay calls it as when the load tool does.
    print(f"  B's own CPU per call, called by a relay minus by the load tool: {b_cpu}")


def versions(tools: dict[str, str]) -> dict[str, str]:
    """Each Go tool's module and version as its build recorded them (``go version -m``: a
    ``go install``ed vegeta prints no version of its own), else what the tool says."""
    flags = {"ghz": "--version", "vegeta": "-version"}
    found: dict[str, str] = {}
    for name, path in tools.items():
        cmd = ["go", "version", "-m", path] if shutil.which("go") else [path, flags[name]]
        out = subprocess.run(cmd, capture_output=True, text=True)
        mods = [
            line.split()[1:3] for line in out.stdout.splitlines() if line.strip().startswith("mod")
        ]
        found[name] = "@".join(mods[0]) if mods else (out.stdout + out.stderr).strip()
    return found


def main(argv: list[str] | None = None) -> int:
    prog = "python -m wirelab_bench.perf.hop"
    cli = parser(prog, __doc__, "WIRELAB_HOP", KNOBS)
    args = cli.parse_args(argv)
    if args.metrics not in ("on", "off"):
        cli.error(f"--metrics must be on or off, not {args.metrics!r}")
    protocols = [p for p in args.protocols.split(",") if p]
    if not set(protocols) <= {"rest", "grpc"} or args.rounds < 1 or args.sets < 1:
        cli.error("--protocols takes rest and grpc; --rounds and --sets at least 1")
    tools = {"ghz": find_ghz(args.ghz)} if "grpc" in protocols else {}
    tools |= {"vegeta": find_vegeta(args.vegeta)} if "rest" in protocols else {}
    run_dir = new_run_dir(Path(args.results), "hop")
    write_json(run_dir / "manifest.json", {
        "benchmark": prog, "knobs": vars(args), "git": git_info(REPO), "host": host_info(),
        "tools": versions(tools), "server_cpu": SERVER_CPU, "load_cpu": CLIENT_CPU,
    })  # fmt: skip
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: B and the relays on CPU "
          f"{SERVER_CPU}, load on CPU {CLIENT_CPU}, {args.rate} calls/s offered to every arm, "
          f"{args.rounds} rounds x {len(ARMS)} arms x {args.seconds} s per protocol, "
          f"{args.sets} process sets, metrics {args.metrics}, load average "
          f"{os.getloadavg()[0]:.2f}; results in {run_dir}")  # fmt: skip
    measured: dict[str, list[Round]] = {}
    for protocol in protocols:
        measured[protocol] = measure(protocol, args)
        data = {p: [{arm: run.record() for arm, run in r.items()} for r in rounds]
                for p, rounds in measured.items()}  # fmt: skip
        write_json(run_dir / "rounds.json", data)
    # Other work on the machine disturbs the p99s first: the load average tells the reader.
    print(f"\nload average {os.getloadavg()[0]:.2f}; median of the rounds, 95 % interval of the "
          "median in brackets")  # fmt: skip
    for protocol, rounds in measured.items():
        report(protocol, rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

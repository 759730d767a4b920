"""Benchmark: what one relay hop adds to each call, per protocol, at a fixed offered load.

Four arms against one downstream B (a wirelab service; the small order, work_ms=0):
direct, the load tool calls B; wirelab, it calls A, a wirelab service of the same protocol with
WIRELAB_DOWNSTREAM=B and WIRELAB_LOCAL_WORK=off (a pure relay answering with B's reply); bare,
it calls the bare relay of wirelab_perf.barerelay, the transport's own cost of a hop;
nginx, it calls nginx proxying to B as the cluster topology's load balancer does (HTTP/1.1
keep-alive upstream, grpc_pass). Client-side balancing (gRPC's round_robin) puts no process
between client and B: its hop is the direct arm (its picker: --compare balance, below). Every
arm is offered the same fixed rate, open loop (vegeta for REST, ghz --rps for gRPC), so
latencies are compared at one load rather than at each arm's own saturation. B and the relays
share the server CPU, the load tool has the other.
Each round runs every arm once, in a balanced order that changes from round to round, against
the same processes; fresh processes every few rounds. Printed per protocol: the hop's added
median and p99 latency (each round's via-relay figure minus that round's direct one) and the
relay's CPU per call (psutil, children included) and the load tool's (this process's
finished children's), each the median of the rounds with its 95 % interval, and then what
wirelab's hop adds over the bare one.

--compare runtimes sets the two runtimes' relays side by side: direct; wirelab, the Python relay
above; wirelab-node, the Node.js service (node/, WIRELAB_DOWNSTREAM=B, WIRELAB_LOCAL_WORK=off) in
front of the same Python B. Printed: each relay over direct, and the Node.js hop over the Python
one (its added latency and relay CPU per call).

--compare balance measures load balancing instead, over three Bs (the cluster topology's
replicas, on one port of 127.0.0.1-3) sharing the server CPU: direct, the load tool calls the
first; round-robin (gRPC only), ghz balances over all three itself, grpc-go's round_robin over
the addresses a name resolves to (wirelab_perf.replicas), so no process is in the path
and the picker's cost shows in the latency and the load tool's CPU; nginx, it calls nginx
balancing over the three (the cluster's lb, an upstream of three servers). The lab's REST
callers do no client-side balancing: REST gets direct and nginx only. The same rate, rounds and
order; each B's request counter, read before and after every arm, must show the calls spread
over all three (direct: the first only) or the run stops. Printed as above: each arm over
direct, and nginx over round-robin.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
from google.protobuf import json_format
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc
from wirelab_bench.environment import git_info, host_info
from wirelab_bench.knobs import REPO, parser
from wirelab_bench.results import new_run_dir, write_json

from wirelab_perf import ORDER
from wirelab_perf.hopstats import (
    ARMS,
    BALANCE_ARMS,
    BARE,
    DIRECT,
    NGINX,
    ROUND_ROBIN,
    RUNTIME_ARMS,
    WIRELAB,
    WIRELAB_NODE,
    ArmRun,
    Round,
    added,
    arm_order,
    client_cpu,
    downstream_cpu,
    figure,
    p50,
    p99,
    relay_cpu,
    spread_problem,
)
from wirelab_perf.loadtools import Load, ghz
from wirelab_perf.node import SERVICES as NODE_SERVICES
from wirelab_perf.node import node_process
from wirelab_perf.overhead import find_ghz, pair_rounds
from wirelab_perf.replicas import dns_server, replicas, served
from wirelab_perf.svcprocs import (
    CLIENT_CPU,
    SERVER_CPU,
    Service,
    address_of,
    free_port,
    running,
    service,
)
from wirelab_perf.vegeta import find_vegeta, vegeta

# ghz's workers take the --rps ticks; far more than the calls in flight at this rate (one or
# two), so a tick never waits for a free worker.
GHZ_WORKERS = 16
# An arm that completes fewer calls than offered did not get the load the others got.
KEPT = 0.97
# The cluster topology's replicas of B.
REPLICAS = 3

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
    cmd = [sys.executable, "-m", "wirelab_perf.barerelay", protocol, str(port), downstream]
    url = address_of(protocol, port)
    with running(cmd, cpu, lambda: answering(protocol, url)) as process:
        yield Service(protocol, url, process, metrics_url="")  # no metrics at all


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
    upstream b {{ {servers} keepalive 64; }}
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
    upstream b {{ {servers} keepalive 64; }}
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
def nginx_relay(protocol: str, cpu: int, downstreams: Sequence[str]) -> Iterator[Service]:
    """nginx in front of the Bs as the cluster topology's lb runs it: round robin over them,
    HTTP/1.1 keep-alive upstream for REST, grpc_pass over HTTP/2 for gRPC; its worker's CPU
    counts (Service.cpu_seconds)."""
    port = free_port()
    servers = "".join(f"server {b.removeprefix('http://')}; " for b in downstreams)
    server = (NGINX_REST if protocol == "rest" else NGINX_GRPC).format(servers=servers, port=port)
    url = address_of(protocol, port)
    with tempfile.TemporaryDirectory() as prefix:
        (Path(prefix) / "tmp").mkdir()
        conf = Path(prefix) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(server=server))
        cmd = [nginx_binary(), "-p", prefix, "-c", str(conf), "-e", "stderr", "-g", "daemon off;"]
        with running(cmd, cpu, lambda: answering(protocol, url)) as process:
            yield Service(protocol, url, process, metrics_url="")


@dataclass(frozen=True)
class Setup:
    """One set of processes: by arm, what the load tool calls and the relay it calls (none on
    the direct and round-robin arms); and the Bs behind them, the first the direct arm's."""

    targets: dict[str, str]
    relays: dict[str, Service]
    bs: tuple[Service, ...]


def answering_as_b(protocol: str, setup: Setup) -> Setup:
    """``setup``, once every relay has answered the order as B does."""
    expected = answer(protocol, setup.bs[0].address)
    for arm, relay in setup.relays.items():
        got = answer(protocol, relay.address)
        if got != expected:
            raise RuntimeError(f"{arm} relay answers {got}, B answers {expected}")
    return setup


@contextmanager
def process_set(protocol: str, metrics: str) -> Iterator[Setup]:
    """B, and the three relays in front of it."""
    with ExitStack() as stack:
        b = stack.enter_context(service(protocol, SERVER_CPU, ("--metrics", metrics)))
        downstream = b.address if protocol == "rest" else f"grpc://{b.address}"
        relay = ("--metrics", metrics, "--downstream", downstream, "--local-work", "off")
        relays = {
            WIRELAB: stack.enter_context(service(protocol, SERVER_CPU, relay)),
            BARE: stack.enter_context(bare_relay(protocol, SERVER_CPU, downstream)),
            NGINX: stack.enter_context(nginx_relay(protocol, SERVER_CPU, [b.address])),
        }
        targets = {DIRECT: b.address} | {arm: r.address for arm, r in relays.items()}
        yield answering_as_b(protocol, Setup(targets, relays, (b,)))


@contextmanager
def runtime_set(protocol: str, metrics: str) -> Iterator[Setup]:
    """B (Python), and each runtime's wirelab relay in front of it."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("--compare runtimes needs node on PATH (and npm ci in node/)")
    with ExitStack() as stack:
        b = stack.enter_context(service(protocol, SERVER_CPU, ("--metrics", metrics)))
        downstream = b.address if protocol == "rest" else f"grpc://{b.address}"
        relay = ("--metrics", metrics, "--downstream", downstream, "--local-work", "off")
        knobs = (f"WIRELAB_DOWNSTREAM={downstream}", "WIRELAB_LOCAL_WORK=off")
        script = NODE_SERVICES[protocol]
        relays = {
            WIRELAB: stack.enter_context(service(protocol, SERVER_CPU, relay)),
            WIRELAB_NODE: stack.enter_context(
                node_process(node, protocol, script, metrics, knobs=knobs)
            ),
        }
        targets = {DIRECT: b.address} | {arm: r.address for arm, r in relays.items()}
        yield answering_as_b(protocol, Setup(targets, relays, (b,)))


@contextmanager
def balance_set(protocol: str, metrics: str) -> Iterator[Setup]:
    """REPLICAS Bs, nginx balancing over them and, for gRPC, the name ghz balances over."""
    with ExitStack() as stack:
        bs = stack.enter_context(replicas(protocol, SERVER_CPU, REPLICAS, metrics))
        nginx = stack.enter_context(nginx_relay(protocol, SERVER_CPU, [b.address for b in bs]))
        targets = {DIRECT: bs[0].address, NGINX: nginx.address}
        if protocol == "grpc":
            hosts = tuple(b.address.rsplit(":", 1)[0] for b in bs)
            name = stack.enter_context(dns_server(hosts))
            targets[ROUND_ROBIN] = f"{name}:{bs[0].address.rsplit(':', 1)[1]}"
        yield answering_as_b(protocol, Setup(targets, {NGINX: nginx}, bs))


def offer_for(protocol: str, rate: int, ghz_path: str, vegeta_path: str) -> Offer:
    if protocol == "rest":
        binary = find_vegeta(vegeta_path)
        return lambda address, seconds: vegeta(binary, address, rate, seconds)
    binary = find_ghz(ghz_path)
    return lambda address, seconds: ghz(binary, address, GHZ_WORKERS, seconds, rps=rate)


def children_cpu() -> float:
    """User + system CPU-seconds of this process's finished children: the load tool's runs."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_arm(offer: Offer, setup: Setup, arm: str, seconds: int, rate: int) -> ArmRun:
    """The fixed load on one arm; the CPU its relay (if any), the Bs and the load tool spent
    meanwhile. With several Bs, their counters (read outside the CPU window) must show the
    calls spread as the arm spreads them."""
    relay, bs = setup.relays.get(arm), setup.bs
    served_before = [served(b) for b in bs] if len(bs) > 1 else []
    relay_before = relay.cpu_seconds() if relay else 0.0
    bs_before, client_before = sum(b.cpu_seconds() for b in bs), children_cpu()
    load = offer(setup.targets[arm], seconds)
    run = ArmRun(
        load,
        relay.cpu_seconds() - relay_before if relay else 0.0,
        sum(b.cpu_seconds() for b in bs) - bs_before,
        children_cpu() - client_before,
    )
    if served_before:
        spread = [served(b) - n for b, n in zip(bs, served_before, strict=True)]
        if problem := spread_problem(arm, spread):
            raise RuntimeError(problem)
    if load.errors:
        raise RuntimeError(f"{arm}: calls failed: {dict(load.errors)}")
    if load.ok < KEPT * rate * seconds:
        raise RuntimeError(f"{arm}: {load.ok} calls of the {rate * seconds} offered completed")
    return run


def arms_of(compare: str, protocol: str) -> tuple[str, ...]:
    if compare == "runtimes":
        return RUNTIME_ARMS
    return ARMS if compare == "hop" else BALANCE_ARMS[protocol]


SETS = {"hop": process_set, "runtimes": runtime_set, "balance": balance_set}


def measure(protocol: str, args: argparse.Namespace) -> list[Round]:
    offer = offer_for(protocol, args.rate, args.ghz, args.vegeta)
    arms = arms_of(args.compare, protocol)
    processes = SETS[args.compare]
    rounds: list[Round] = []
    for number, share in enumerate(pair_rounds(args.rounds, args.sets)):
        with processes(protocol, args.metrics) as setup:
            for arm in arms:  # warm-up, discarded
                run_arm(offer, setup, arm, 1, args.rate)
            for round_ in share:
                order = arm_order(round_, arms)
                done = {arm: run_arm(offer, setup, arm, args.seconds, args.rate) for arm in order}
                rounds.append(done)
                cells = " | ".join(
                    f"{arm} p50 {r.load.p50_ms:.2f} p99 {r.load.p99_ms:.2f} ms, "
                    f"relay {r.relay_ms_per_call:.3f} B {r.downstream_ms_per_call:.3f} "
                    f"load tool {r.client_ms_per_call:.3f} ms CPU"
                    for arm, r in sorted(done.items(), key=lambda kv: arms.index(kv[0]))
                )
                print(f"{protocol:4} set {number} round {round_} ({'>'.join(order)})"
                      f": {cells}", flush=True)  # fmt: skip
    return rounds


def comparisons(compare: str, protocol: str) -> list[tuple[str, str]]:
    """The (arm, base) pairs the report prints, what ``arm`` adds over ``base``."""
    if compare == "hop":
        return [(WIRELAB, DIRECT), (BARE, DIRECT), (NGINX, DIRECT), (WIRELAB, BARE)]
    if compare == "runtimes":
        return [(WIRELAB, DIRECT), (WIRELAB_NODE, DIRECT), (WIRELAB_NODE, WIRELAB)]
    arms = arms_of(compare, protocol)
    pairs = [(arm, DIRECT) for arm in arms[1:]]
    if ROUND_ROBIN in arms:
        pairs.append((NGINX, ROUND_ROBIN))
    return pairs


def report(protocol: str, rounds: list[Round], compare: str) -> None:
    hop = compare != "balance"  # one B
    pairs = comparisons(compare, protocol)
    direct = [r[DIRECT] for r in rounds]
    whose = "B's" if hop else "the Bs'"
    print(f"\n{protocol}: direct to {'B' if hop else f'one of {REPLICAS} Bs'}, medians of the "
          f"rounds: p50 {figure([p50(r) for r in direct]).median:.3f} ms, p99 "
          f"{figure([p99(r) for r in direct]).median:.3f} ms, {whose} CPU "
          f"{figure([downstream_cpu(r) for r in direct]).median:.3f} ms per call")  # fmt: skip
    print(f"  {'one hop via' if hop else 'balanced by':20} {'added p50 latency':32} "
          f"{'added p99 latency':32} {'relay CPU per call':32} load tool CPU per call")  # fmt: skip
    for arm, base in pairs:
        name = f"{arm} - {base}" if base != DIRECT else arm
        cells = [added(rounds, arm, base, v).text() for v in (p50, p99, relay_cpu, client_cpu)]
        print(f"  {name:20} {cells[0]:32} {cells[1]:32} {cells[2]:32} {cells[3]}")
    b_cpu = "  ".join(
        f"{arm} {added(rounds, arm, DIRECT, downstream_cpu).text()}"
        for arm, base in pairs
        if base == DIRECT
    )
    # Not part of any relay's cost: whether B, the same service doing the same work, costs
    # the same when a relay calls it as when the load tool does.
    who = (
        "B's own CPU per call, called by a relay minus by the load tool"
        if hop
        else "the Bs' CPU per call, balanced minus direct"
    )
    print(f"  {who}: {b_cpu}")
    if not hop and ROUND_ROBIN not in arms_of(compare, protocol):
        print("  no round-robin arm: the lab's REST callers do no client-side balancing")


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
    prog = "wirelab perf hop"
    cli = parser(prog, __doc__, "WIRELAB_HOP")
    args = cli.parse_args(argv)
    if args.metrics not in ("on", "off"):
        cli.error(f"--metrics must be on or off, not {args.metrics!r}")
    protocols = [p for p in args.protocols.split(",") if p]
    if not set(protocols) <= {"rest", "grpc"} or args.rounds < 1 or args.sets < 1:
        cli.error("--protocols takes rest and grpc; --rounds and --sets at least 1")
    if args.compare not in SETS:
        cli.error(f"--compare must be hop, runtimes or balance, not {args.compare!r}")
    if args.compare == "balance" and args.metrics != "on":
        cli.error("--compare balance reads the Bs' request counters: --metrics must be on")
    tools = {"ghz": find_ghz(args.ghz)} if "grpc" in protocols else {}
    tools |= {"vegeta": find_vegeta(args.vegeta)} if "rest" in protocols else {}
    run_dir = new_run_dir(
        Path(args.results), "hop" if args.compare == "hop" else f"hop-{args.compare}"
    )
    write_json(run_dir / "manifest.json", {
        "benchmark": prog, "knobs": vars(args), "git": git_info(REPO), "host": host_info(),
        "tools": versions(tools), "server_cpu": SERVER_CPU, "load_cpu": CLIENT_CPU,
    })  # fmt: skip
    arms = " or ".join(str(len(arms_of(args.compare, p))) for p in protocols)
    procs = "B and the relays" if args.compare != "balance" else f"the {REPLICAS} Bs and nginx"
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {procs} on CPU "
          f"{SERVER_CPU}, load on CPU {CLIENT_CPU}, {args.rate} calls/s offered to every arm, "
          f"{args.rounds} rounds x {arms} arms x {args.seconds} s per protocol, "
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
        report(protocol, rounds, args.compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())

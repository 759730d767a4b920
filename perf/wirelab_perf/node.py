"""Benchmark: the Node.js services (node/) measured as the Python ones are, in eight comparisons.

``--compare metrics``: each Node service with prom-client on against off (goal >= 0.95);
``--compare echo``: each Node service (metrics on, as deployed) against a bare server of the same
framework (node/scripts/echo-*.js: node:http, @grpc/grpc-js) that answers the same call without
the service's work (goal >= 0.90); ``--compare runtimes``: each Node service against the Python
service of the same protocol (a comparison, no goal); ``--compare workers``: each Node service
with ``--workers`` event loops (WIRELAB_NODE_WORKERS, Node's cluster module) against one, on the
same core (what the cluster costs where it cannot add a core; no goal). ``--compare floor``: the
least server that answers the order call (node/scripts/floor-*.js: decode, total, echo the order,
encode) against the bare echo server, which is what any conforming server keeps of the echo's
throughput; ``--compare conforming``: each Node service against that floor (no goals).
``--compare traces``: each Node service traced at ``--trace-ratio`` (the lab's default 0.001,
spans exported over OTLP to a receiver that keeps nothing) against untraced, metrics on in both
(goal >= 0.97, as for the Python services' ``wirelab perf overhead --traces``). ``--compare
same``: each Node service against a second process of the same service (metrics on, traces off),
the method's own bias: its interval should hold 1 (no goal). Every comparison is the observer-effect
method of ``wirelab_perf.overhead``: both processes pinned to one core and loaded at once (wrk for
REST, h2load for gRPC, small orders at saturation) from the other, each scraped as the lab's
Prometheus scrapes it, requests per server CPU-second, the median of many rounds' ratios over fresh
process pairs with its 95 % interval.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from wirelab_bench.health import wait_healthy
from wirelab_bench.knobs import REPO, listed, parser

from wirelab_perf.overhead import (
    GRPC_LOADS,
    Starter,
    counter_for,
    measure_pairs,
    otlp_sink,
    summarize,
)
from wirelab_perf.svcprocs import (
    CLIENT_CPU,
    SERVER_CPU,
    Service,
    address_of,
    free_port,
    pin,
    running,
    service,
)

SERVICES = {"rest": REPO / "node/src/rest/main.js", "grpc": REPO / "node/src/grpc/main.js"}
ECHOES = {"rest": REPO / "node/scripts/echo-rest.js", "grpc": REPO / "node/scripts/echo-grpc.js"}
FLOORS = {"rest": REPO / "node/scripts/floor-rest.js", "grpc": REPO / "node/scripts/floor-grpc.js"}
# What each comparison sets against what, and the goal of the first over the second.
COMPARISONS = {
    "metrics": ("prom-client on / off", 0.95),
    "echo": ("service / bare echo server", 0.90),
    "runtimes": ("Node.js / Python", None),
    "workers": ("N workers / 1 (one core)", None),
    "floor": ("least order server / bare echo server", None),
    "conforming": ("service / least order server", None),
    "traces": ("traces on / off, metrics on in both", 0.97),
    "same": ("service / the same service in a second process (1 should lie in the interval)", None),
}


@contextmanager
def node_process(
    node: str,
    protocol: str,
    script: Path,
    metrics: str | None,
    workers: int = 1,
    knobs: Sequence[str] = (),
) -> Iterator[Service]:
    """``script`` on a free port, pinned to the server core, healthy. ``metrics`` on or off is
    the service's WIRELAB_METRICS (its /metrics on a port of its own either way); None is a bare
    echo server, which serves no /metrics (never scraped). ``workers`` > 1: a cluster primary and
    its workers, all on the server core (their CPU is the process tree's). ``knobs``: more
    ``WIRELAB_X=value`` settings (a relay's downstream)."""
    port = free_port()
    env = ["WIRELAB_HOST=127.0.0.1", f"WIRELAB_{protocol.upper()}_PORT={port}"]
    env += [f"WIRELAB_NODE_WORKERS={workers}", *knobs]
    metrics_url = ""
    if metrics is not None:
        metrics_port = free_port()
        env += [f"WIRELAB_METRICS={metrics}", f"WIRELAB_METRICS_PORT={metrics_port}"]
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    url = address_of(protocol, port)
    # `env` execs node in its place: the pinned, measured process is node itself.
    cmd = ["env", *env, node, str(script)]
    with running(cmd, SERVER_CPU, lambda: wait_healthy(url, url, (protocol,), timeout=30)) as proc:
        yield Service(protocol, url, proc, metrics_url)


def variants(
    node: str, comparison: str, protocol: str, workers: int = 2, traced: Sequence[str] = ()
) -> tuple[tuple[str, Starter], ...]:
    """The two processes a comparison sets side by side, first over second, each named.
    ``traced``: the traced arm's knobs (its ratio and the OTLP receiver), for ``traces``."""
    script = SERVICES[protocol]

    def node_service(metrics: str, loops: int = 1, knobs: Sequence[str] = ()) -> Starter:
        return lambda: node_process(node, protocol, script, metrics, loops, knobs)

    if comparison == "traces":
        return ("traced", node_service("on", knobs=traced)), ("off", node_service("on"))
    if comparison == "same":
        return ("first", node_service("on")), ("second", node_service("on"))
    if comparison == "metrics":
        return ("on", node_service("on")), ("off", node_service("off"))
    if comparison == "echo":
        echo = ECHOES[protocol]
        return ("service", node_service("on")), (
            "echo", lambda: node_process(node, protocol, echo, None)
        )  # fmt: skip
    if comparison in ("floor", "conforming"):
        floor = ("floor", lambda: node_process(node, protocol, FLOORS[protocol], None))
        if comparison == "floor":
            return floor, ("echo", lambda: node_process(node, protocol, ECHOES[protocol], None))
        return ("service", node_service("on")), floor
    if comparison == "workers":
        return (f"{workers} workers", node_service("on", workers)), ("1 worker", node_service("on"))
    return ("node", node_service("on")), ("python", lambda: service(protocol, SERVER_CPU))


def main(argv: Sequence[str] | None = None) -> int:
    prog = "wirelab perf node"
    cli = parser(prog, __doc__, "WIRELAB_NODEPERF")
    args = cli.parse_args(argv)
    comparisons = listed(cli, args.compare, COMPARISONS, "comparison")
    protocols = listed(cli, args.protocols, SERVICES, "protocol")
    if args.grpc_load not in GRPC_LOADS:
        cli.error(f"--grpc-load must be one of {', '.join(GRPC_LOADS)}, not {args.grpc_load!r}")
    node = args.node or shutil.which("node")
    if not node:
        cli.error("node not found: install Node.js 20 (or pass --node)")
    pin(CLIENT_CPU)  # this process scrapes; the threads it starts inherit the pinning
    print(f"server CPU {SERVER_CPU} (both processes), load CPU {CLIENT_CPU}, {args.rounds} rounds "
          f"x {args.seconds}s over {args.pairs} pairs (each loaded {args.warmup}s first), scraped "
          f"every {args.scrape_interval:g}s as the lab scrapes")  # fmt: skip
    results = []
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        traced: list[str] = []
        if "traces" in comparisons:  # the traced arm exports to a receiver on the load's core
            endpoint = stack.enter_context(otlp_sink())
            traced = ["WIRELAB_TRACES=on", f"WIRELAB_TRACE_SAMPLE_RATIO={args.trace_ratio}"]
            traced.append(f"WIRELAB_TRACES_ENDPOINT={endpoint}")
            print(f"--compare traces: traced at ratio {args.trace_ratio}, exported over OTLP")
        for comparison in comparisons:
            for protocol in protocols:
                count = counter_for(
                    protocol, args.connections, args.ghz, Path(tmp), grpc_load=args.grpc_load
                )
                first, second = variants(node, comparison, protocol, args.workers, traced)
                runs = measure_pairs(
                    f"{comparison} {protocol}", count, first, second,
                    args.rounds, args.pairs, args.seconds, args.scrape_interval, args.warmup,
                )  # fmt: skip
                results.append((comparison, protocol, first[0], second[0], runs))
    print("\nrequests per server CPU-second: median of the rounds' ratios, 95 % interval")
    for comparison, protocol, a, b, (firsts, seconds) in results:
        what, goal = COMPARISONS[comparison]
        print(f"\n{what}" + (f" (goal >= {goal})" if goal is not None else ""))
        summarize(protocol, firsts, seconds, (a, b), False, goal, args.rounds, args.pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())

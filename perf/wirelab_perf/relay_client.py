"""Benchmark: one relay hop's CPU per order at 10, 100 and 300 concurrent orders, by HTTP client.

The order chain's REST arm collapsed at 300 users where gRPC's did not, and its relays used twice
gRPC's CPU (docs/broker.md). This sets the REST relay's two clients (WIRELAB_REST_CLIENT: httpx,
aiohttp) beside gRPC's relay, at the study's closed loads: a relay A (WIRELAB_LOCAL_WORK=off,
WIRELAB_DOWNSTREAM=B) in front of a service B that does the order's work, both on the server CPU,
and wirelab-loadgen's closed loop on the other, the same generator for both protocols. Each
round runs every arm at every load, in an order that changes from round to round, each run on
fresh processes. Printed per load and arm: answered orders/s, p50 and p99, and the CPU per
answered order of A (the hop: its server and its client) and of B, the median of the rounds
with its 95 % interval; then each REST client's relay CPU over gRPC's.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from wirelab_bench.knobs import listed, parser
from wirelab_bench.loadgen import BINARY, run_closed
from wirelab_bench.medians import median_interval

from wirelab_perf.svcprocs import CLIENT_CPU, SERVER_CPU, service

# An arm: the relay's protocol and, for REST, its client.
ARMS = {"rest-httpx": ("rest", "httpx"), "rest-aiohttp": ("rest", "aiohttp"), "grpc": ("grpc", "")}
ORDER = {
    "order": {
        "order_id": "o-1",
        "customer_id": "c-1",
        "items": [{"sku": "s-1", "quantity": 2, "unit_price_cents": 150}],
        "note": "a small order",
    }
}


@dataclass(frozen=True)
class Run:
    per_s: float
    p50_ms: float
    p99_ms: float
    failed: int
    relay_ms: float  # A's CPU per answered order
    downstream_ms: float  # B's


def measure(arm: str, users: int, seconds: int, work_ms: int) -> Run:
    protocol, client = ARMS[arm]
    extra = ["--local-work", "off", "--rest-client", client] if client else ["--local-work", "off"]
    body = {**ORDER, "work_ms": work_ms}
    with (
        service(protocol, SERVER_CPU) as b,
        service(
            protocol, SERVER_CPU, ["--downstream", _scheme(protocol) + _bare(b.address), *extra]
        ) as a,
    ):
        run_closed(BINARY, protocol, a.address, body, users, 2, 0, CLIENT_CPU)  # warm-up
        relay, downstream = a.cpu_seconds(), b.cpu_seconds()
        got = run_closed(BINARY, protocol, a.address, body, users, seconds, 0, CLIENT_CPU)
        answered = max(1.0, got.answered_per_s * seconds)
        return Run(
            got.answered_per_s,
            got.p50_ms,
            got.p99_ms,
            got.failed,
            (a.cpu_seconds() - relay) / answered * 1e3,
            (b.cpu_seconds() - downstream) / answered * 1e3,
        )


def _bare(address: str) -> str:
    return address.split("://", 1)[-1]


def _scheme(protocol: str) -> str:
    return "http://" if protocol == "rest" else "grpc://"


def _interval(values: Sequence[float]) -> str:
    low, high = median_interval(sorted(values))
    return f"{statistics.median(values):7.2f} [{low:.2f}-{high:.2f}]"


def summary(
    runs: dict[tuple[str, int], list[Run]], arms: Sequence[str], loads: Sequence[int]
) -> str:
    lines = [
        f"{'users':>5} {'arm':<13} {'orders/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'failed':>6}"
        f"  {'relay CPU ms/order':>24}  {'B CPU ms/order':>22}"
    ]
    for users in loads:
        for arm in arms:
            got = runs[arm, users]
            lines.append(
                f"{users:>5} {arm:<13} {statistics.median(r.per_s for r in got):9.1f}"
                f" {statistics.median(r.p50_ms for r in got):8.1f}"
                f" {statistics.median(r.p99_ms for r in got):8.1f}"
                f" {sum(r.failed for r in got):6d}"
                f"  {_interval([r.relay_ms for r in got]):>24}"
                f"  {_interval([r.downstream_ms for r in got]):>22}"
            )
        if "grpc" in arms:
            grpc = statistics.median(r.relay_ms for r in runs["grpc", users])
            for arm in arms:
                if arm != "grpc":
                    mine = statistics.median(r.relay_ms for r in runs[arm, users])
                    lines.append(f"{'':>5} {arm} relay CPU / grpc's: x{mine / grpc:.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser("wirelab perf relay-client", __doc__, "WIRELAB_RELAY_CLIENT")
    args = cli.parse_args(argv)
    arms = listed(cli, args.arms, ARMS, "arms")
    loads = [int(n) for n in listed(cli, args.loads, [str(n) for n in range(1, 5001)], "loads")]
    if args.rounds < 1 or args.seconds < 1:
        cli.error("--rounds and --seconds >= 1")
    print(
        f"relay and B on CPU {SERVER_CPU}, wirelab-loadgen on CPU {CLIENT_CPU}: work {args.work_ms}"
        f" ms at B, {args.seconds} s per run, {args.rounds} rounds",
        flush=True,
    )
    runs: dict[tuple[str, int], list[Run]] = {}
    for r in range(args.rounds):
        for i, users in enumerate(loads):
            k = (r + i) % len(arms)
            for arm in [*arms[k:], *arms[:k]]:
                got = measure(arm, users, args.seconds, args.work_ms)
                runs.setdefault((arm, users), []).append(got)
                print(f"round {r + 1} {users:>4} users {arm:<13} {got}", flush=True)
    print(summary(runs, arms, loads))
    return 0


if __name__ == "__main__":
    sys.exit(main())

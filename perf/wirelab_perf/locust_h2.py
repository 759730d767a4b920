"""Benchmark: the lab's Locust REST user over h2c against the same user over HTTP/1.1.

Both clients call the same REST process on Granian (WIRELAB_REST_HTTP=2, metrics off) pinned to
the server CPU, the Locust process pinned to the other, the small order call only (the --mix of
the load that HTTP/2 changes most per call), no wait time. Rounds alternate which client goes
first. Printed per round: calls per second, calls per client CPU-second, Locust's median; then
h2c/1.1 per figure (median of the rounds). Locust's h2c path is httpx with the pure-Python h2
package, its 1.1 path geventhttpclient's C parser: how much the client itself costs is what a
run over h2c adds to its latency and takes from its throughput (docs/http2.md).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

from wirelab_bench.knobs import parser

from wirelab_perf.locust_overhead import LAB_LOCUSTFILE, Result, exit_on_sigterm, run_locust
from wirelab_perf.svcprocs import SERVER_CPU, service

CLIENTS = ("1.1", "h2c")


def args_for(client: str, rest: str, users: int) -> list[str]:
    """The lab's REST user, unary only, over ``client``'s HTTP."""
    return [
        *("-f", str(LAB_LOCUSTFILE), "-H", rest, "--rest-host", rest, "--protocols", "rest"),
        *("--mix", "unary=1", "--rest-http", client, "--metrics-port", "0"),
        *("-u", str(users), "-r", str(users)),
    ]


def ratios(results: dict[str, list[Result]]) -> dict[str, float]:
    """h2c over 1.1 for each figure, from the median of each client's rounds."""

    def median(client: str, figure: Callable[[Result], float]) -> float:
        return statistics.median(figure(r) for r in results[client])

    figures: dict[str, Callable[[Result], float]] = {
        "calls/s": lambda r: r.rps,
        "calls per client CPU-s": lambda r: r.requests / r.cpu_seconds,
        "Locust median ms": lambda r: r.median_ms,
    }
    return {name: median("h2c", f) / median("1.1", f) for name, f in figures.items()}


def main(argv: list[str] | None = None) -> int:
    prog = "wirelab perf locust-h2"
    args = parser(prog, __doc__, "WIRELAB_LOCUST_H2").parse_args(argv)
    exit_on_sigterm()
    results: dict[str, list[Result]] = {c: [] for c in CLIENTS}
    extra = ("--metrics", "off", "--rest-http", "2")
    with service("rest", SERVER_CPU, extra) as rest:
        for client in CLIENTS:
            run_locust(args_for(client, rest.address, args.users), 3)  # warm-up, discarded
        for round_ in range(args.rounds):
            for client in CLIENTS if round_ % 2 == 0 else CLIENTS[::-1]:
                r = run_locust(args_for(client, rest.address, args.users), args.seconds)
                results[client].append(r)
                print(f"{client:3} round {round_}: {r.rps:8.1f} calls/s, "
                      f"{r.requests / r.cpu_seconds:8.1f} calls per client CPU-s, "
                      f"median {r.median_ms:g} ms, {r.failures} failures", flush=True)  # fmt: skip
    failures = sum(r.failures for rs in results.values() for r in rs)
    if any(r.requests == 0 for rs in results.values() for r in rs):
        print("\na round answered no call: no ratio (is the run longer than Locust's start?)")
        return 1
    print("\nh2c / 1.1 (median of rounds)")
    for name, ratio in ratios(results).items():
        print(f"{name}: {ratio:.3f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

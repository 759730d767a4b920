"""Observer effect: each service with metrics on vs off, small unary at saturation on one core.

Both variants of a service run at once, pinned to the same core; the load tool (wrk for REST,
ghz for gRPC) is pinned to the other core and drives one variant at a time, in interleaved A/B
rounds whose order alternates. Prints two on/off ratios per protocol (goal >= 0.95): requests
per second, and requests per server CPU-second, which is the saturated-throughput ratio with the
other tenants of a shared core taken out (at saturation, throughput = 1 / CPU per request).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from wirelab_bench.benchknobs import parser
from wirelab_bench.svcprocs import CLIENT_CPU, SERVER_CPU, Service, pin, service

REPO = Path(__file__).resolve().parents[2]
GOAL = 0.95
# A small order: the request-response kind at its cheapest, so transport cost dominates.
ORDER = {
    "order": {
        "order_id": "o-1",
        "customer_id": "c-1",
        "items": [{"sku": "a", "quantity": 2, "unit_price_cents": 150}],
        "attributes": {"channel": "bench"},
        "note": "small",
    }
}
KNOBS = (
    ("seconds", int, 5, "length of one measured run (whole seconds: wrk needs them)"),
    ("rounds", int, 6, "interleaved on/off rounds per protocol"),
    ("connections", int, 32, "concurrent connections (wrk) / concurrent calls (ghz)"),
    ("ghz", str, "", "path of the ghz binary (default: PATH, then ~/go/bin/ghz)"),
    ("protocols", str, "rest,grpc", "comma-separated protocols to measure"),
)


def find_ghz(given: str) -> str:
    found = given or shutil.which("ghz") or str(Path.home() / "go" / "bin" / "ghz")
    if not os.access(found, os.X_OK):
        sys.exit("ghz not found: go install github.com/bojand/ghz/cmd/ghz@v0.120.0 (or pass --ghz)")
    return found


def _run(cmd: list[str]) -> str:
    done = subprocess.run(cmd, preexec_fn=lambda: pin(CLIENT_CPU), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def wrk_count(url: str, seconds: int, connections: int, script: Path) -> int:
    out = _run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url])
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    match = re.search(r"(\d+) requests in", out)
    assert match, out
    return int(match.group(1))


def ghz_count(ghz: str, target: str, seconds: int, connections: int) -> int:
    out = _run([
        ghz, "--insecure", "--proto", str(REPO / "proto/wirelab/v1/wirelab.proto"),
        "--import-paths", str(REPO / "proto"), "--call", "wirelab.v1.WireLab.ProcessOrder",
        "-d", json.dumps(ORDER), "-c", str(connections), "--connections", "4",
        "-z", f"{seconds}s", "--format", "json", target,
    ])  # fmt: skip
    report = json.loads(out)
    codes = report.get("statusCodeDistribution", {})
    ok = int(codes.get("OK", 0))
    # ghz cuts the calls still in flight when -z runs out (Unavailable/Canceled): a handful,
    # never the server's doing; anything more is a real failure.
    if sum(codes.values()) - ok > max(100, ok // 100):
        raise RuntimeError(f"ghz saw errors: {codes}")
    return ok


@dataclass(frozen=True)
class Run:
    requests: int
    seconds: float
    cpu_seconds: float

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def per_cpu(self) -> float:
        return self.requests / max(self.cpu_seconds, 1e-9)


def load_for(protocol: str, connections: int, ghz: str, tmp: Path) -> Callable[[Service, int], Run]:
    """A function that saturates one service for some seconds and measures the run."""
    if protocol == "rest":
        script = tmp / "order.lua"
        body = json.dumps(json.dumps(ORDER))
        script.write_text(
            f'wrk.method = "POST"\nwrk.body = {body}\n'
            'wrk.headers["Content-Type"] = "application/json"\n'
        )

        def count(svc: Service, s: int) -> int:
            return wrk_count(f"{svc.address}/v1/orders", s, connections, script)
    else:
        binary = find_ghz(ghz)

        def count(svc: Service, s: int) -> int:
            return ghz_count(binary, svc.address, s, connections)

    def run(svc: Service, seconds: int) -> Run:
        cpu = svc.cpu_seconds()
        requests = count(svc, seconds)
        return Run(requests, seconds, svc.cpu_seconds() - cpu)

    return run


def _ratio(on: list[Run], off: list[Run], attr: str) -> float:
    median_on = statistics.median(float(getattr(r, attr)) for r in on)
    return median_on / statistics.median(float(getattr(r, attr)) for r in off)


def main(argv: list[str] | None = None) -> int:
    prog = "python -m wirelab_bench.overhead"
    args = parser(prog, __doc__, "WIRELAB_OBSERVER", KNOBS).parse_args(argv)
    protocols = [p for p in args.protocols.split(",") if p]
    print(f"server CPU {SERVER_CPU}, load CPU {CLIENT_CPU}, {args.rounds} rounds x {args.seconds}s")
    results: dict[str, dict[str, list[Run]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for protocol in protocols:
            load = load_for(protocol, args.connections, args.ghz, Path(tmp))
            with ExitStack() as stack:
                svcs = {
                    m: stack.enter_context(service(protocol, SERVER_CPU, ("--metrics", m)))
                    for m in ("on", "off")
                }
                for svc in svcs.values():
                    load(svc, 2)  # warm-up, discarded
                runs: dict[str, list[Run]] = {"on": [], "off": []}
                results[protocol] = runs
                for round_ in range(args.rounds):
                    # Alternate which variant goes first so drift on a shared machine hits both.
                    for metrics in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
                        runs[metrics].append(load(svcs[metrics], args.seconds))
                    on, off = runs["on"][-1], runs["off"][-1]
                    print(f"{protocol:4} round {round_}: on {on.rps:8.1f} req/s {on.per_cpu:8.1f} "
                          f"req/CPU-s | off {off.rps:8.1f} req/s {off.per_cpu:8.1f} req/CPU-s",
                          flush=True)  # fmt: skip
    print(f"\nmetrics on/off, median of rounds (goal >= {GOAL})")
    for protocol, runs in results.items():
        per_cpu = _ratio(runs["on"], runs["off"], "per_cpu")
        rps = _ratio(runs["on"], runs["off"], "rps")
        verdict = "meets" if per_cpu >= GOAL else "MISSES"
        print(f"{protocol:4} requests per server CPU-second {per_cpu:.3f} ({verdict} the goal); "
              f"requests per second {rps:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

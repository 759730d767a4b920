"""Benchmark: the lab's Locust users vs bare Locust users on one core; prints lab/bare ratios."""

from __future__ import annotations

import csv
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from wirelab_bench.knobs import REPO, parser

from wirelab_perf.svcprocs import CLIENT_CPU, SERVER_CPU, pinned, service

LAB_LOCUSTFILE = REPO / "locust" / "locustfile.py"
BARE_LOCUSTFILE = REPO / "locust" / "baseline_locustfile.py"


@dataclass(frozen=True)
class Lab:
    rest: str
    grpc: str


def exit_on_sigterm() -> None:
    """SIGTERM raises SystemExit, so the services started here are stopped on the way out."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


@contextmanager
def services(cpu: int = SERVER_CPU, metrics: str = "off") -> Iterator[Lab]:
    """Both services on 127.0.0.1 free ports, pinned to ``cpu``; metrics off by default so the
    server has headroom and the load generator is what is measured."""
    extra = ("--metrics", metrics)
    with service("rest", cpu, extra) as rest, service("grpc", cpu, extra) as rpc:
        yield Lab(rest.address, rpc.address)


@dataclass(frozen=True)
class Result:
    requests: int
    failures: int
    rps: float
    cpu_seconds: float
    median_ms: float  # Locust's own: whole milliseconds below 100 ms
    mean_ms: float


def run_locust(
    args: list[str], seconds: float, cpu: int = CLIENT_CPU, env: dict[str, str] | None = None
) -> Result:
    """Headless Locust for ``seconds`` pinned to ``cpu``; counts from its CSV, CPU from rusage."""
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(tmp) / "run"
        cmd = [
            sys.executable,
            "-m",
            "locust",
            "--headless",
            "--only-summary",
            "-t",
            f"{seconds:g}s",
        ]
        cmd += ["--csv", str(prefix), "--exit-code-on-error", "0", "--loglevel", "ERROR", *args]
        log = Path(tmp) / "locust.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                pinned(cmd, cpu),
                cwd=tmp,
                stdout=out,
                stderr=out,
                # Locust inherits this environment, plus the knobs the arm sets.
                env={**os.environ, **(env or {})},
            )
            # wait4 gives the child's own CPU time (rusage), which Popen.wait does not.
            _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"locust failed: {' '.join(cmd)}\n{log.read_text()[-2000:]}")
        with (Path(tmp) / "run_stats.csv").open() as f:
            row = next(r for r in csv.DictReader(f) if r["Name"] == "Aggregated")
    return Result(
        int(row["Request Count"]),
        int(row["Failure Count"]),
        float(row["Requests/s"]),
        usage.ru_utime + usage.ru_stime,
        float(row["Median Response Time"]),
        float(row["Average Response Time"]),
    )


def arm_args(arm: str, protocol: str, lab: Lab, users: int) -> list[str]:
    swarm = ["-u", str(users), "-r", str(users)]
    if arm == "bare":
        host = lab.rest if protocol == "rest" else lab.grpc
        cls = "BareRest" if protocol == "rest" else "BareGrpc"
        return ["-f", str(BARE_LOCUSTFILE), "-H", host, *swarm, cls]
    return [
        *("-f", str(LAB_LOCUSTFILE), "-H", lab.rest, "--rest-host", lab.rest),
        *("--grpc-target", lab.grpc, "--protocols", protocol, "--mix", "unary=1"),
        *("--metrics-port", "0", *swarm),
    ]


# (flag, type, default, help); each also reads WIRELAB_OVERHEAD_<FLAG>.


def main(argv: list[str] | None = None) -> int:
    prog = "wirelab perf locust-overhead"
    args = parser(prog, __doc__, "WIRELAB_OVERHEAD").parse_args(argv)
    exit_on_sigterm()
    results: dict[tuple[str, str], list[Result]] = {}
    with services() as lab:
        for protocol in ("rest", "grpc"):
            run_locust(arm_args("lab", protocol, lab, args.users), 3)  # warm-up, discarded
            for round_ in range(args.rounds):
                # Alternate which arm goes first so drift on a shared machine hits both alike.
                for arm in ("lab", "bare") if round_ % 2 == 0 else ("bare", "lab"):
                    r = run_locust(arm_args(arm, protocol, lab, args.users), args.seconds)
                    results.setdefault((protocol, arm), []).append(r)
                    print(f"{protocol:4} {arm:4} round {round_}: {r.rps:8.1f} req/s, "
                          f"{r.requests / r.cpu_seconds:8.1f} req per client CPU-s, "
                          f"{r.failures} failures", flush=True)  # fmt: skip
    print("\nratio lab/bare (median of rounds; goal >= 0.90)")
    worst = 1.0
    for protocol in ("rest", "grpc"):
        lab_r, bare_r = results[(protocol, "lab")], results[(protocol, "bare")]
        rps = statistics.median(r.rps for r in lab_r) / statistics.median(r.rps for r in bare_r)
        per_cpu = statistics.median(r.requests / r.cpu_seconds for r in lab_r) / statistics.median(
            r.requests / r.cpu_seconds for r in bare_r
        )
        worst = min(worst, rps)
        print(f"{protocol}: requests/s {rps:.3f}   requests per client CPU-second {per_cpu:.3f}")
    return 0 if worst >= 0.9 else 1


if __name__ == "__main__":
    sys.exit(main())

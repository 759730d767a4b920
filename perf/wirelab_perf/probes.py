"""Benchmark: what each service's container healthcheck costs, in CPU, inside its container.

Docker runs compose.yaml's healthcheck every ``interval`` in the service's own container, so its
CPU is counted in cAdvisor's figure for that container and against its CPU limit: an uneven cost
between services reads as an uneven cost between protocols or runtimes. This runs each service
(Python and, where node is installed, Node.js, REST and gRPC) on a free port and, against it, the
exact command its compose healthcheck runs, ``--checks`` times; it prints the CPU of one check
(user + system, the median and the range) and the share of a core that makes at compose's
interval.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import yaml
from wirelab_bench.knobs import REPO, listed, parser

from wirelab_perf.node import SERVICES as NODE_SERVICES
from wirelab_perf.node import node_process
from wirelab_perf.svcprocs import Service, pinned, service

# compose service -> (runtime, protocol).
CHECKED = {
    "rest": ("python", "rest"),
    "grpc": ("python", "grpc"),
    "rest-node": ("node", "rest"),
    "grpc-node": ("node", "grpc"),
}


@dataclass(frozen=True)
class Healthcheck:
    command: list[str]  # as run here: the image's paths mapped onto the checkout's
    interval_s: float


def _seconds(text: str) -> float:
    """A compose duration of whole seconds or minutes ("10s", "1m"), or a variable with its
    default (``${WIRELAB_HEALTHCHECK_INTERVAL:-10s}``) as compose would read it here."""
    if variable := re.fullmatch(r"\$\{(\w+):-([^}]*)\}", text):
        # As compose resolves it: the variable, else the default compose.yaml writes (which
        # tests/config/test_knobs.py holds to the knob table's).
        text = os.environ.get(variable[1]) or variable[2]
    units = {"s": 1.0, "m": 60.0}
    return float(text[:-1]) * units[text[-1]]


def healthchecks() -> dict[str, Healthcheck]:
    """compose.yaml's healthcheck of each checked service, runnable from the checkout."""
    services = yaml.safe_load((REPO / "compose.yaml").read_text())["services"]
    found = {}
    for name in CHECKED:
        check = services[name]["healthcheck"]
        kind, *command = check["test"]
        assert kind == "CMD", f"{name}: healthcheck {check['test']} is not an exec form"
        mapped = [
            sys.executable if part == "python" else part.replace("/app/", f"{REPO}/")
            for part in command
        ]
        found[name] = Healthcheck(mapped, _seconds(check["interval"]))
    return found


def _started(name: str, node: str) -> AbstractContextManager[Service]:
    runtime, protocol = CHECKED[name]
    if runtime == "node":
        return node_process(node, protocol, NODE_SERVICES[protocol], "on")
    return service(protocol, 0)


def environment(svc: Service, protocol: str) -> dict[str, str]:
    """The variables the container gives its check, pointed at ``svc``."""
    port = svc.address.rsplit(":", 1)[1]
    # The check inherits this environment, as the container's gives it the service's knobs.
    return {**os.environ, "WIRELAB_HOST": "127.0.0.1", f"WIRELAB_{protocol.upper()}_PORT": port}


def cpu_per_check(
    command: Sequence[str], env: dict[str, str], checks: int, cpu: int
) -> list[float]:
    """CPU seconds (user + system) of each run of ``command`` on ``cpu``; each must exit 0."""
    spent = []
    for _ in range(checks):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            pinned(command, cpu), env=env, capture_output=True, text=True, timeout=30
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-500:]}")
        spent.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return spent


def main(argv: Sequence[str] | None = None) -> int:
    prog = "wirelab perf probes"
    cli = parser(prog, __doc__, "WIRELAB_PROBES")
    args = cli.parse_args(argv)
    names = listed(cli, args.services, CHECKED, "service")
    node = shutil.which("node") or ""
    if not node:
        names = [n for n in names if CHECKED[n][0] != "node"]
        print("node not found: the Node.js services are left out")
    checks = healthchecks()
    print(f"{args.checks} checks per service, CPU per check (user + system)\n")
    print(f"{'service':<10} {'command':<40} {'median ms':>9} {'range ms':>13} {'% of a core':>12}")
    for name in names:
        check = checks[name]
        with _started(name, node) as svc:
            env = environment(svc, CHECKED[name][1])
            spent = cpu_per_check(check.command, env, args.checks, args.cpu)
        median = statistics.median(spent)
        shown = " ".join(p.removeprefix(f"{REPO}/") for p in check.command[1:])
        span = f"{1000 * min(spent):.0f}-{1000 * max(spent):.0f}"
        share = 100 * median / check.interval_s
        print(f"{name:<10} {shown:<40} {1000 * median:>9.0f} {span:>13} "
              f"{share:>8.1f} at {check.interval_s:g}s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Is a stack up: every service's tasks running, as many as wanted, and every container with a
healthcheck healthy. `python3 -m swarm.health STACK --timeout 600` waits for it (swarm/up)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


@dataclass(frozen=True)
class Service:
    name: str  # without the stack's prefix: the compose service's name
    running: int
    wanted: int


def services(stack: str) -> list[Service]:
    """Each service of ``stack`` with its running and wanted task counts (global: one a node)."""
    out = _docker("stack", "services", stack, "--format", "{{.Name}} {{.Replicas}}")
    found = []
    for line in out.splitlines():
        name, replicas = line.split()[:2]
        running, _, wanted = replicas.partition("/")
        found.append(Service(name.removeprefix(f"{stack}_"), int(running), int(wanted)))
    return found


def containers(stack: str) -> dict[str, list[str]]:
    """This node's running containers of ``stack`` by service: each one's health (healthy,
    starting, unhealthy, or none without a healthcheck)."""
    out = _docker(
        "ps", "--filter", f"label=com.docker.stack.namespace={stack}",
        "--format", '{{.Label "com.docker.compose.service"}}\t{{.Status}}',
    )  # fmt: skip
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        service, status = line.split("\t")
        health = "none"
        for state in ("healthy", "unhealthy", "health: starting"):
            if f"({state})" in status:
                health = state.removeprefix("health: ")
        found.setdefault(service, []).append(health)
    return found


def updating(stack: str) -> list[str]:
    """Services of ``stack`` whose update (a redeploy's new spec) has not completed: their old
    tasks may still be running, and healthy, in the new ones' place."""
    names = [f"{stack}_{s.name}" for s in services(stack)]
    out = _docker(
        "service", "inspect", "--format",
        "{{.Spec.Name}} {{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}", *names,
    )  # fmt: skip
    states = ([*line.split(), ""] for line in out.splitlines())
    return [n.removeprefix(f"{stack}_") for n, state, *_ in states if state in ("updating",)]


def problems(stack: str) -> list[str]:
    """What keeps ``stack`` from being up; empty when it is. Containers on other nodes are
    counted by Swarm (running/wanted); their health only by their node."""
    listed = services(stack)
    if not listed:
        return [f"no service of stack {stack}"]
    found = [f"{s.name}: {s.running}/{s.wanted} tasks" for s in listed if s.running < s.wanted]
    found += [f"{name}: updating" for name in updating(stack)]
    for service, states in sorted(containers(stack).items()):
        found += [f"{service}: {state}" for state in states if state not in ("healthy", "none")]
    return found


def wait(stack: str, timeout: float) -> float:
    """Wait until ``stack`` is up; the seconds it took. Fails with what was still missing."""
    started = time.monotonic()
    missing: list[str] = []
    while time.monotonic() - started < timeout:
        missing = problems(stack)
        if not missing:
            return time.monotonic() - started
        time.sleep(2)
    raise TimeoutError(f"stack {stack} not up after {timeout:g} s: {', '.join(missing)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("stack")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    try:
        took = wait(args.stack, args.timeout)
    except (TimeoutError, RuntimeError) as exc:
        sys.exit(f"swarm: {exc}")
    print(f"swarm: stack {args.stack} up, every task healthy, in {took:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()

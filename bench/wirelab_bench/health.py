"""Wait until the services a run measures answer their health checks; name a dead load path."""

from __future__ import annotations

import shutil
import subprocess
import time

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from wirelab_bench import webclient


def rest_healthy(rest_url: str) -> str | None:
    """None when GET /healthz answers 200; otherwise why not."""
    try:
        response = webclient.client().get(f"{rest_url.rstrip('/')}/healthz", timeout=2.0)
    except httpx.HTTPError as exc:
        return f"REST {rest_url}: {type(exc).__name__}: {exc}"
    return None if response.status_code == 200 else f"REST /healthz answered {response.status_code}"


def grpc_healthy(target: str, what: str = "gRPC") -> str | None:
    """None when the grpc.health.v1 overall status is SERVING; otherwise why not."""
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2.0)
        except grpc.RpcError as exc:
            return f"{what} {target}: {exc.code().name}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        return f"{what} {target}: {status}"
    return None


# The AMQP arm's edge is NOT_SERVING while it cannot reach the broker, and absent from a lab
# started without its profile (docs/broker.md).
AMQP_EDGE = (
    "the AMQP arm's edge (`make lab TOPOLOGY=order-chain PROFILES=amqp`; NOT_SERVING = no broker)"
)


def wait_healthy(
    rest_url: str,
    grpc_target: str,
    protocols: tuple[str, ...],
    timeout: float,
    amqp_target: str = "",
) -> None:
    """Poll until every arm in ``protocols`` is healthy; raise TimeoutError with the reason."""
    checks = {
        "rest": lambda: rest_healthy(rest_url),
        "grpc": lambda: grpc_healthy(grpc_target),
        "amqp": lambda: grpc_healthy(amqp_target, AMQP_EDGE),
    }
    deadline = time.monotonic() + timeout
    while True:
        problems = [p for p in (checks[arm]() for arm in protocols) if p]
        if not problems:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError("; ".join(problems))
        time.sleep(0.5)


def docker_health(project: str, service: str) -> list[str] | None:
    """Docker's own status of each container of ``service`` in compose ``project`` ("Up 3
    minutes (healthy)"), checked inside the compose network; None when Docker cannot say."""
    if shutil.which("docker") is None:
        return None
    try:
        done = subprocess.run(
            ["docker", "ps", "--filter", f"label=com.docker.compose.project={project}",
             "--filter", f"label=com.docker.compose.service={service}", "--format", "{{.Status}}"],
            capture_output=True, text=True, timeout=10, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return [line for line in done.stdout.splitlines() if line] or None


def load_path_verdict(problem: str, project: str, services: list[str]) -> str:
    """``problem`` (a health check that failed from where the load comes from), said as what
    died: when Docker reports every container of the failing services healthy, the services
    answer inside the compose network and what stopped is the way to them from here, which
    for a published port is Docker's userland proxy: it stops for good at its first failed
    accept (docs/bench.md#a-dead-load-path)."""
    statuses = {s: docker_health(project, s) for s in services}
    if not statuses or any(not found for found in statuses.values()):
        return problem
    if all("(healthy)" in status for found in statuses.values() if found for status in found):
        names = ", ".join(statuses)
        return (
            f"the load path died: {problem}, while Docker reports {names} healthy inside the "
            "compose network; a published port's userland proxy (docker-proxy) stops for good "
            "when an accept fails, as under thousands of connections: recreate the lab "
            "(make lab-down && make lab) and drive such loads from inside the compose network "
            "(make bench WHERE=lab; docs/bench.md#a-dead-load-path)"
        )
    return problem

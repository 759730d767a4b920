"""Wait until the services a run measures answer their health checks."""

from __future__ import annotations

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

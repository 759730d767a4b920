"""Wait until both services answer their health checks."""

from __future__ import annotations

import time

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc


def rest_healthy(rest_url: str) -> str | None:
    """None when GET /healthz answers 200; otherwise why not."""
    try:
        response = httpx.get(f"{rest_url.rstrip('/')}/healthz", timeout=2.0)
    except httpx.HTTPError as exc:
        return f"REST {rest_url}: {type(exc).__name__}: {exc}"
    return None if response.status_code == 200 else f"REST /healthz answered {response.status_code}"


def grpc_healthy(target: str) -> str | None:
    """None when the grpc.health.v1 overall status is SERVING; otherwise why not."""
    with grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2.0)
        except grpc.RpcError as exc:
            return f"gRPC {target}: {exc.code().name}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        return f"gRPC {target}: status {reply.status}"
    return None


def wait_healthy(
    rest_url: str, grpc_target: str, protocols: tuple[str, ...], timeout: float
) -> None:
    """Poll until every protocol in ``protocols`` is healthy; raise TimeoutError with the reason."""
    deadline = time.monotonic() + timeout
    while True:
        problems = [
            p
            for p in (
                rest_healthy(rest_url) if "rest" in protocols else None,
                grpc_healthy(grpc_target) if "grpc" in protocols else None,
            )
            if p
        ]
        if not problems:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError("; ".join(problems))
        time.sleep(0.5)

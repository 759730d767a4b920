"""Container healthcheck: exit 0 when the gRPC health service reports SERVING."""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from wirelab import serving, settings
from wirelab.rpc.server import bind_address


def main() -> int:
    config = settings.load([], prog="python -m wirelab.rpc.healthcheck")
    target = bind_address(serving.local_host(config.host), config.grpc_port)
    try:
        with grpc.insecure_channel(target) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=3
            )
    except grpc.RpcError as exc:
        print(f"unhealthy: {target}: {exc.code().name}", file=sys.stderr)
        return 1
    serving_ok = reply.status == health_pb2.HealthCheckResponse.SERVING
    print("serving" if serving_ok else f"not serving: {reply.status}")
    return 0 if serving_ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The containers' healthchecks, `python -m wirelab.probe rest|grpc|amqp`: exit 0 when the service
in this container answers (REST: GET /healthz is 200; gRPC: the health service says SERVING; the
AMQP consumer: /healthz on its metrics port is 200), else 1 with the reason on stderr.

Docker runs the check every 10 s inside the service's container, so its CPU is counted in
cAdvisor's figure for that container, the figure the dashboards and the runner's container_cpu
columns show. It therefore imports only what its check needs: no knob parser, no server code, and
grpc only for the gRPC check. `wirelab perf probes` measures what one check costs
(docs/observability.md)."""

from __future__ import annotations

import http.client
import json
import os
import sys
from collections.abc import Mapping

from wirelab.contract.folder import FOLDER

TIMEOUT_S = 3.0
# The knob table every part reads (wirelab.contract.knobs parses it for the services).
KNOBS = FOLDER / "knobs.json"


def knob(name: str, environ: Mapping[str, str] = os.environ) -> str:
    """A knob as the services resolve it without arguments: WIRELAB_<NAME>, else its default."""
    # The table's file read here, not through its reader wirelab.contract.table: importing that
    # cost each check 6.7 ms more CPU (62.7 -> 69.4 ms median of 40 runs, 28 Nov, load 4).
    value = environ.get(f"WIRELAB_{name.upper()}")
    if value is not None:
        return value
    table = json.loads(KNOBS.read_text())["knobs"]
    return str(next(k["default"] for k in table if k["name"] == name))


def local_host(host: str) -> str:
    """Where a check in the same container reaches a server bound to ``host``."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def http_ok(host: str, port: int, path: str = "/healthz") -> str | None:
    """None when GET ``path`` answers 200, else why not."""
    connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        connection.request("GET", path)
        reply = connection.getresponse()
        body = reply.read().decode(errors="replace")
    except OSError as exc:
        return str(exc)
    finally:
        connection.close()
    return None if reply.status == 200 else f"{reply.status} {body}".strip()


def grpc_serving(host: str, port: int) -> str | None:
    """None when the gRPC health service reports SERVING for the whole server, else why not."""
    import grpc  # only here: importing it is most of this check's cost
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    # An IPv6 literal goes in brackets, as grpc parses addresses.
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        with grpc.insecure_channel(target) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=TIMEOUT_S
            )
    except grpc.RpcError as exc:
        return str(exc.code().name)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        return f"not serving: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
    return None


# What each service answers on: (check, the knob naming its port).
CHECKS = {
    "rest": (http_ok, "rest_port"),
    "grpc": (grpc_serving, "grpc_port"),
    # The consumer has no API port: its metrics server's /healthz says whether it can serve.
    "amqp": (http_ok, "metrics_port"),
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in CHECKS:
        print(f"usage: python -m wirelab.probe {'|'.join(CHECKS)}", file=sys.stderr)
        return 2
    check, port_knob = CHECKS[args[0]]
    host, port = local_host(knob("host")), int(knob(port_knob))
    problem = check(host, port)
    if problem is not None:
        print(f"unhealthy: {host}:{port}: {problem}", file=sys.stderr)
        return 1
    print("serving")
    return 0


if __name__ == "__main__":
    sys.exit(main())

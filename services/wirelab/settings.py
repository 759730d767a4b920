"""The WIRELAB_* knobs: one table gives each its default, environment variable and --help line."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from wirelab.core import Limits


@dataclass(frozen=True)
class Knob:
    name: str  # attribute name; env variable is WIRELAB_<NAME>, flag is --<name-with-dashes>
    default: str
    help: str
    choices: tuple[str, ...] = ()

    @property
    def env(self) -> str:
        return f"WIRELAB_{self.name.upper()}"


KNOBS = (
    Knob("host", "0.0.0.0", "bind address"),
    Knob("rest_port", "8000", "REST API port (+ /healthz, /openapi.json)"),
    Knob("grpc_port", "50051", "gRPC port"),
    Knob("metrics_port", "9100", "Prometheus /metrics port of either service"),
    Knob(
        "metrics",
        "on",
        "off = no instrumentation at all (observer-effect benchmark)",
        ("on", "off"),
    ),
    Knob("rest_handlers", "async", "sync = plain def handlers in a thread pool", ("async", "sync")),
    Knob("grpc_server", "aio", "sync = grpc.server with a ThreadPoolExecutor", ("aio", "sync")),
    Knob("grpc_threads", "32", "worker threads of the sync gRPC server and the REST sync pool"),
    Knob("max_payload_bytes", "268435456", "largest blob; gRPC message limit is this + 1 MiB"),
    Knob("chunk_bytes", "1048576", "default chunk size of chunked downloads"),
    Knob("max_stream_count", "100000", "largest stream `count`"),
    Knob("max_message_bytes", "4194304", "largest stream message `size` / ping payload"),
    Knob("max_interval_ms", "10000", "largest stream `interval_ms`"),
    Knob("max_work_ms", "60000", "largest order `work_ms`"),
    Knob("max_order_bytes", "1048576", "largest order, as the REST body of POST /v1/orders"),
    Knob(
        "payload_budget_bytes",
        "1342177280",
        "memory one-message payload calls in flight may hold, past which they are refused (0: off)",
    ),
    Knob("grace_seconds", "10", "SIGTERM drain period in seconds"),
    Knob(
        "rest_max_header_bytes", "65536", "REST request line + headers; past it 431 (0 = no limit)"
    ),
    Knob("rest_header_timeout_seconds", "10", "REST headers must arrive within this; else 408"),
    Knob("rest_body_timeout_seconds", "30", "REST body idle this long: the call is cut off, 408"),
    Knob("rest_http", "1.1", "REST server: 1.1 = uvicorn (HTTP/1.1); 2 = Granian, which speaks "
         "HTTP/2 (h2c with prior knowledge, h2 by ALPN under TLS) and HTTP/1.1 on the same port "
         "(docs/http2.md)", ("1.1", "2")),
    Knob("rest_tls_cert", "", "WIRELAB_REST_HTTP=2: PEM certificate to serve TLS with (h2 by "
         "ALPN); empty = cleartext"),
    Knob("rest_tls_key", "", "that certificate's PEM private key"),
    Knob("rest_max_concurrent_calls", "0", "REST HTTP calls at once; past it 503 (0 = no limit)"),
    Knob(
        "grpc_max_concurrent_calls",
        "0",
        "gRPC calls at once; past it RESOURCE_EXHAUSTED (0 = no limit)",
    ),
    # Topologies (docs/topologies.md): a service with downstreams relays each order to them.
    Knob(
        "downstream",
        "",
        "services each order is sent on to, comma separated: http://host:port (REST service), "
        "grpc://host:port (gRPC service) or, from a gRPC service, amqp://broker:port/queue (a "
        "consumer of that queue, python -m wirelab.amqp); a '#name' after an address names its "
        "peer label (a hop reached through a proxy, docs/network.md); empty = none",
    ),
    Knob("fanout", "sequential", "call the downstreams one after another, all at once, or all "
         "at once each counting a piece of the note (split)", ("sequential", "parallel", "split")),
    Knob("local_work", "on", "off = relay only: validate, then answer with the first "
         "downstream's reply instead of doing work_ms here", ("on", "off")),
    Knob("downstream_timeout_seconds", "10",
         "budget of one order's downstream calls, unless the caller's deadline is sooner"),
    Knob("grpc_balancing", "pick_first",
         "gRPC downstreams: pick_first = one connection; round_robin = every address the "
         "host name resolves to (client-side balancing over compose's DNS)",
         ("pick_first", "round_robin")),
    # The AMQP arm (docs/broker.md): hops over RabbitMQ, request/reply on queues.
    Knob("amqp_consume", "", "python -m wirelab.amqp: the queue it serves orders from, "
         "amqp://broker:port/queue"),
    Knob("amqp_user", "wirelab", "RabbitMQ user of the AMQP arm (the broker's, compose.yaml)"),
    Knob("amqp_password", "wirelab", "that user's password"),
    Knob("amqp_persistent", "on", "publish orders as persistent messages (the broker writes "
         "them to disk) or transient ones; the queues are durable either way", ("on", "off")),
    Knob("amqp_shape", "request-reply", "the AMQP edge's orders: answered once every queue's "
         "consumer has replied, or accepted once every queue has them and confirmed later "
         "(the confirmation timed apart)", ("request-reply", "fire-and-forget")),
    Knob("amqp_prefetch", "512",
         "orders a consumer holds unacknowledged at once: how many it works on together"),
)  # fmt: skip


@dataclass(frozen=True)
class Settings:
    host: str = "0.0.0.0"
    rest_port: int = 8000
    grpc_port: int = 50051
    metrics_port: int = 9100
    metrics: bool = True
    rest_handlers: str = "async"
    grpc_server: str = "aio"
    grpc_threads: int = 32
    grace_seconds: float = 10.0
    limits: Limits = field(default_factory=Limits)
    rest_max_header_bytes: int = 65536
    rest_header_timeout_seconds: float = 10.0
    rest_body_timeout_seconds: float = 30.0
    rest_http: str = "1.1"
    rest_tls_cert: str = ""
    rest_tls_key: str = ""
    rest_max_concurrent_calls: int = 0
    grpc_max_concurrent_calls: int = 0
    downstream: tuple[str, ...] = ()
    fanout: str = "sequential"
    local_work: bool = True
    downstream_timeout_seconds: float = 10.0
    grpc_balancing: str = "pick_first"
    amqp_consume: str = ""
    amqp_user: str = "wirelab"
    amqp_password: str = "wirelab"
    amqp_persistent: bool = True
    amqp_prefetch: int = 512
    amqp_shape: str = "request-reply"

    @property
    def grpc_max_message_bytes(self) -> int:
        # Room for the protobuf framing around the largest blob.
        return self.limits.max_payload_bytes + 1024 * 1024


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return value


def parser(
    prog: str, description: str, environ: Mapping[str, str] | None = None
) -> argparse.ArgumentParser:
    """Command-line parser whose defaults come from the environment, then from the knob table."""
    env = os.environ if environ is None else environ
    p = argparse.ArgumentParser(prog=prog, description=description)
    for knob in KNOBS:
        p.add_argument(
            f"--{knob.name.replace('_', '-')}",
            default=env.get(knob.env, knob.default),
            choices=knob.choices or None,
            help=f"{knob.help} (env {knob.env}, default {knob.default})",
        )
    return p


def load(
    argv: Sequence[str] | None = None,
    *,
    prog: str = "wirelab",
    description: str = "",
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every knob from argv, then WIRELAB_* variables, then defaults."""
    p = parser(prog, description, environ)
    ns = vars(p.parse_args(argv))
    try:
        ints = {k.name: _positive_int(ns[k.name]) for k in KNOBS if k.default.isdigit()}
    except (ValueError, argparse.ArgumentTypeError) as exc:
        p.error(f"bad integer knob: {exc}")
    for knob in KNOBS:
        if knob.choices and ns[knob.name] not in knob.choices:
            p.error(f"{knob.env} must be one of {', '.join(knob.choices)}")
    limits = Limits(
        max_payload_bytes=ints["max_payload_bytes"],
        chunk_bytes=ints["chunk_bytes"],
        max_stream_count=ints["max_stream_count"],
        max_message_bytes=ints["max_message_bytes"],
        max_interval_ms=ints["max_interval_ms"],
        max_work_ms=ints["max_work_ms"],
        max_order_bytes=ints["max_order_bytes"],
        payload_budget_bytes=ints["payload_budget_bytes"],
    )
    return Settings(
        host=ns["host"],
        rest_port=ints["rest_port"],
        grpc_port=ints["grpc_port"],
        metrics_port=ints["metrics_port"],
        metrics=ns["metrics"] == "on",
        rest_handlers=ns["rest_handlers"],
        grpc_server=ns["grpc_server"],
        grpc_threads=max(1, ints["grpc_threads"]),
        grace_seconds=float(ints["grace_seconds"]),
        limits=limits,
        rest_max_header_bytes=ints["rest_max_header_bytes"],
        rest_header_timeout_seconds=float(ints["rest_header_timeout_seconds"]),
        rest_body_timeout_seconds=float(ints["rest_body_timeout_seconds"]),
        rest_http=ns["rest_http"],
        rest_tls_cert=ns["rest_tls_cert"],
        rest_tls_key=ns["rest_tls_key"],
        rest_max_concurrent_calls=ints["rest_max_concurrent_calls"],
        grpc_max_concurrent_calls=ints["grpc_max_concurrent_calls"],
        downstream=tuple(d.strip() for d in ns["downstream"].split(",") if d.strip()),
        fanout=ns["fanout"],
        local_work=ns["local_work"] == "on",
        downstream_timeout_seconds=float(ints["downstream_timeout_seconds"]),
        grpc_balancing=ns["grpc_balancing"],
        amqp_consume=ns["amqp_consume"],
        amqp_user=ns["amqp_user"],
        amqp_password=ns["amqp_password"],
        amqp_persistent=ns["amqp_persistent"] == "on",
        amqp_prefetch=max(1, ints["amqp_prefetch"]),
        amqp_shape=ns["amqp_shape"],
    )

"""The Python services' knobs as typed fields: generated from contract/knobs.json by
`python -m wirelab.contract.fieldgen`; do not edit."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limits:
    """Largest values the services accept: the knobs the table marks limits."""

    max_payload_bytes: int = 268435456
    chunk_bytes: int = 1048576
    max_stream_count: int = 100000
    max_message_bytes: int = 4194304
    max_interval_ms: int = 10000
    max_work_ms: int = 60000
    max_order_bytes: int = 1048576
    payload_budget_bytes: int = 1342177280


@dataclass(frozen=True)
class Fields:
    """Every other knob the Python services honour, resolved."""

    host: str = "0.0.0.0"
    rest_port: int = 8000
    grpc_port: int = 50051
    metrics_port: int = 9100
    metrics: bool = True
    rest_handlers: str = "async"
    grpc_server: str = "aio"
    grpc_threads: int = 32
    grace_seconds: float = 10.0
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
    rest_client: str = "aiohttp"
    downstream_timeout_seconds: float = 10.0
    grpc_balancing: str = "pick_first"
    amqp_consume: str = ""
    amqp_user: str = "wirelab"
    amqp_password: str = "wirelab"
    amqp_persistent: bool = True
    amqp_shape: str = "request-reply"
    amqp_prefetch: int = 512
    traces: bool = False
    trace_sample_ratio: float = 0.001
    traces_endpoint: str = "http://127.0.0.1:4318"
    service_name: str = ""
    limits: Limits = field(default_factory=Limits)

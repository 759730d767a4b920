"""The WIRELAB_* knobs this runtime honours, from the table both runtimes read (knobs.json)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from wirelab.contract.knobs import DEFAULTS, Knob
from wirelab.contract.knobs import KNOBS as ALL_KNOBS
from wirelab.core import Limits

# The knobs this runtime honours, from the table both runtimes read (contract/knobs.json). Each is
# a field of Settings, or of its Limits, by the same name.
KNOBS: tuple[Knob, ...] = tuple(k for k in ALL_KNOBS if "python" in k.runtimes)
D = DEFAULTS
_LIMITS = tuple(f.name for f in fields(Limits))
# On/off knobs, booleans in Settings.
_ON_OFF = ("metrics", "local_work", "amqp_persistent", "traces")


@dataclass(frozen=True)
class Settings:
    """Every knob resolved; the defaults are the table's."""

    host: str = D["host"]
    rest_port: int = D["rest_port"]
    grpc_port: int = D["grpc_port"]
    metrics_port: int = D["metrics_port"]
    metrics: bool = D["metrics"] == "on"
    rest_handlers: str = D["rest_handlers"]
    grpc_server: str = D["grpc_server"]
    grpc_threads: int = D["grpc_threads"]
    grace_seconds: float = D["grace_seconds"]
    limits: Limits = field(default_factory=Limits)
    rest_max_header_bytes: int = D["rest_max_header_bytes"]
    rest_header_timeout_seconds: float = D["rest_header_timeout_seconds"]
    rest_body_timeout_seconds: float = D["rest_body_timeout_seconds"]
    rest_http: str = D["rest_http"]
    rest_tls_cert: str = D["rest_tls_cert"]
    rest_tls_key: str = D["rest_tls_key"]
    rest_max_concurrent_calls: int = D["rest_max_concurrent_calls"]
    grpc_max_concurrent_calls: int = D["grpc_max_concurrent_calls"]
    downstream: tuple[str, ...] = ()
    fanout: str = D["fanout"]
    local_work: bool = D["local_work"] == "on"
    downstream_timeout_seconds: float = D["downstream_timeout_seconds"]
    grpc_balancing: str = D["grpc_balancing"]
    amqp_consume: str = D["amqp_consume"]
    amqp_user: str = D["amqp_user"]
    amqp_password: str = D["amqp_password"]
    amqp_persistent: bool = D["amqp_persistent"] == "on"
    amqp_prefetch: int = D["amqp_prefetch"]
    amqp_shape: str = D["amqp_shape"]
    rest_client: str = D["rest_client"]
    traces: bool = D["traces"] == "on"
    trace_sample_ratio: float = D["trace_sample_ratio"]
    traces_endpoint: str = D["traces_endpoint"]
    service_name: str = D["service_name"]

    @property
    def grpc_max_message_bytes(self) -> int:
        # Room for the protobuf framing around the largest blob.
        return self.limits.max_payload_bytes + 1024 * 1024


def parser(
    prog: str, description: str, environ: Mapping[str, str] | None = None
) -> argparse.ArgumentParser:
    """Command-line parser whose defaults come from the environment, then from the knob table."""
    env = os.environ if environ is None else environ
    p = argparse.ArgumentParser(prog=prog, description=description)
    for knob in KNOBS:
        p.add_argument(
            knob.flag,
            default=env.get(knob.env, str(knob.default)),
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
    k: dict[str, Any] = {}
    for knob in KNOBS:
        try:
            k[knob.name] = knob.parse(ns[knob.name])
        except ValueError as exc:
            p.error(str(exc))
    limits = Limits(**{name: k.pop(name) for name in _LIMITS})
    for name in _ON_OFF:
        k[name] = k[name] == "on"
    k["downstream"] = tuple(d.strip() for d in k["downstream"].split(",") if d.strip())
    k["grpc_threads"] = max(1, k["grpc_threads"])
    k["amqp_prefetch"] = max(1, k["amqp_prefetch"])
    return Settings(limits=limits, **k)

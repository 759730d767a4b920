"""A service's relay from its knobs: None without downstreams, else one of its protocol."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from wirelab.hops.confirm import FireAndForget, confirmation
from wirelab.hops.outgoing import families
from wirelab.hops.relay import Relay
from wirelab.hops.via_amqp import amqp_downstreams
from wirelab.hops.via_grpc import GrpcSplitter, grpc_downstreams
from wirelab.hops.via_rest import RestSplitter, rest_downstreams
from wirelab.settings import Settings
from wirelab.traces import Tracing


def build_relay(
    settings: Settings,
    protocol: str,
    registry: CollectorRegistry | None,
    tracing: Tracing | None = None,
) -> Relay[Any, Any] | None:
    """The relay for WIRELAB_DOWNSTREAM, its calls measured in ``registry`` (None: not at all)
    and traced by ``tracing`` (None: not at all). gRPC's is built inside the running event
    loop: grpc.aio channels belong to one."""
    if not settings.downstream:
        return None
    scheme = {"rest": "http://", "grpc": "grpc://"}[protocol]
    # One arm, one protocol on every hop: REST calls REST, gRPC calls gRPC. The AMQP arm's edge
    # is a gRPC service (docs/broker.md): its orders are already the protobuf the queues carry.
    if protocol == "grpc" and all(t.startswith("amqp://") for t in settings.downstream):
        scheme = "amqp://"
    for target in settings.downstream:
        if "+" in target.partition("#")[0] and scheme != "grpc://":
            raise ValueError(f"only a gRPC downstream takes several addresses (+): {target}")
        if not target.startswith(scheme):
            raise ValueError(
                f"a {protocol} service's downstreams must be {scheme}host:port"
                f"{' (or all amqp://broker:port/queue)' if protocol == 'grpc' else ''}: {target}"
            )
    if (settings.rest_handlers if protocol == "rest" else settings.grpc_server) == "sync":
        raise ValueError("a service with downstreams runs the async server (its calls are awaited)")
    measured = None if registry is None else families(registry)
    split = settings.fanout == "split"
    splitter: Any
    if protocol == "rest":
        client = settings.rest_client
        downstreams: list[Any] = rest_downstreams(settings.downstream, measured, client, tracing)
        splitter = RestSplitter() if split else None
    elif scheme == "amqp://":
        later = settings.amqp_shape == "fire-and-forget"
        if later and (not settings.local_work or split):
            raise ValueError(
                "a fire-and-forget edge answers with its own reply: it needs "
                "WIRELAB_LOCAL_WORK=on and a fanout other than split"
            )
        downstreams = amqp_downstreams(
            settings.downstream,
            settings.amqp_user,
            settings.amqp_password,
            settings.amqp_persistent,
            measured,
            None if tracing is None else tracing.tracer,
        )
        if later:
            confirmed = None if registry is None else confirmation(registry)
            timeout = settings.downstream_timeout_seconds
            return FireAndForget(downstreams, True, True, timeout, confirmed=confirmed)
        splitter = GrpcSplitter() if split else None
    else:
        downstreams = grpc_downstreams(
            settings.downstream,
            settings.grpc_balancing,
            settings.grpc_max_message_bytes,
            measured,
            tracing,
        )
        splitter = GrpcSplitter() if split else None
    return Relay(
        downstreams,
        parallel=settings.fanout == "parallel",
        local_work=settings.local_work,
        timeout=settings.downstream_timeout_seconds,
        splitter=splitter,
    )

"""Dashboard wirelab-topology: an order's path hop by hop, REST (left) and gRPC (right)."""

from __future__ import annotations

from collections.abc import Callable

from wirelab.contract import EDGE_PROTOCOLS

from grafana.board import (
    CLIENT_BUCKETS,
    INTERVALS,
    QUANTILES,
    SERVER_BUCKETS,
    Dashboard,
    exemplars,
    interval_variable,
    quantiles,
)
from grafana.panels import Json, Q, row, text, timeseries

SERVER_LATENCY = (
    "protocol_service_quantile:wirelab_server_request_duration_seconds:histogram_quantile_rate30s"
)
CLIENT_LATENCY = (
    "protocol_service_peer_quantile:wirelab_client_request_duration_seconds"
    ":histogram_quantile_rate30s"
)
TRANSPORT = "protocol_service_peer:wirelab_hop_transport_seconds:mean30s"


def _role(pattern: str, colour: str) -> Json:
    return {
        "matcher": {"id": "byRegexp", "options": f"^({pattern})( .*)?$"},
        "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": colour}}],
    }


# Legends start with the service (or the peer) a line is about. The edge keeps its protocol's
# colour (the defaults' ^rest / ^grpc); each hop role has one colour on both sides, so REST's
# rest-b and gRPC's grpc-b are both green. `lb` (cluster) fronts the b replicas: their colour.
ROLES = [
    _role("(rest|grpc)-b|lb", "green"),
    _role("(rest|grpc)-product", "purple"),
    _role("(rest|grpc)-customer", "yellow"),
    _role("(rest|grpc)-shipping", "red"),
]
NAMES = {"rest": "REST", "grpc": "gRPC"}


def _pair(panel: Callable[[str], Json]) -> list[Json]:
    """One panel per protocol, side by side: REST on the left, gRPC on the right."""
    return [panel(p) for p in EDGE_PROTOCOLS]


def _edge_latency(protocol: str) -> Json:
    client = f'service="locust", peer="{protocol}", protocol="{protocol}"'
    server = f'service="{protocol}", protocol="{protocol}"'
    return timeseries(
        f"End-to-end latency, {NAMES[protocol]}",
        "Orders (ProcessOrder) p50/p95/p99 over 30 s: as Locust timed them (client, dashed: "
        "network, the edge and every hop behind it) and inside the edge service (edge: request "
        "arrival to reply, its downstream calls included); with traces on, the edge's sampled "
        "orders as points, each linked to its trace in Jaeger.",
        [
            *quantiles(CLIENT_LATENCY, client, f"{protocol} client"),
            *quantiles(SERVER_LATENCY, server, f"{protocol} edge"),
            exemplars(f'{SERVER_BUCKETS}{{{server}, kind="unary"}}'),
        ],
        "s",
        w=12,
    )


def _failed_orders(protocol: str) -> Json:
    return timeseries(
        f"Failed orders/s, {NAMES[protocol]}",
        "Orders per second Locust counted as failed: a wrong answer or slower than its "
        "--fail-over-ms (900 ms in the order-chain scenario); protocol:wirelab_client_failed_"
        "orders:rate30s. Errors the edge returned are under Downstream errors when a hop caused "
        "them.",
        [Q(f'protocol:wirelab_client_failed_orders:rate30s{{protocol="{protocol}"}}',
           f"{protocol} failed orders")],
        "reqps",
        w=12,
        h=6,
    )  # fmt: skip


def _calls(protocol: str) -> Json:
    return timeseries(
        f"Orders/s per service, {NAMES[protocol]}",
        "Orders each service served per second (server side, 30 s; every replica of a service "
        "summed). Each hop serves what its caller sent: a hop below its caller lost calls.",
        [Q(f'protocol_service:wirelab_server_requests:rate30s{{protocol="{protocol}"}}',
           "{{service}}")],
        "reqps",
        overrides=ROLES,
        w=12,
    )  # fmt: skip


def _time_per_hop(protocol: str) -> Json:
    return timeseries(
        f"Time per hop, {NAMES[protocol]}",
        "Server-side duration of an order in each service, p50 solid, p95 dashed, p99 dotted "
        "(30 s). A service's time includes the calls it makes: the edge's covers every hop "
        "behind it, a hop's the work it does. With traces on, sampled orders as points, each "
        "linked to its trace in Jaeger.",
        [
            *[
                Q(
                    f'{SERVER_LATENCY}{{protocol="{protocol}", quantile="{q}"}}',
                    f"{{{{service}}}} {p}",
                )
                for q, p in QUANTILES
            ],
            exemplars(f'{SERVER_BUCKETS}{{protocol="{protocol}", kind="unary"}}'),
        ],
        "s",
        overrides=ROLES,
        w=12,
    )


def _transport(protocol: str) -> Json:
    return timeseries(
        f"Transport time per hop, {NAMES[protocol]}",
        "Per caller and peer: the caller's mean call duration minus the peer service's mean "
        "serving time, 30 s (protocol_service_peer:wirelab_hop_transport_seconds:mean30s). "
        "What the protocol costs on that hop: network, (de)serialisation, connections and the "
        "client library; through `lb` the balancer too. Means: a p99 difference means nothing.",
        [Q(f'{TRANSPORT}{{protocol="{protocol}"}}', "{{peer}} from {{service}}")],
        "s",
        overrides=ROLES,
        w=12,
    )


def _replica_share(protocol: str) -> Json:
    return timeseries(
        f"Per-replica share of {protocol}-b",
        f"Share of {protocol}-b's orders each replica (instance, one per address compose's DNS "
        "gives) served, 30 s; with PROFILES=node also each replica's share of "
        f"{protocol}-node-b's (the Node.js cluster behind lb-node). Even thirds when calls are "
        "spread; one replica at 1 when a client pins them (gRPC's pick_first over one HTTP/2 "
        "connection).",
        [Q("protocol_service_instance:wirelab_server_requests:share_rate30s"
           f'{{protocol="{protocol}", service=~"{protocol}-b|{protocol}-node-b"}}',
           "{{service}} {{instance}}")],
        "percentunit",
        w=12,
    )  # fmt: skip


def _downstream_errors(protocol: str) -> Json:
    return timeseries(
        f"Downstream errors/s, {NAMES[protocol]}",
        "Services' outgoing orders that did not end ok, by peer called and outcome (rate of "
        "wirelab_client_requests_total over $interval, Locust's own calls excluded): "
        "connection_error = refused or unreachable, timeout = past the deadline, else the "
        "peer's status.",
        [
            Q(
                "sum by (service, peer, outcome) (rate(wirelab_client_requests_total"
                f'{{job!="locust", protocol="{protocol}", kind="unary", outcome!="ok"}}'
                "[$interval]))",
                "{{peer}} {{outcome}} from {{service}}",
            )
        ],
        "reqps",
        overrides=ROLES,
        w=12,
    )


# The AMQP arm (order-chain with the amqp profile; docs/broker.md): its edge is the gRPC service
# `amqp`, its hops queue consumers; amqp-* take their role's colour like rest-* and grpc-*.
AMQP_ROLES = [
    _role("amqp-product", "purple"),
    _role("amqp-customer", "yellow"),
    _role("amqp-shipping", "red"),
]
QUEUES = 'queue=~"amqp-.*|wirelab.dead-letter"'


def _amqp_panels() -> list[Json]:
    broker = "sum by (queue) ({metric}{{" + QUEUES + "}})"
    return [
        timeseries(
            "AMQP arm: end to end and per hop",
            "p50/p95/p99 over 30 s: the edge `amqp` (a gRPC service: request arrival to reply, "
            "all three hops included) and, per queue, its calls through the broker (publish with "
            "confirm to reply: peer = the queue, named after its consumer). With traces on, "
            "sampled orders as points, each linked to its trace in Jaeger.",
            [
                *quantiles(SERVER_LATENCY, 'service="amqp"', "amqp edge"),
                *[Q(f'{CLIENT_LATENCY}{{protocol="amqp", quantile="{q}"}}', f"{{{{peer}}}} {p}")
                  for q, p in QUANTILES],
                exemplars(f'{SERVER_BUCKETS}{{service="amqp", kind="unary"}}',
                          f'{CLIENT_BUCKETS}{{protocol="amqp", kind="unary"}}'),
            ],
            "s",
            overrides=AMQP_ROLES,
            w=12,
        ),
        timeseries(
            "AMQP arm: consumers' time and transport per hop",
            "Each consumer's time per order, delivery to ack, p50 (30 s), and the transport "
            "of each hop: the edge's mean call minus the consumer's mean time, i.e. the broker "
            "both ways, publisher confirms and the reply queue (wirelab_hop_transport_seconds); "
            "with traces on, sampled orders as points, each linked to its trace in Jaeger.",
            [
                Q(f'{SERVER_LATENCY}{{protocol="amqp", quantile="0.5"}}', "{{service}} p50"),
                Q(f'{TRANSPORT}{{protocol="amqp"}}', "{{peer}} transport"),
                exemplars(f'{SERVER_BUCKETS}{{protocol="amqp", kind="unary"}}'),
            ],
            "s",
            overrides=AMQP_ROLES,
            w=12,
        ),
        timeseries(
            "AMQP arm: orders/s by what became of them",
            "Orders each consumer finished per second ($interval) by code: ack (answered), "
            "dead_letter (bad input, refused), nack (failed, dead-lettered), requeue (left for "
            "redelivery when the consumer or its broker went away).",
            [Q("sum by (service, code) (rate(wirelab_server_requests_total"
               '{protocol="amqp", kind="unary"}[$interval]))', "{{service}} {{code}}")],
            "reqps",
            overrides=AMQP_ROLES,
            w=12,
        ),
        timeseries(
            "AMQP arm: queues",
            "Messages ready (waiting for a consumer) and unacknowledged (with a consumer) per "
            "order queue, and the dead-letter queue's depth (refused and expired orders, bounded "
            "to 10,000); the broker refreshes these every 5 s.",
            [
                Q(broker.format(metric="rabbitmq_detailed_queue_messages_ready"),
                  "{{queue}} ready"),
                Q(broker.format(metric="rabbitmq_detailed_queue_messages_unacked"),
                  "{{queue}} unacked"),
            ],
            "short",
            w=12,
        ),
        timeseries(
            "AMQP arm: the broker's messages/s",
            "Node-wide, per second over $interval: published (received), confirmed to the "
            "publisher, delivered to consumers, acknowledged by them. An order is two messages: "
            "the order and its reply.",
            [
                Q(f"sum(rate(rabbitmq_global_messages_{m}_total[$interval]))", m)
                for m in ("received", "confirmed", "delivered", "acknowledged")
            ],
            "short",
            w=12,
        ),
    ]  # fmt: skip


def topology() -> Dashboard:
    d = Dashboard(
        "wirelab-topology",
        "wirelab: topology",
        "An order's path through a topology hop by hop, REST left and gRPC right.",
        [interval_variable(INTERVALS, "30s")],
    )
    d.add(
        text(
            "How to read this",
            "For the topologies of `topologies/` (`make lab TOPOLOGY=a-to-b`, `order-chain`, "
            "`cluster`; docs/topologies.md): REST on the **left**, gRPC on the **right**. The "
            "edge (`rest`, `grpc`) keeps its protocol's colour; `-b` (and `lb`) is green, "
            "`-product` purple, `-customer` yellow, `-shipping` red. Services are told apart by "
            "their scrape target's `service` label, outgoing calls by `peer` (the host called). "
            "Orders only (ProcessOrder); rates and quantiles are the *wirelab-topology* recording "
            "rules over **30 s**. Without a topology only the edge and Locust have lines.",
            h=3,
        ),
        row("End to end"),
        *_pair(_edge_latency),
        *_pair(_failed_orders),
        row("Hop by hop"),
        *_pair(_calls),
        *_pair(_time_per_hop),
        *_pair(_transport),
        *_pair(_downstream_errors),
        row("Replicas (cluster)"),
        *_pair(_replica_share),
        row("AMQP arm (order-chain with PROFILES=amqp)"),
        *_amqp_panels(),
    )
    return d

"""Dashboard wirelab-load-generator: Locust's side, and whether it is the bottleneck."""

from __future__ import annotations

from grafana.board import (
    CLIENT_LATENCY,
    GENERATOR_LATENCY,
    INTERVALS,
    KIND,
    KINDS,
    LOCUST,
    Dashboard,
    custom_variable,
    interval_variable,
)
from grafana.panels import Q, row, stat, table, text, timeseries

# The containers that can set a run's pace: the edges of either runtime, the AMQP arm's, Locust's.
BUSY = '"(rest|grpc)(-node)?|amqp|locust.*"'


def load_generator() -> Dashboard:
    d = Dashboard(
        "wirelab-load-generator",
        "wirelab: load generator",
        "Locust's side: users, requests, failures, client latency, and whether it is the "
        "bottleneck.",
        [custom_variable("kind", "kind", KINDS, ["All"]), interval_variable(INTERVALS, "30s")],
    )
    saturated = [
        {
            "type": "value",
            "options": {
                "0": {"text": "OK: generator has headroom", "color": "green", "index": 0},
                "1": {"text": "SATURATED: numbers measure Locust", "color": "red", "index": 1},
            },
        }
    ]
    d.add(
        text(
            "Is the generator the bottleneck?",
            "When **Generator saturated** turns red, or a process in *Generator CPU* stays "
            "above the red 90 % line, Locust cannot issue requests faster: latencies and "
            "throughput then measure the load generator, not REST or gRPC. Add workers "
            "(`docker compose up -d --scale locust-worker=N`) or lower the user count, and "
            "compare the service containers' CPU below: a service near its CPU limit is the "
            "real bottleneck. The alert *WirelabLoadGeneratorSaturated* fires after 30 s.",
            h=4,
        ),
        stat(
            "Generator saturated",
            "1 when any Locust process is at >= 90 % of a core "
            "(max of wirelab_client_saturated over processes).",
            [Q("max(wirelab_client_saturated)")],
            "none",
            steps=[(None, "green"), (1, "red")],
            mappings=saturated,
            w=6,
        ),
        stat(
            "Users",
            "Running Locust users across all workers (wirelab_client_users).",
            [Q("max(wirelab_client_users)")],
            "none",
            w=6,
        ),
        stat(
            "Workers",
            "Connected Locust workers; 0 means a standalone process (wirelab_client_workers).",
            [Q("max(wirelab_client_workers)")],
            "none",
            w=6,
        ),
        stat(
            "Requests/s",
            "Calls per second Locust completed, all kinds and outcomes "
            "(sum of protocol_kind:wirelab_client_requests:rate30s).",
            [Q("sum(protocol_kind:wirelab_client_requests:rate30s)")],
            "reqps",
            w=6,
        ),
        timeseries(
            "Generator CPU",
            "CPU of each Locust process as a share of one core "
            "(wirelab_client_cpu_usage_ratio). Above the red line (90 %) that process "
            "is the bottleneck.",
            [Q("wirelab_client_cpu_usage_ratio", "{{instance_name}}")],
            "percentunit",
            threshold=0.9,
            w=12,
        ),
        timeseries(
            "Who is busy: containers",
            "CPU cores of the services under test (either runtime, the AMQP arm's edge) and "
            "the load generator containers side by side (cAdvisor, 1 m): the one pinned at "
            "its limit sets the pace.",
            [Q(f"service:container_cpu_usage_seconds:rate1m{{service=~{BUSY}}}", "{{service}}")],
            "short",
            exporter=True,
            w=12,
        ),
        timeseries(
            "Requests/s by kind",
            "Calls per second Locust completed per protocol and "
            "kind (protocol_kind:wirelab_client_requests:rate30s).",
            [
                Q(
                    f"protocol_kind:wirelab_client_requests:rate30s{{{KIND}}}",
                    "{{protocol}} {{kind}}",
                )
            ],
            "reqps",
        ),
        timeseries(
            "Failures/s",
            "Calls per second whose outcome is not ok, by outcome "
            "(failure = wrong answer or over the failure threshold; rate of "
            "wirelab_client_requests_total over $interval).",
            [
                Q(
                    "sum by (protocol, outcome) (rate(wirelab_client_requests_total"
                    f'{{{LOCUST}, outcome!="ok", {KIND}}}[$interval]))',
                    "{{protocol}} {{outcome}}",
                )
            ],
            "reqps",
        ),
        timeseries(
            "Client / server requests",
            "Locust's completed calls per second divided by "
            "the services': about 1 when both sides count the same calls. The services are "
            "every edge of either runtime (Python, Node.js): Locust calls one of each protocol.",
            [
                Q(
                    f"protocol_kind:wirelab_client_requests:rate30s{{{KIND}}} / sum by "
                    f"(protocol, kind) (runtime_protocol_kind:wirelab_server_requests:rate30s"
                    f"{{{KIND}}})",
                    "{{protocol}} {{kind}}",
                )
            ],
            "percentunit",
        ),
        timeseries(
            "Client latency p50",
            "Median call duration as Locust timed it, per protocol and kind (30 s recording rule).",
            [Q(f'{CLIENT_LATENCY}{{{KIND}, quantile="0.5"}}', "{{protocol}} {{kind}}")],
            "s",
        ),
        timeseries(
            "Client latency p95",
            "95th percentile call duration, client side.",
            [Q(f'{CLIENT_LATENCY}{{{KIND}, quantile="0.95"}}', "{{protocol}} {{kind}}")],
            "s",
        ),
        timeseries(
            "Client latency p99",
            "99th percentile call duration, client side.",
            [Q(f'{CLIENT_LATENCY}{{{KIND}, quantile="0.99"}}', "{{protocol}} {{kind}}")],
            "s",
        ),
        table(
            "Failures over the time range",
            "Calls that did not end ok, by protocol, kind "
            "and outcome, over the dashboard's time range (increase over $__range), most "
            "first.",
            [
                Q(
                    "sum by (protocol, kind, outcome) (increase(wirelab_client_requests_total"
                    f'{{{LOCUST}, outcome!="ok", {KIND}}}[$__range]))',
                    "failed calls",
                )
            ],
            {"failed calls": "none"},
        ),
        row("Generators side by side: small calls (unary)"),
        text(
            "Which generator timed it",
            "Locust's small calls beside those of **wirelab-loadgen**, the lab's precise "
            "generator (`make tools`; docs/bench.md), which writes its series into this "
            "Prometheus while it runs. Both time the same call with the same buckets: where "
            "their medians differ, the difference is Locust's own cost, not the protocol's.",
            h=3,
        ),
        timeseries(
            "By generator: unary calls/s",
            "Small calls per second as each generator counted them "
            "(generator_protocol:wirelab_client_requests:rate30s).",
            [Q("generator_protocol:wirelab_client_requests:rate30s", "{{generator}} {{protocol}}")],
            "reqps",
        ),
        timeseries(
            "By generator: unary p50 and p99",
            "Median and 99th percentile of the small call, per generator and protocol "
            "(30 s recording rule over the contract's buckets).",
            [
                Q(f'{GENERATOR_LATENCY}{{quantile="{q}"}}', "{{generator}} {{protocol}} " + p)
                for q, p in (("0.5", "p50"), ("0.99", "p99"))
            ],
            "s",
        ),
    )
    return d

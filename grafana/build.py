"""Write grafana/dashboards/*.json: `python3 -m grafana.build`; a test checks they are current."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from wirelab.metrics import KINDS_BY_PROTOCOL, STREAM_KINDS

from grafana.panels import (
    Dashboard,
    Json,
    Q,
    custom_variable,
    heatmap,
    interval_variable,
    row,
    stat,
    table,
    text,
    timeseries,
)

OUT = Path(__file__).resolve().parent / "dashboards"
KINDS = list(KINDS_BY_PROTOCOL["rest"])  # REST has every kind, gRPC all but the *_json ones
STREAMS = [k for k in KINDS if k in STREAM_KINDS]
KIND = 'kind=~"$kind"'
SERVICES = 'service=~"rest|grpc"'
QUANTILES = (("0.5", "p50"), ("0.95", "p95"), ("0.99", "p99"))
SERVER_LATENCY = (
    "protocol_kind_quantile:wirelab_server_request_duration_seconds:histogram_quantile_rate30s"
)
CLIENT_LATENCY = (
    "protocol_kind_quantile:wirelab_client_request_duration_seconds:histogram_quantile_rate30s"
)
SERVER_TTFM = (
    "protocol_kind_quantile:wirelab_server_time_to_first_message_seconds:histogram_quantile_rate30s"
)
CLIENT_TTFM = (
    "protocol_kind_quantile:wirelab_client_time_to_first_message_seconds:histogram_quantile_rate30s"
)
INTERVALS = ["15s", "30s", "1m", "2m", "5m"]


def quantiles(record: str, selector: str, legend: str) -> list[Q]:
    return [Q(f'{record}{{{selector}, quantile="{q}"}}', f"{legend} {p}") for q, p in QUANTILES]


def rest_vs_grpc() -> Dashboard:
    d = Dashboard(
        "wirelab-rest-vs-grpc",
        "wirelab: REST vs gRPC",
        "Per interaction kind, REST (blue) and gRPC (orange) side by side.",
        [custom_variable("kind", "kind", KINDS, ["unary"]),
         custom_variable("stream_kind", "stream kind", STREAMS, ["All"])],
    )  # fmt: skip
    d.add(
        text(
            "How to read this",
            "REST is **blue**, gRPC **orange**; p50 solid, p95 and client-side lines dashed, "
            "p99 dotted. Rates and quantiles come from recording rules over **30 s** windows "
            "(container figures **1 m**), see `prometheus/rules/wirelab.rules.yml`. "
            "One container serves every kind, so *CPU-seconds per request* is the cost of the "
            "kind being driven only while one kind runs at a time (as benchmark scenarios do). "
            "Pick kinds above; each gets its own row. Check the *Load generator* dashboard "
            "before trusting a number: a saturated generator measures itself.",
            h=3,
        ),
        row("Both services, all kinds"),
        stat(
            "Requests/s",
            "Completed calls per second by protocol, all kinds and outcomes "
            "(server side; sum of protocol_kind:wirelab_server_requests:rate30s).",
            [
                Q(
                    "sum by (protocol) (protocol_kind:wirelab_server_requests:rate30s)",
                    "{{protocol}}",
                )
            ],
            "reqps",
            w=4,
            h=8,
        ),
        timeseries(
            "CPU-seconds per request",
            "cAdvisor CPU of the rest/grpc container divided "
            "by that service's request rate, 1 m windows "
            "(protocol:wirelab_server_cpu_seconds_per_request:ratio_rate1m).",
            [Q("protocol:wirelab_server_cpu_seconds_per_request:ratio_rate1m", "{{protocol}}")],
            "s",
            w=5,
        ),
        timeseries(
            "Container CPU",
            "CPU cores used by each service container (cAdvisor, 1 m "
            "rate: service:container_cpu_usage_seconds:rate1m).",
            [Q(f"service:container_cpu_usage_seconds:rate1m{{{SERVICES}}}", "{{service}}")],
            "short",
            exporter=True,
            w=5,
        ),
        timeseries(
            "Container memory",
            "Working set of each service container (cAdvisor; "
            "what the kernel would not reclaim: service:container_memory_working_set_"
            "bytes:sum).",
            [Q(f"service:container_memory_working_set_bytes:sum{{{SERVICES}}}", "{{service}}")],
            "bytes",
            exporter=True,
            w=5,
        ),
        timeseries(
            "Network bytes per request",
            "Everything each container received plus sent "
            "(cAdvisor, headers, framing, TCP/IP and the metric scrapes included) per "
            "request: protocol:wirelab_server_network_bytes_per_request:ratio_rate1m. "
            "Dominated by scrapes at low request rates.",
            [Q("protocol:wirelab_server_network_bytes_per_request:ratio_rate1m", "{{protocol}}")],
            "bytes",
            exporter=True,
            w=5,
        ),
        row("$kind", repeat="kind"),
        timeseries(
            "Requests/s",
            "Completed calls per second, server side (solid) and as Locust "
            "saw them (dashed); 30 s rate of wirelab_server/client_requests_total.",
            [
                Q(
                    f"protocol_kind:wirelab_server_requests:rate30s{{{KIND}}}",
                    "{{protocol}} server",
                ),
                Q(
                    f"protocol_kind:wirelab_client_requests:rate30s{{{KIND}}}",
                    "{{protocol}} client",
                ),
            ],
            "reqps",
        ),
        timeseries(
            "Latency, server side",
            "p50/p95/p99 of the whole call inside the service, "
            "request arrival to last byte sent (histogram_quantile over 30 s of "
            "wirelab_server_request_duration_seconds_bucket, every outcome).",
            quantiles(SERVER_LATENCY, KIND, "{{protocol}}"),
            "s",
        ),
        timeseries(
            "Latency, client side",
            "p50/p95/p99 of the whole call as Locust timed it, "
            "network and client included (histogram_quantile over 30 s of "
            "wirelab_client_request_duration_seconds_bucket).",
            quantiles(CLIENT_LATENCY, KIND, "{{protocol}}"),
            "s",
        ),
        timeseries(
            "Error ratio",
            "Share of calls whose outcome is not ok, server side and "
            "client side (client adds wrong answers and connection errors); 30 s rates.",
            [
                Q(
                    f"protocol_kind:wirelab_server_requests:error_ratio_rate30s{{{KIND}}}",
                    "{{protocol}} server",
                ),
                Q(
                    f"protocol_kind:wirelab_client_requests:error_ratio_rate30s{{{KIND}}}",
                    "{{protocol}} client",
                ),
            ],
            "percentunit",
        ),
        timeseries(
            "In flight",
            "Calls started and not finished inside each service "
            "(wirelab_server_requests_in_flight).",
            [Q(f"protocol_kind:wirelab_server_requests_in_flight:sum{{{KIND}}}", "{{protocol}}")],
            "short",
        ),
        timeseries(
            "Payload bytes per request",
            "Request plus response body bytes per call "
            "(HTTP body or WebSocket message bytes; serialized protobuf bytes), from the "
            "server's byte histograms: sum rate / count rate over 30 s.",
            [
                Q(
                    f"protocol_kind:wirelab_server_bytes_per_request:ratio_rate30s{{{KIND}}}",
                    "{{protocol}}",
                )
            ],
            "bytes",
        ),
        timeseries(
            "Payload throughput",
            "Body bytes per second into (request) and out of "
            "(response) each service; 30 s rate of the byte histograms' sums.",
            [
                Q(
                    f"protocol_kind:wirelab_server_request_bytes:rate30s{{{KIND}}}",
                    "{{protocol}} in",
                ),
                Q(
                    f"protocol_kind:wirelab_server_response_bytes:rate30s{{{KIND}}}",
                    "{{protocol}} out",
                ),
            ],
            "Bps",
        ),
        heatmap(
            "REST latency distribution",
            "Server-side call durations per bucket of "
            "wirelab_server_request_duration_seconds (calls per second in each bucket).",
            "sum by (le) (rate(wirelab_server_request_duration_seconds_bucket"
            f'{{protocol="rest", {KIND}}}[$__rate_interval]))',
        ),
        heatmap(
            "gRPC latency distribution",
            "Server-side call durations per bucket of "
            "wirelab_server_request_duration_seconds (calls per second in each bucket).",
            "sum by (le) (rate(wirelab_server_request_duration_seconds_bucket"
            f'{{protocol="grpc", {KIND}}}[$__rate_interval]))',
        ),
    )
    stream = 'kind=~"$stream_kind"'
    d.add(
        row("Stream $stream_kind", repeat="stream_kind"),
        timeseries(
            "Time to first message, server",
            "Request arrival to first response "
            "message sent: p50/p95/p99 over 30 s of "
            "wirelab_server_time_to_first_message_seconds_bucket.",
            quantiles(SERVER_TTFM, stream, "{{protocol}}"),
            "s",
            w=6,
        ),
        timeseries(
            "Time to first message, client",
            "Request start to first response "
            "message received, as Locust timed it: p50/p95/p99 over 30 s.",
            quantiles(CLIENT_TTFM, stream, "{{protocol}}"),
            "s",
            w=6,
        ),
        timeseries(
            "Messages/s, server",
            "Stream messages (chunks, pongs) each service sent "
            "and received per second; 30 s rates of wirelab_server_messages_*_total.",
            [
                Q(
                    f"protocol_kind:wirelab_server_messages_sent:rate30s{{{stream}}}",
                    "{{protocol}} sent",
                ),
                Q(
                    f"protocol_kind:wirelab_server_messages_received:rate30s{{{stream}}}",
                    "{{protocol}} received",
                ),
            ],
            "short",
            w=6,
        ),
        timeseries(
            "Messages/s, client",
            "Stream messages Locust received and sent per "
            "second; 30 s rates of wirelab_client_messages_*_total.",
            [
                Q(
                    f"protocol_kind:wirelab_client_messages_received:rate30s{{{stream}}}",
                    "{{protocol}} received",
                ),
                Q(
                    f"protocol_kind:wirelab_client_messages_sent:rate30s{{{stream}}}",
                    "{{protocol}} sent",
                ),
            ],
            "short",
            w=6,
        ),
    )
    return d


def containers_host() -> Dashboard:
    d = Dashboard(
        "wirelab-containers-host",
        "wirelab: containers and host",
        "cAdvisor per compose service; node-exporter for the host.",
        [interval_variable(INTERVALS, "30s")],
    )
    d.add(
        row("Containers (cAdvisor, per compose service)"),
        timeseries(
            "CPU",
            "CPU cores used per compose service: 1 m rate of "
            "container_cpu_usage_seconds_total summed over the service's containers.",
            [Q("service:container_cpu_usage_seconds:rate1m", "{{service}}")],
            "short",
            exporter=True,
            w=12,
        ),
        timeseries(
            "CPU throttling",
            "Share of CFS periods in which the container hit its CPU "
            "limit (throttled_periods / periods, 1 m). Above 10 % (red line) the limit, "
            "not the code, sets the speed. Only containers with a CPU limit appear.",
            [Q("service:container_cpu_cfs_throttled_periods:ratio_rate1m", "{{service}}")],
            "percentunit",
            exporter=True,
            threshold=0.1,
            w=12,
        ),
        timeseries(
            "Throttled time",
            "Seconds per second the service's containers were held "
            "back by their CPU limit (container_cpu_cfs_throttled_seconds_total, 1 m).",
            [Q("service:container_cpu_cfs_throttled_seconds:rate1m", "{{service}}")],
            "s",
            exporter=True,
        ),
        timeseries(
            "Memory",
            "Working set per compose service (container_memory_working_set_"
            "bytes: what the OOM killer counts against a memory limit).",
            [Q("service:container_memory_working_set_bytes:sum", "{{service}}")],
            "bytes",
            exporter=True,
        ),
        timeseries(
            "Network",
            "Bytes per second received and sent by each service's "
            "containers (container_network_*_bytes_total, 1 m rates).",
            [
                Q("service:container_network_receive_bytes:rate1m", "{{service}} rx"),
                Q("service:container_network_transmit_bytes:rate1m", "{{service}} tx"),
            ],
            "Bps",
            exporter=True,
        ),
        table(
            "Limits",
            "CPU limit in cores (CFS quota / period) and memory limit per service, "
            "as cAdvisor reads them from the cgroups: the fairness knobs in effect. A service "
            "without a CPU limit has no CPU value; without a memory limit it shows 0.",
            _LIMITS,
            {"CPU limit (cores)": "short", "memory limit": "bytes"},
        ),
        row("Host (node-exporter)"),
        timeseries(
            "Host CPU",
            "Share of all cores busy, by mode (rate of "
            "node_cpu_seconds_total over $interval, idle excluded, / core count).",
            [
                Q(
                    'sum by (mode) (rate(node_cpu_seconds_total{mode!="idle"}[$interval])) '
                    '/ scalar(count(node_cpu_seconds_total{mode="idle"}))',
                    "{{mode}}",
                )
            ],
            "percentunit",
            exporter=True,
            stack=True,
            w=6,
        ),
        timeseries(
            "Host memory",
            "Used (MemTotal - MemAvailable) and total memory.",
            [
                Q("node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes", "used"),
                Q("node_memory_MemTotal_bytes", "total"),
            ],
            "bytes",
            exporter=True,
            w=6,
        ),
        timeseries(
            "Host network",
            "Bytes per second per interface, loopback excluded (rate of "
            "node_network_*_bytes_total over $interval). In a container without host "
            "networking this is node-exporter's own network namespace.",
            [
                Q(
                    'rate(node_network_receive_bytes_total{device!="lo"}[$interval])',
                    "{{device}} rx",
                ),
                Q(
                    'rate(node_network_transmit_bytes_total{device!="lo"}[$interval])',
                    "{{device}} tx",
                ),
            ],
            "Bps",
            exporter=True,
            w=6,
        ),
        timeseries(
            "Host load",
            "1/5/15-minute load averages against the core count: load "
            "above the cores line means runnable tasks wait for a CPU.",
            [
                Q("node_load1", "load1"),
                Q("node_load5", "load5"),
                Q("node_load15", "load15"),
                Q('count(node_cpu_seconds_total{mode="idle"})', "cores"),
            ],
            "short",
            exporter=True,
            w=6,
        ),
    )
    return d


_SERVICE = 'container_label_com_docker_compose_service!=""'
# Only containers with a CPU limit have a CFS quota; no memory limit reads as 0 (or a huge number).
_LIMITS = [
    Q(f"max by (container_label_com_docker_compose_service) (container_spec_cpu_quota{{{_SERVICE}}}"
      f" / container_spec_cpu_period{{{_SERVICE}}})", "CPU limit (cores)"),
    Q("max by (container_label_com_docker_compose_service) "
      f"(container_spec_memory_limit_bytes{{{_SERVICE}}})", "memory limit"),
]  # fmt: skip


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
            "CPU cores of the services and the load "
            "generator containers side by side (cAdvisor, 1 m): the one pinned at its "
            "limit sets the pace.",
            [
                Q(
                    'service:container_cpu_usage_seconds:rate1m{service=~"rest|grpc|locust.*"}',
                    "{{service}}",
                )
            ],
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
                    f'{{outcome!="ok", {KIND}}}[$interval]))',
                    "{{protocol}} {{outcome}}",
                )
            ],
            "reqps",
        ),
        timeseries(
            "Client / server requests",
            "Locust's completed calls per second divided by "
            "the service's: about 1 when both sides count the same calls.",
            [
                Q(
                    f"protocol_kind:wirelab_client_requests:rate30s{{{KIND}}} / "
                    f"protocol_kind:wirelab_server_requests:rate30s{{{KIND}}}",
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
                    f'{{outcome!="ok", {KIND}}}[$__range]))',
                    "failed calls",
                )
            ],
            {"failed calls": "none"},
        ),
    )
    return d


DASHBOARDS = {
    "rest-vs-grpc.json": rest_vs_grpc,
    "containers-host.json": containers_host,
    "load-generator.json": load_generator,
}


def render_all() -> dict[str, str]:
    """File name -> JSON text, exactly as committed."""
    out: dict[str, str] = {}
    for name, build in DASHBOARDS.items():
        board: Json = build().render()
        out[name] = json.dumps(board, indent=2, sort_keys=False) + "\n"
    return out


def main() -> None:
    for name, body in render_all().items():
        (OUT / name).write_text(body)
        print(OUT / name, file=sys.stderr)


if __name__ == "__main__":
    main()

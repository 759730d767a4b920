"""Dashboard wirelab-rest-vs-grpc: per interaction kind, both protocols side by side."""

from __future__ import annotations

from grafana.board import (
    CLIENT_LATENCY,
    CLIENT_TTFM,
    EDGE,
    KIND,
    KINDS,
    RUNTIME,
    RUNTIMES,
    SERVER_BUCKETS,
    SERVER_LATENCY,
    SERVER_TTFM,
    STREAMS,
    Dashboard,
    choice_variable,
    custom_variable,
    exemplars,
    quantiles,
)
from grafana.panels import Q, heatmap, row, stat, text, timeseries

# The edge services' own figures: one runtime's, as the runtime variable selects.
SERVER = f"{RUNTIME}, {KIND}"
# The service containers of that runtime's edges: the compose services named by the `service`
# label of its edges' scrape targets (cAdvisor's series carry no runtime of their own).
EDGE_CONTAINERS = f"and on (service) up{{{EDGE}, {RUNTIME}}}"


def rest_vs_grpc() -> Dashboard:
    d = Dashboard(
        "wirelab-rest-vs-grpc",
        "wirelab: REST vs gRPC",
        "Per interaction kind, REST (blue) and gRPC (orange) side by side, for the Python or the "
        "Node.js services.",
        [choice_variable("runtime", "runtime", RUNTIMES, "python"),
         custom_variable("kind", "kind", KINDS, ["unary"]),
         custom_variable("stream_kind", "stream kind", STREAMS, ["All"])],
    )  # fmt: skip
    d.add(
        text(
            "How to read this",
            "REST is **blue**, gRPC **orange**; p50 solid, p95 and client-side lines dashed, "
            "p99 dotted. *runtime* picks the services whose figures the panels show: the Python "
            "ones or the Node.js ones (compose profile `node`). Client-side lines are Locust's, "
            "of whichever services its hosts point at. "
            "Rates and quantiles come from recording rules over **30 s** windows "
            "(container figures **1 m**), see `prometheus/rules/wirelab.rules.yml`. "
            "One container serves every kind, so *CPU-seconds per request* is the cost of the "
            "kind being driven only while one kind runs at a time (as benchmark scenarios do). "
            "Pick kinds above; each gets its own row. Check the *Load generator* dashboard "
            "before trusting a number: a saturated generator measures itself.",
            h=4,
        ),
        row("Both $runtime services, all kinds"),
        stat(
            "Requests/s",
            "Completed calls per second by protocol, all kinds and outcomes "
            "(server side; sum of runtime_protocol_kind:wirelab_server_requests:rate30s).",
            [
                Q(
                    "sum by (protocol) "
                    f"(runtime_protocol_kind:wirelab_server_requests:rate30s{{{RUNTIME}}})",
                    "{{protocol}}",
                )
            ],
            "reqps",
            w=4,
            h=8,
        ),
        timeseries(
            "CPU-seconds per request",
            "cAdvisor CPU of each service's container divided "
            "by that service's request rate, 1 m windows "
            "(runtime_protocol:wirelab_server_cpu_seconds_per_request:ratio_rate1m).",
            [
                Q(
                    "runtime_protocol:wirelab_server_cpu_seconds_per_request:ratio_rate1m"
                    f"{{{RUNTIME}}}",
                    "{{protocol}}",
                )
            ],
            "s",
            w=5,
        ),
        timeseries(
            "Container CPU",
            "CPU cores used by each service container of the runtime "
            "(cAdvisor, 1 m rate: service:container_cpu_usage_seconds:rate1m).",
            [Q(f"service:container_cpu_usage_seconds:rate1m {EDGE_CONTAINERS}", "{{service}}")],
            "short",
            exporter=True,
            w=5,
        ),
        timeseries(
            "Container memory",
            "Working set of each service container of the runtime (cAdvisor; "
            "what the kernel would not reclaim: service:container_memory_working_set_"
            "bytes:sum).",
            [Q(f"service:container_memory_working_set_bytes:sum {EDGE_CONTAINERS}", "{{service}}")],
            "bytes",
            exporter=True,
            w=5,
        ),
        timeseries(
            "Network bytes per request",
            "Everything each container received plus sent "
            "(cAdvisor, headers, framing, TCP/IP and the metric scrapes included) per "
            "request: runtime_protocol:wirelab_server_network_bytes_per_request:ratio_rate1m. "
            "Dominated by scrapes at low request rates.",
            [
                Q(
                    "runtime_protocol:wirelab_server_network_bytes_per_request:ratio_rate1m"
                    f"{{{RUNTIME}}}",
                    "{{protocol}}",
                )
            ],
            "bytes",
            exporter=True,
            w=5,
        ),
        timeseries(
            "Event-loop lag (Node.js)",
            "How late each Node.js service's event loop ran its timers (prom-client's default "
            "nodejs_eventloop_lag_*_seconds, sampled every 10 ms): p50 solid, p99 dotted. A CPU-"
            "bound call holds the loop and every other call on it waits; with WIRELAB_NODE_WORKERS "
            "> 1 the workers' figures are averaged (docs/node.md). The Python services have no "
            "such series: empty with runtime python.",
            [
                Q(f"nodejs_eventloop_lag_p50_seconds{{{RUNTIME}}}", "{{service}} p50"),
                Q(f"nodejs_eventloop_lag_p99_seconds{{{RUNTIME}}}", "{{service}} p99"),
            ],
            "s",
            w=24,
            h=6,
        ),
        row("$kind", repeat="kind"),
        timeseries(
            "Requests/s",
            "Completed calls per second, server side (solid) and as Locust "
            "saw them (dashed); 30 s rate of wirelab_server/client_requests_total.",
            [
                Q(
                    f"runtime_protocol_kind:wirelab_server_requests:rate30s{{{SERVER}}}",
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
            "wirelab_server_request_duration_seconds_bucket, every outcome); with traces on, "
            "the sampled calls as points, each linked to its trace in Jaeger.",
            [
                *quantiles(SERVER_LATENCY, SERVER, "{{protocol}}"),
                exemplars(f"{SERVER_BUCKETS}{{{EDGE}, {SERVER}}}"),
            ],
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
                    f"runtime_protocol_kind:wirelab_server_requests:error_ratio_rate30s{{{SERVER}}}",
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
            [
                Q(
                    f"runtime_protocol_kind:wirelab_server_requests_in_flight:sum{{{SERVER}}}",
                    "{{protocol}}",
                )
            ],
            "short",
        ),
        timeseries(
            "Payload bytes per request",
            "Request plus response body bytes per call "
            "(HTTP body or WebSocket message bytes; serialized protobuf bytes), from the "
            "server's byte histograms: sum rate / count rate over 30 s.",
            [
                Q(
                    f"runtime_protocol_kind:wirelab_server_bytes_per_request:ratio_rate30s{{{SERVER}}}",
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
                    f"runtime_protocol_kind:wirelab_server_request_bytes:rate30s{{{SERVER}}}",
                    "{{protocol}} in",
                ),
                Q(
                    f"runtime_protocol_kind:wirelab_server_response_bytes:rate30s{{{SERVER}}}",
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
            f'{{{EDGE}, {RUNTIME}, protocol="rest", {KIND}}}[$__rate_interval]))',
        ),
        heatmap(
            "gRPC latency distribution",
            "Server-side call durations per bucket of "
            "wirelab_server_request_duration_seconds (calls per second in each bucket).",
            "sum by (le) (rate(wirelab_server_request_duration_seconds_bucket"
            f'{{{EDGE}, {RUNTIME}, protocol="grpc", {KIND}}}[$__rate_interval]))',
        ),
    )
    stream = 'kind=~"$stream_kind"'
    server_stream = f"{RUNTIME}, {stream}"
    d.add(
        row("Stream $stream_kind", repeat="stream_kind"),
        timeseries(
            "Time to first message, server",
            "Request arrival to first response "
            "message sent: p50/p95/p99 over 30 s of "
            "wirelab_server_time_to_first_message_seconds_bucket.",
            quantiles(SERVER_TTFM, server_stream, "{{protocol}}"),
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
                    f"runtime_protocol_kind:wirelab_server_messages_sent:rate30s{{{server_stream}}}",
                    "{{protocol}} sent",
                ),
                Q(
                    f"runtime_protocol_kind:wirelab_server_messages_received:rate30s"
                    f"{{{server_stream}}}",
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

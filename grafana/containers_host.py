"""Dashboard wirelab-containers-host: CPU, memory, network per service (cAdvisor); the host."""

from __future__ import annotations

from grafana.board import INTERVALS, Dashboard, interval_variable
from grafana.panels import Q, row, table, timeseries


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

"""Every PromQL expression the runner exports, and the same aggregation applied to raw scrapes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from wirelab.contract import ARM_EDGES, ARMS

from wirelab_bench.histo import Snapshot, key

SERVICE_LABEL = "container_label_com_docker_compose_service"


# Arms whose edge serves another protocol than the arm's name: their jobs name the arm.
_RELABELLED = tuple(arm for arm, serves in ARM_EDGES.items() if arm != serves)


@dataclass(frozen=True)
class Export:
    """``agg by (labels) (metric{matchers})``: simple enough to evaluate on a raw /metrics scrape.

    Raw counters and buckets are exported (not rates) so a window's delta is last minus first
    sample, computed the same way whether the samples came from Prometheus or a direct scrape.
    """

    metric: str
    by: tuple[str, ...]
    matchers: tuple[tuple[str, str, str], ...] = ()
    agg: str = "sum"
    # The arm measured is the edge's job where that differs from the protocol its server speaks:
    # the AMQP arm's edge (job amqp) is a gRPC server (wirelab.contract.ARM_EDGES). Its samples
    # take protocol=<job>; every other edge's keep their own.
    arm_from_job: bool = False
    # Labels that keep apart the series summed into one ``by`` group, so that each counter's
    # delta is its own and the deltas are summed afterwards. Summing counters first reads a
    # series that leaves mid-window as a reset: cAdvisor stops exporting a recreated container's
    # old cgroup, the service's sum drops, and a lowrate cell (27 Nov, 17:09) read 429 % of a
    # core for a service limited to one.
    apart: tuple[str, ...] = ()

    @property
    def grouping(self) -> tuple[str, ...]:
        """The labels each exported series keeps: ``by``, then ``apart``."""
        return (*self.by, *self.apart)

    def merged(self, labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """The ``by`` group of a series with ``labels``: its ``apart`` labels left out."""
        return tuple(sorted((k, v) for k, v in labels.items() if k not in self.apart))

    @property
    def promql(self) -> str:
        sel = ", ".join(f'{label}{op}"{value}"' for label, op, value in self.matchers)
        grouping = f" by ({', '.join(self.grouping)})" if self.grouping else ""
        selector = f"{{{sel}}}" if sel else ""
        series = f"{self.metric}{selector}"
        if self.arm_from_job:
            series = (
                f'label_replace({series}, "protocol", "$1", "job", "({"|".join(_RELABELLED)})")'
            )
        return f"{self.agg}{grouping} ({series})"

    def relabel(self, labels: Mapping[str, str]) -> Mapping[str, str]:
        """``labels`` as the PromQL expression sees them after its label_replace."""
        if self.arm_from_job and labels.get("job") in _RELABELLED:
            return {**labels, "protocol": labels["job"]}
        return labels

    def selects(self, name: str, labels: Mapping[str, str]) -> bool:
        if name != self.metric:
            return False
        for label, op, value in self.matchers:
            got = labels.get(label, "")
            ok = {
                "=": got == value,
                "!=": got != value,
                "=~": re.fullmatch(value, got) is not None,
            }[op]
            if not ok:
                return False
        return True


_PK = ("protocol", "kind")
# The edges Locust calls (jobs rest and grpc, and amqp: the AMQP arm's gRPC edge) and Locust
# itself: never a topology's hops (job hops) nor an edge's own outgoing calls (client families on
# the edge's /metrics). A direct scrape labels its samples with the same jobs (scrape.py), so
# both sources select alike.
_SERVERS = (("job", "=~", "|".join(ARMS)),)
_LOCUST = (("job", "=", "locust"),)


def _edge(metric: str, by: tuple[str, ...]) -> Export:
    """An export of the edges' series, each labelled with the arm it measures (where it keeps
    ``protocol``; grouped by job, the job already names it)."""
    return Export(metric, by, _SERVERS, arm_from_job="protocol" in by)


_CONTAINERS = ((SERVICE_LABEL, "!=", ""),)
# cAdvisor's series per compose service: one per container (its cgroup, label id), replicas and
# a recreated container's old one included.
_ONE_PER_CONTAINER = ("id",)

EXPORTS: dict[str, Export] = {
    # Server side: the edges (jobs rest and grpc; amqp, the AMQP arm's, in its topology).
    "server_requests": _edge("wirelab_server_requests_total", (*_PK, "outcome")),
    "server_duration_bucket": _edge("wirelab_server_request_duration_seconds_bucket", (*_PK, "le")),
    "server_ttfm_bucket": _edge(
        "wirelab_server_time_to_first_message_seconds_bucket", (*_PK, "le")
    ),
    "server_request_bytes_sum": _edge("wirelab_server_request_bytes_sum", _PK),
    "server_request_bytes_count": _edge("wirelab_server_request_bytes_count", _PK),
    "server_response_bytes_sum": _edge("wirelab_server_response_bytes_sum", _PK),
    "server_response_bytes_count": _edge("wirelab_server_response_bytes_count", _PK),
    "server_messages_sent": _edge("wirelab_server_messages_sent_total", _PK),
    "server_messages_received": _edge("wirelab_server_messages_received_total", _PK),
    "server_in_flight": _edge("wirelab_server_requests_in_flight", _PK),
    "server_cpu_seconds": _edge("process_cpu_seconds_total", ("job",)),
    "server_resident_memory": _edge("process_resident_memory_bytes", ("job",)),
    # Client side: Locust (job locust).
    "client_requests": Export("wirelab_client_requests_total", (*_PK, "outcome"), _LOCUST),
    "client_duration_bucket": Export(
        "wirelab_client_request_duration_seconds_bucket", (*_PK, "le"), _LOCUST
    ),
    "client_ttfm_bucket": Export(
        "wirelab_client_time_to_first_message_seconds_bucket", (*_PK, "le"), _LOCUST
    ),
    # Mean latency (sum / count): exact, where quantiles interpolate inside 0.3-0.5 s buckets
    # around the order chain's 400 ms floor.
    "client_duration_sum": Export("wirelab_client_request_duration_seconds_sum", _PK, _LOCUST),
    "client_request_bytes_sum": Export("wirelab_client_request_bytes_sum", _PK, _LOCUST),
    "client_response_bytes_sum": Export("wirelab_client_response_bytes_sum", _PK, _LOCUST),
    "client_messages_received": Export("wirelab_client_messages_received_total", _PK, _LOCUST),
    "client_users": Export("wirelab_client_users", (), agg="max"),
    "client_cpu_ratio": Export("wirelab_client_cpu_usage_ratio", ("instance_name",), agg="max"),
    "client_saturated": Export("wirelab_client_saturated", ("instance_name",), agg="max"),
    # cAdvisor, per compose service.
    "container_cpu_seconds": Export(
        "container_cpu_usage_seconds_total", (SERVICE_LABEL,), _CONTAINERS, apart=_ONE_PER_CONTAINER
    ),
    # The CPU limit's CFS periods (100 ms each) and those in which it held the container back.
    "container_cpu_periods": Export(
        "container_cpu_cfs_periods_total", (SERVICE_LABEL,), _CONTAINERS, apart=_ONE_PER_CONTAINER
    ),
    "container_cpu_throttled_periods": Export(
        "container_cpu_cfs_throttled_periods_total",
        (SERVICE_LABEL,),
        _CONTAINERS,
        apart=_ONE_PER_CONTAINER,
    ),
    "container_memory": Export(
        "container_memory_working_set_bytes", (SERVICE_LABEL,), _CONTAINERS, agg="max"
    ),
    "container_network_receive_bytes": Export(
        "container_network_receive_bytes_total",
        (SERVICE_LABEL,),
        _CONTAINERS,
        apart=_ONE_PER_CONTAINER,
    ),
    "container_network_transmit_bytes": Export(
        "container_network_transmit_bytes_total",
        (SERVICE_LABEL,),
        _CONTAINERS,
        apart=_ONE_PER_CONTAINER,
    ),
    # node-exporter, the host.
    "host_cpu_seconds": Export("node_cpu_seconds_total", ("mode",)),
    "host_memory_available": Export("node_memory_MemAvailable_bytes", ()),
    "host_network_receive_bytes": Export("node_network_receive_bytes_total", ()),
    "host_network_transmit_bytes": Export("node_network_transmit_bytes_total", ()),
}

# The PromQL text of every export; the observability and e2e tests collect it from here.
EXPORT_QUERIES: dict[str, str] = {name: e.promql for name, e in EXPORTS.items()}

# Exported only in a topology run (docs/topologies.md): series the one-hop lab does not have.
TOPOLOGY_EXPORTS: dict[str, Export] = {
    # The edges' outgoing calls: the client families on the edge's own /metrics, per downstream.
    "hop_requests": _edge("wirelab_client_requests_total", (*_PK, "peer", "outcome")),
    "hop_duration_bucket": _edge("wirelab_client_request_duration_seconds_bucket", (*_PK, "le")),
    "hop_duration_sum": _edge("wirelab_client_request_duration_seconds_sum", _PK),
    # Orders each hop service served, per replica (a scrape target per replica; Prometheus only:
    # the hops publish no port).
    "replica_requests": Export(
        "wirelab_server_requests_total",
        ("protocol", "service", "instance"),
        (("job", "=", "hops"), ("kind", "=", "unary")),
    ),
}
TOPOLOGY_EXPORT_QUERIES: dict[str, str] = {n: e.promql for n, e in TOPOLOGY_EXPORTS.items()}

# Exports that are gauges: their peak over a window matters, not their delta.
GAUGES = frozenset(
    {
        "server_in_flight",
        "server_resident_memory",
        "client_users",
        "client_cpu_ratio",
        "client_saturated",
        "container_memory",
        "host_memory_available",
    }
)

# Counters whose fastest rate inside a window is kept too (as a peak named by the value here).
RATE_PEAKS = {
    "server_cpu_seconds": "server_cpu_peak_rate",
    "container_cpu_seconds": "container_cpu_peak_rate",
}

Sample = tuple[str, dict[str, str], float]


def sample_names(names: Iterable[str]) -> frozenset[str]:
    """The sample names the exports ``names`` read: all a scrape needs to parse for them."""
    known = {**EXPORTS, **TOPOLOGY_EXPORTS}
    return frozenset(known[n].metric for n in names)


def aggregate(samples: Iterable[Sample], names: Iterable[str] | None = None) -> Snapshot:
    """Apply the exports (``names``, of EXPORTS or TOPOLOGY_EXPORTS; by default every one of
    EXPORTS) to raw samples as Prometheus would to the same data."""
    known = {**EXPORTS, **TOPOLOGY_EXPORTS}
    chosen = {n: known[n] for n in (names if names is not None else EXPORTS)}
    snap: Snapshot = {}
    for metric, labels, value in samples:
        for name, export in chosen.items():
            if export.selects(metric, labels):
                seen = export.relabel(labels)
                k = key(name, {b: seen.get(b, "") for b in export.grouping})
                if export.agg == "max":
                    snap[k] = max(snap.get(k, value), value)
                else:
                    snap[k] = snap.get(k, 0.0) + value
    return snap

"""Dashboard assembly: variables, grid layout, and the PromQL names every dashboard shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from wirelab.contract import ALL_KINDS, STREAM_KINDS

from grafana.panels import SCHEMA_VERSION, Json, Q

KINDS = list(ALL_KINDS)
STREAMS = [k for k in KINDS if k in STREAM_KINDS]
KIND = 'kind=~"$kind"'
# The edges' runtimes, the `runtime` label prometheus.yml gives their targets (compose's node
# profile runs the Node.js ones beside the Python ones); a panel shows one runtime at a time.
RUNTIMES = ["python", "node"]
RUNTIME = 'runtime="$runtime"'
# Raw selectors that mean "the edge the load generator calls" (either runtime's) and "the load
# generator": a topology's hops (job hops) and the edges' own outgoing calls (client families
# under the edges' jobs) are the Topology dashboard's.
EDGE = 'job=~"rest|grpc|rest-node|grpc-node"'
LOCUST = 'job="locust"'
QUANTILES = (("0.5", "p50"), ("0.95", "p95"), ("0.99", "p99"))
SERVER_LATENCY = (
    "runtime_protocol_kind_quantile:wirelab_server_request_duration_seconds"
    ":histogram_quantile_rate30s"
)
CLIENT_LATENCY = (
    "protocol_kind_quantile:wirelab_client_request_duration_seconds:histogram_quantile_rate30s"
)
GENERATOR_LATENCY = (
    "generator_protocol_quantile:wirelab_client_request_duration_seconds:histogram_quantile_rate30s"
)
SERVER_TTFM = (
    "runtime_protocol_kind_quantile:wirelab_server_time_to_first_message_seconds"
    ":histogram_quantile_rate30s"
)
CLIENT_TTFM = (
    "protocol_kind_quantile:wirelab_client_time_to_first_message_seconds:histogram_quantile_rate30s"
)
INTERVALS = ["15s", "30s", "1m", "2m", "5m"]


SERVER_BUCKETS = "wirelab_server_request_duration_seconds_bucket"
CLIENT_BUCKETS = "wirelab_client_request_duration_seconds_bucket"


def exemplars(*selections: str) -> Q:
    """A latency panel's sampled calls (docs/traces.md#exemplars): Grafana asks Prometheus for
    the exemplars of the series a target selects, and only the services' raw duration buckets
    (``selections``, e.g. ``SERVER_BUCKETS + '{kind="unary"}'``) have any, not the recording
    rules the panels' lines read. The expression itself draws nothing (a bucket count is never
    negative): the target is there for its selectors."""
    return Q(" or ".join(f"{s} < 0" for s in selections), "sampled call", exemplar=True)


def quantiles(record: str, selector: str, legend: str) -> list[Q]:
    return [Q(f'{record}{{{selector}, quantile="{q}"}}', f"{legend} {p}") for q, p in QUANTILES]


def custom_variable(name: str, label: str, values: list[str], default: list[str]) -> Json:
    """A multi-value list with an All option (Grafana renders a selection as ``(a|b)``);
    ``default`` may be ``["All"]``."""
    # Grafana stores an "All" selection as the value $__all.
    value = ["$__all" if v == "All" else v for v in default]
    return _custom(
        name, label, values, default, {"selected": True, "text": default, "value": value}
    )


def choice_variable(name: str, label: str, values: list[str], default: str) -> Json:
    """A list of which exactly one value is selected, substituted as it is: for a label whose
    values must not share a line (a legend names the protocol, not the runtime)."""
    current = {"selected": True, "text": default, "value": default}
    return _custom(name, label, values, [default], current)


def _custom(name: str, label: str, values: list[str], default: list[str], current: Json) -> Json:
    multi = isinstance(current["value"], list)
    return {
        "type": "custom",
        "name": name,
        "label": label,
        "query": ",".join(values),
        "multi": multi,
        "includeAll": multi,
        "current": current,
        "options": [{"selected": v in default, "text": v, "value": v} for v in values],
        "hide": 0,
    }


def interval_variable(values: list[str], default: str) -> Json:
    """The rate window of queries that are not recording rules."""
    return {
        "type": "interval",
        "name": "interval",
        "label": "rate window",
        "query": ",".join(values),
        "auto": False,
        "current": {"selected": True, "text": default, "value": default},
        "options": [{"selected": v == default, "text": v, "value": v} for v in values],
        "refresh": 2,
        "hide": 0,
    }


@dataclass
class Dashboard:
    """Panels in reading order; :meth:`render` assigns ids and packs them into the 24-wide grid."""

    uid: str
    title: str
    description: str
    variables: list[Json] = field(default_factory=list)
    panels: list[Json] = field(default_factory=list)

    def add(self, *panels: Json) -> None:
        self.panels.extend(panels)

    def render(self) -> Json:
        x = y = line_h = 0
        laid: list[Json] = []
        for pid, panel in enumerate(self.panels, start=1):
            w, h = panel["gridPos"]["w"], panel["gridPos"]["h"]
            if x + w > 24 or panel["type"] == "row":
                x, y, line_h = 0, y + line_h, 0
            laid.append({**panel, "id": pid, "gridPos": {"x": x, "y": y, "w": w, "h": h}})
            x, line_h = x + w, max(line_h, h)
        return {
            "id": None,
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": ["wirelab"],
            "timezone": "utc",
            "editable": False,
            "graphTooltip": 1,
            "refresh": "5s",
            "time": {"from": "now-15m", "to": "now"},
            "schemaVersion": SCHEMA_VERSION,
            "version": 1,
            "links": [{"type": "dashboards", "tags": ["wirelab"], "asDropdown": False,
                       "title": "wirelab", "includeVars": False, "keepTime": True}],
            "annotations": {"list": []},
            "templating": {"list": self.variables},
            "panels": laid,
        }  # fmt: skip

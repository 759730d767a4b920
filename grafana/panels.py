"""Grafana panel and dashboard builders: one place for datasource, colours, units and layout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Json = dict[str, Any]

# The provisioned datasource (grafana/provisioning/datasources/prometheus.yml); never a name.
DATASOURCE: Json = {"type": "prometheus", "uid": "prometheus"}
# The dashboard model of Grafana 11.6, which tests/config/grafana_model.py checks against; the
# pinned 12.x migrates it on load without changing these dashboards (docs/observability.md).
SCHEMA_VERSION = 41
# The exporters (cAdvisor, node-exporter) are scraped every 5 s: a panel over them must not ask
# for a finer step, or $__rate_interval would be shorter than two scrapes.
EXPORTER_INTERVAL = "5s"

# REST is always blue, gRPC always orange and the AMQP arm green; quantiles differ by line style,
# so one glance at any panel says which protocol and which quantile a line is.
_STYLE_OVERRIDES: list[Json] = [
    {
        "matcher": {"id": "byRegexp", "options": "^rest.*"},
        "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": "blue"}}],
    },
    {
        "matcher": {"id": "byRegexp", "options": "^grpc.*"},
        "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": "orange"}}],
    },
    {
        "matcher": {"id": "byRegexp", "options": "^amqp.*"},
        "properties": [{"id": "color", "value": {"mode": "fixed", "fixedColor": "green"}}],
    },
    {
        "matcher": {"id": "byRegexp", "options": ".*(p95|client).*"},
        "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}],
    },
    {
        "matcher": {"id": "byRegexp", "options": ".*p99.*"},
        "properties": [{"id": "custom.lineStyle", "value": {"fill": "dot", "dash": [0, 10]}}],
    },
]


@dataclass(frozen=True)
class Q:
    """One PromQL target: the expression and its legend (``{{label}}`` templates)."""

    expr: str
    legend: str = ""
    instant: bool = False
    # Also ask Prometheus for the exemplars of the series ``expr`` selects: sampled calls' trace
    # ids, which the datasource links to Jaeger (provisioning/datasources/prometheus.yml).
    exemplar: bool = False


def _targets(queries: list[Q], fmt: str = "time_series") -> list[Json]:
    return [
        {
            "datasource": DATASOURCE,
            "refId": chr(ord("A") + i),
            "expr": q.expr,
            "legendFormat": q.legend or "__auto",
            "range": not q.instant,
            "instant": q.instant,
            "format": fmt,
            "editorMode": "code",
            **({"exemplar": True} if q.exemplar else {}),
        }
        for i, q in enumerate(queries)
    ]


def _thresholds(steps: list[tuple[float | None, str]]) -> Json:
    return {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in steps]}


def timeseries(
    title: str,
    description: str,
    queries: list[Q],
    unit: str,
    *,
    exporter: bool = False,
    threshold: float | None = None,
    stack: bool = False,
    overrides: list[Json] | None = None,
    w: int = 8,
    h: int = 8,
) -> Json:
    """A line chart; ``threshold`` draws a red line and area above it (a warning level);
    ``overrides`` come after the protocol colours and line styles, so they win."""
    steps: list[tuple[float | None, str]] = [(None, "green")]
    if threshold is not None:
        steps.append((threshold, "red"))
    custom: Json = {
        "drawStyle": "line",
        "lineWidth": 1,
        "fillOpacity": 10 if stack else 0,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stack else "none", "group": "A"},
        "thresholdsStyle": {"mode": "line+area" if threshold is not None else "off"},
    }
    panel = _panel("timeseries", title, description, w, h)
    panel["targets"] = _targets(queries)
    panel["fieldConfig"] = {
        "defaults": {
            "unit": unit,
            "min": 0,
            "color": {"mode": "palette-classic"},
            "custom": custom,
            "thresholds": _thresholds(steps),
        },
        "overrides": _STYLE_OVERRIDES + (overrides or []),
    }
    panel["options"] = {
        "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                   "calcs": ["lastNotNull", "max"]},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }  # fmt: skip
    if exporter:
        panel["interval"] = EXPORTER_INTERVAL
    return panel


def stat(
    title: str,
    description: str,
    queries: list[Q],
    unit: str,
    *,
    steps: list[tuple[float | None, str]] | None = None,
    mappings: list[Json] | None = None,
    w: int = 6,
    h: int = 5,
) -> Json:
    """A big number coloured by ``steps`` (value, colour) thresholds."""
    panel = _panel("stat", title, description, w, h)
    panel["targets"] = _targets(queries)
    panel["fieldConfig"] = {
        "defaults": {
            "unit": unit,
            "color": {"mode": "thresholds"},
            "thresholds": _thresholds(steps or [(None, "blue")]),
            "mappings": mappings or [],
        },
        "overrides": [],
    }
    panel["options"] = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "background",
        "graphMode": "area",
        "textMode": "auto",
        "justifyMode": "auto",
        "orientation": "auto",
    }
    return panel


def table(title: str, description: str, queries: list[Q], units: dict[str, str]) -> Json:
    """Instant queries merged into one full-width table: one value column per query, named by
    the query's legend and sorted by the first; ``units`` maps column name to unit."""
    panel = _panel("table", title, description, 24, 8)
    panel["targets"] = _targets([Q(q.expr, q.legend, instant=True) for q in queries], "table")
    # Grafana names the value column "Value" for one query and "Value #A", "#B"... for several.
    values = (
        ["Value"]
        if len(queries) == 1
        else [f"Value #{chr(ord('A') + i)}" for i in range(len(queries))]
    )
    names = [q.legend for q in queries]
    panel["fieldConfig"] = {
        "defaults": {},
        "overrides": [
            {"matcher": {"id": "byName", "options": name},
             "properties": [{"id": "unit", "value": units[name]}]}
            for name in names
        ],
    }  # fmt: skip
    panel["options"] = {
        "showHeader": True,
        "cellHeight": "sm",
        "sortBy": [{"displayName": names[0], "desc": True}],
    }
    panel["transformations"] = [
        {"id": "merge", "options": {}},
        {
            "id": "organize",
            "options": {
                "excludeByName": {"Time": True},
                "renameByName": dict(zip(values, names, strict=True)),
            },
        },
    ]
    return panel


def heatmap(title: str, description: str, expr: str, *, w: int = 8, h: int = 8) -> Json:
    """A latency distribution from Prometheus' own buckets (no re-bucketing in the browser),
    with the exemplars of those buckets: sampled calls, linked to their traces."""
    panel = _panel("heatmap", title, description, w, h)
    panel["targets"] = _targets([Q(expr, "{{le}}", exemplar=True)], "heatmap")
    panel["fieldConfig"] = {"defaults": {}, "overrides": []}
    panel["options"] = {
        "calculate": False,
        "yAxis": {"unit": "s", "axisPlacement": "left"},
        "rowsFrame": {"layout": "auto"},
        "cellGap": 1,
        "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential",
                  "exponent": 0.5, "steps": 64, "fill": "dark-orange", "reverse": False},
        "filterValues": {"le": 1e-9},
        "tooltip": {"mode": "single", "yHistogram": False},
        "legend": {"show": True},
    }  # fmt: skip
    return panel


def text(title: str, markdown: str, *, w: int = 24, h: int = 4) -> Json:
    """Static guidance: how to read the dashboard, what to do when a warning shows."""
    panel = _panel("text", title, "", w, h)
    panel["options"] = {"mode": "markdown", "content": markdown}
    return panel


def row(title: str, repeat: str | None = None) -> Json:
    """A full-width section header; ``repeat`` copies the section once per variable value."""
    panel: Json = {"type": "row", "title": title, "collapsed": False, "panels": []}
    if repeat:
        panel["repeat"] = repeat
    panel["gridPos"] = {"w": 24, "h": 1}
    return panel


def _panel(kind: str, title: str, description: str, w: int, h: int) -> Json:
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"w": w, "h": h},
    }

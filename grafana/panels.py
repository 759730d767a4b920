"""Grafana panel and dashboard builders: one place for datasource, colours, units and layout."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]

# The provisioned datasource (grafana/provisioning/datasources/prometheus.yml); never a name.
DATASOURCE: Json = {"type": "prometheus", "uid": "prometheus"}
# Grafana 12's dashboard JSON model; older 11.x releases load it, newer ones migrate it.
SCHEMA_VERSION = 41
# The exporters (cAdvisor, node-exporter) are scraped every 5 s: a panel over them must not ask
# for a finer step, or $__rate_interval would be shorter than two scrapes.
EXPORTER_INTERVAL = "5s"

# REST is always blue and gRPC always orange; quantiles differ by line style, so one glance at
# any panel says which protocol and which quantile a line is.
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
    w: int = 8,
    h: int = 8,
) -> Json:
    """A line chart; ``threshold`` draws a red line and area above it (a warning level)."""
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
        "overrides": _STYLE_OVERRIDES,
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
    """A latency distribution from Prometheus' own buckets (no re-bucketing in the browser)."""
    panel = _panel("heatmap", title, description, w, h)
    panel["targets"] = _targets([Q(expr, "{{le}}")], "heatmap")
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


def custom_variable(name: str, label: str, values: list[str], default: list[str]) -> Json:
    """A multi-value list with an All option (Grafana renders a selection as ``(a|b)``);
    ``default`` may be ``["All"]``."""
    return {
        "type": "custom",
        "name": name,
        "label": label,
        "query": ",".join(values),
        "multi": True,
        "includeAll": True,
        # Grafana stores an "All" selection as the value $__all.
        "current": {
            "selected": True,
            "text": default,
            "value": ["$__all" if v == "All" else v for v in default],
        },
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

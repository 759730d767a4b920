"""Every PromQL expression the lab runs, ready to send, with where it came from: one list."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "grafana" / "dashboards"
DATASOURCES = REPO / "grafana" / "provisioning" / "datasources"
RULES = REPO / "prometheus" / "rules"
EXPORTS = REPO / "bench" / "wirelab_bench" / "promql.py"

_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Query:
    """``expr`` is what Prometheus receives; ``template`` is the text as written at ``source``.

    ``expect_data`` is False for alert conditions: they return series only while firing; and
    for a latency panel's exemplars-only target (grafana.board.exemplars), whose expression
    selects the raw buckets for Prometheus's exemplar query and draws nothing by design.
    ``needs`` names the topology whose series the query reads ("" for the one-hop lab, where the
    lab's e2e test runs it; ANY_TOPOLOGY or a topology's name, where the topology stage does), or
    the profile ("amqp", "node") whose test runs it.
    """

    source: str
    expr: str
    template: str
    expect_data: bool = True
    needs: str = ""


ANY_TOPOLOGY = "any topology"
# Dashboard panels (by title prefix) over series that exist only while a topology runs: the
# edges' outgoing calls, and the replicas of the cluster topology.
TOPOLOGY_PANELS = {
    "Downstream errors/s": ANY_TOPOLOGY,
    "Per-replica share of": "cluster",
    # order-chain with the amqp profile: tests/e2e/test_amqp_arm.py runs these.
    "AMQP arm": "amqp",
    # The Node.js services only (profile node): tests/e2e/test_node_profile.py runs these.
    "Event-loop lag (Node.js)": "node",
    # wirelab-loadgen's series: tests/e2e/test_loadgen_e2e.py runs it, then these.
    "By generator:": "loadgen",
}


def _needs(title: str) -> str:
    return next((t for prefix, t in TOPOLOGY_PANELS.items() if title.startswith(prefix)), "")


def all_queries() -> list[Query]:
    """Dashboards, recording and alert rules, and the runner's exports (once that module exists)."""
    return [*dashboard_queries(), *rule_queries(), *export_queries()]


def substitute(template: str, values: dict[str, str]) -> str:
    """Replace Grafana variables (``$x``, ``${x}``, ``${x:fmt}``, ``[[x]]``); unknown ones raise."""

    def value(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        if name not in values:
            raise KeyError(f"no value for Grafana variable ${name} in {template!r}")
        return values[name]

    return _VARIABLE.sub(value, template)


def dashboard_queries(choose: Mapping[str, str] | None = None) -> list[Query]:
    """Each panel target as Grafana sends it on opening the dashboard with its defaults, or with
    one of a variable's options picked instead, for every dashboard that has that variable
    (``{"runtime": "node"}``: the REST-vs-gRPC panels over the Node.js services).

    A panel in a repeated row is expanded once per selected value of the repeat variable, as
    Grafana does; elsewhere a multi-value selection becomes the regex ``(a|b)``.
    """
    step = seconds(_datasource_time_interval())
    out: list[Query] = []
    chosen = dict(choose or {})
    unused = set(chosen)
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        selected = {v["name"]: _selected(v) for v in board["templating"]["list"]}
        for variable in board["templating"]["list"]:
            if variable["name"] in chosen:
                selected[variable["name"]] = [_option(variable, chosen[variable["name"]])]
                unused.discard(variable["name"])
        common = {name: _as_regex(vals) for name, vals in selected.items()}
        common["__range"] = _grafana_range(board["time"]["from"])
        repeat: str | None = None
        for panel in board["panels"]:
            if panel["type"] == "row":
                repeat = panel.get("repeat")
                continue
            # Grafana: $__interval is at least the panel's (else the datasource's) min interval;
            # $__rate_interval is 4x that for a wide panel over the default 15 min range.
            interval = seconds(panel.get("interval", "")) or step
            builtins = {"__interval": _fmt(interval), "__rate_interval": _fmt(4 * interval)}
            copies = selected[repeat] if repeat else [""]
            for copy in copies:
                values = {**common, **builtins}
                if repeat:
                    values[repeat] = copy
                for target in panel.get("targets", []):
                    where = f"{path.relative_to(REPO)}: {panel['title']!r} {target['refId']}"
                    if repeat:
                        where += f" [{repeat}={copy}]"
                    expr = substitute(target["expr"], values)
                    drawn = not (target.get("exemplar") and target["expr"].endswith(" < 0"))
                    needs = _needs(panel["title"])
                    out.append(Query(where, expr, target["expr"], drawn, needs))
    if unused:
        raise KeyError(f"no dashboard has the variables {sorted(unused)}")
    return out


def rule_queries() -> list[Query]:
    """The expression of every recording and alert rule."""
    out: list[Query] = []
    for path in sorted(RULES.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                name = rule.get("record") or f"alert {rule['alert']}"
                where = f"{path.relative_to(REPO)}: {name}"
                if rule.get("labels"):
                    where += f" {rule['labels']}"
                out.append(Query(where, rule["expr"].strip(), rule["expr"], "record" in rule))
    return out


def export_queries() -> list[Query]:
    """The benchmark runner's EXPORT_QUERIES (name -> PromQL), when bench/ has them, and its
    TOPOLOGY_EXPORT_QUERIES, which have data only while a topology runs (the topology stage runs
    them, not the one-hop lab's e2e test)."""
    if not EXPORTS.exists():
        return []
    module = importlib.import_module("wirelab_bench.promql")
    where = EXPORTS.relative_to(REPO)
    out: list[Query] = []
    for table, needs in (("EXPORT_QUERIES", ""), ("TOPOLOGY_EXPORT_QUERIES", ANY_TOPOLOGY)):
        exports: dict[str, str] = getattr(module, table, {})
        out += [Query(f"{where}: {table}[{n!r}]", e, e, needs=needs) for n, e in exports.items()]
    return out


def _selected(variable: dict[str, Any]) -> list[str]:
    current = variable["current"]["value"]
    values = current if isinstance(current, list) else [current]
    if "$__all" in values:
        return [o["value"] for o in variable["options"]]
    return [str(v) for v in values]


def _option(variable: dict[str, Any], value: str) -> str:
    if value not in (o["value"] for o in variable["options"]):
        raise ValueError(f"${variable['name']} has no option {value!r}")
    return value


def _as_regex(values: list[str]) -> str:
    return values[0] if len(values) == 1 else "(" + "|".join(map(re.escape, values)) + ")"


def _datasource_time_interval() -> str:
    found: Iterator[str] = (
        ds.get("jsonData", {}).get("timeInterval", "")
        for path in sorted(DATASOURCES.glob("*.yml"))
        for ds in yaml.safe_load(path.read_text())["datasources"]
        if ds["uid"] == "prometheus"
    )
    return next(found, "") or "15s"  # Grafana's default when the datasource sets none


def _grafana_range(start: str) -> str:
    if not start.startswith("now-"):
        raise ValueError(f"dashboard time must be relative to now, got {start!r}")
    return start.removeprefix("now-")


def seconds(duration: str) -> float:
    """A Prometheus duration such as ``5s`` or ``1m`` in seconds (0 when it is not one)."""
    match = _DURATION.match(duration)
    return int(match[1]) * _SECONDS[match[2]] if match else 0.0


def _fmt(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms" if seconds < 1 else f"{round(seconds)}s"


def main() -> None:
    """`python3 -m tests.config.queries`: one query a line, source and expression tab-separated."""
    for query in all_queries():
        print(f"{query.source}\t{' '.join(query.expr.split())}")


if __name__ == "__main__":
    main()

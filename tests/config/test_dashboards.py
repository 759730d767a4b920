"""Dashboards as code: current, well formed, and wired to the provisioned datasource."""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from wirelab.metrics import TRACE_ID_LABEL

from grafana.build import render_all
from tests.config.queries import REPO

GRAFANA = REPO / "grafana"
DASHBOARDS = GRAFANA / "dashboards"
PROVISIONING = GRAFANA / "provisioning"
# The dashboards' fixed uids: Grafana's URLs (/d/<uid>), bookmarks and docs/observability.md
# name a dashboard by its uid, so a renamed uid breaks them.
UIDS = {
    "wirelab-rest-vs-grpc",
    "wirelab-containers-host",
    "wirelab-load-generator",
    "wirelab-topology",
}
CURRENT_PANELS = {"timeseries", "stat", "table", "heatmap", "text", "row"}
# Where compose mounts grafana/dashboards (docs/observability.md; checked in test_compose).
MOUNT = "/var/lib/grafana/dashboards"


def load(path: Path) -> dict[str, Any]:
    board: dict[str, Any] = json.loads(path.read_text())
    return board


BOARDS = {p.name: load(p) for p in sorted(DASHBOARDS.glob("*.json"))}


def datasource_uids() -> set[str]:
    return {
        ds["uid"]
        for path in (PROVISIONING / "datasources").glob("*.yml")
        for ds in yaml.safe_load(path.read_text())["datasources"]
    }


def test_committed_json_is_what_the_generator_writes() -> None:
    rendered = render_all()
    assert sorted(rendered) == sorted(BOARDS), "run: python3 -m grafana.build"
    for name, text in rendered.items():
        assert (DASHBOARDS / name).read_text() == text, f"{name} is stale: python3 -m grafana.build"


def test_uids_are_the_fixed_ones_and_ids_null() -> None:
    assert sorted(b["uid"] for b in BOARDS.values()) == sorted(UIDS)
    for board in BOARDS.values():
        assert board["id"] is None
        assert board["schemaVersion"] >= 39


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panels(name: str) -> None:
    board = BOARDS[name]
    uids = datasource_uids()
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in board["panels"]:
        where = f"{name}: {panel['title']!r}"
        assert panel["type"] in CURRENT_PANELS, f"{where}: old panel type {panel['type']}"
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, where
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "prometheus"}, where
        assert panel["datasource"]["uid"] in uids, where
        if panel["type"] == "text":
            assert panel["options"]["content"], where
            continue
        assert len(panel["description"]) > 30, f"{where}: say what it shows and how"
        assert panel["targets"], where
        for target in panel["targets"]:
            assert target["datasource"]["uid"] in uids, where
            assert target["expr"].strip(), where


def test_provisioning_points_at_the_mount_and_home_dashboard_exists() -> None:
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "wirelab.yml").read_text())
    assert [p["options"]["path"] for p in provider["providers"]] == [MOUNT]
    datasource = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    (prom,) = datasource["datasources"]
    assert (prom["uid"], prom["url"], prom["isDefault"]) == (
        "prometheus",
        "http://prometheus:9090",
        True,
    )
    ini = configparser.ConfigParser()
    ini.read(GRAFANA / "grafana.ini")
    assert ini.getboolean("auth.anonymous", "enabled")
    assert ini["auth.anonymous"]["org_role"] == "Viewer"
    home = ini["dashboards"]["default_home_dashboard_path"]
    assert home.startswith(MOUNT + "/")
    assert BOARDS[Path(home).name]["uid"] == "wirelab-rest-vs-grpc"


# The latency histograms whose buckets carry sampled calls' trace ids (docs/traces.md#exemplars):
# the services' server histogram and their relays' client one. Locust's client series (the
# Locust-only rules, or service="locust") carry none: Locust traces nothing.
TRACED = ("wirelab_server_request_duration_seconds", "wirelab_client_request_duration_seconds")
LOCUST_RULES = ("protocol_kind_quantile:", "generator_protocol_quantile:")


def _names(expr: str) -> set[str]:
    names: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    # Grafana's variables as values: a range, else the name.
    promql_parser.walk(
        promql_parser.parse(re.sub(r"\[\$\w+\]", "[1m]", expr).replace("$", "")), visit
    )
    return names


def _over_traced_calls(expr: str) -> bool:
    if 'service="locust"' in expr:
        return False
    return any(h in n and not n.startswith(LOCUST_RULES) for n in _names(expr) for h in TRACED)


def test_every_latency_panel_shows_its_sampled_calls_linked_to_jaeger() -> None:
    """A panel over the services' latency asks Prometheus for the exemplars of their raw
    buckets (the recording rules its lines read have none), and the Prometheus datasource
    opens an exemplar's trace_id in the provisioned Jaeger datasource."""
    latency = [
        (name, panel)
        for name, board in BOARDS.items()
        for panel in board["panels"]
        if any(_over_traced_calls(t["expr"]) for t in panel.get("targets", []))
    ]
    assert len(latency) >= 8, [p["title"] for _, p in latency]
    raw = {f"{h}_bucket" for h in TRACED}
    for name, panel in latency:
        asking = [t for t in panel["targets"] if t.get("exemplar")]
        assert asking, f"{name}: {panel['title']!r} asks for no exemplars"
        for target in asking:
            assert _names(target["expr"]) <= raw, f"{name}: {panel['title']!r} {target['expr']}"
    sources = {
        ds["uid"]: ds
        for path in (PROVISIONING / "datasources").glob("*.yml")
        for ds in yaml.safe_load(path.read_text())["datasources"]
    }
    assert (sources["jaeger"]["type"], sources["jaeger"]["url"]) == (
        "jaeger",
        "http://jaeger:16686",
    )
    destinations = sources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert destinations == [{"name": TRACE_ID_LABEL, "datasourceUid": "jaeger"}]

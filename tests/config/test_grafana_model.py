"""The committed dashboards against Grafana's own dashboard model, and proof the check can fail."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from grafana_foundation_sdk.models.dashboard import Dashboard

from grafana.panels import SCHEMA_VERSION
from tests.config.grafana_model import problems
from tests.config.queries import DASHBOARDS

BOARDS = {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_grafana_model_knows_every_field_and_type(name: str) -> None:
    assert problems(BOARDS[name]) == []


def test_dashboards_declare_the_schema_version_the_model_describes() -> None:
    # A higher schemaVersion would claim fields the model checked here has never seen.
    assert {b["schemaVersion"] for b in BOARDS.values()} == {SCHEMA_VERSION}
    assert Dashboard().schema_version == SCHEMA_VERSION


def test_grafana_12_migrations_leave_the_dashboards_as_checked() -> None:
    # Grafana 12 migrates a schemaVersion-41 dashboard on load. Its migrations past 41 (grafana/
    # grafana apps/dashboard/pkg/migration/schemaversion/v42.go, v43.go) rewrite only
    # `custom.hideFrom` overrides and `formatTime` transformations: with neither here, what 12.x
    # shows is what the 11.6 model accepted.
    for board in BOARDS.values():
        for panel in board["panels"]:
            overrides = panel.get("fieldConfig", {}).get("overrides", [])
            assert "custom.hideFrom" not in {p["id"] for o in overrides for p in o["properties"]}
            assert "formatTime" not in {t["id"] for t in panel.get("transformations", [])}


_OVERRIDE: list[str | int] = ["fieldConfig", "overrides", 3, "properties", 0]
# Mistakes Grafana would load without a word, ignoring the field or the panel. Each sets one value
# in rest-vs-grpc.json: (the first panel of this type, or None for the dashboard; the keys down to
# the value; the value; the one path the check must blame, after the panel's path).
MISTAKES: dict[str, tuple[str | None, list[str | int], object, str]] = {
    "misspelt panel field": ("timeseries", ["fieldconfig"], {}, ".fieldconfig"),
    "old graph-panel option": (
        "timeseries", ["options", "legend", "alignAsTable"], True, ".options.legend.alignAsTable"
    ),
    "unknown enum value": (
        "timeseries", ["options", "legend", "displayMode"], "tabel", ".options.legend.display_mode"
    ),
    "number as a string": (
        "timeseries", ["fieldConfig", "defaults", "min"], "0", ".field_config.defaults.min_val"
    ),
    "retired panel type": ("timeseries", ["type"], "graph", ""),
    "misspelt query field": (
        "timeseries", ["targets", 0, "legendFormt"], "{{x}}", ".targets[0].legendFormt"
    ),
    "misspelt override id": (
        "timeseries", [*_OVERRIDE, "id"], "custom.lineStlye",
        ".fieldConfig.overrides[3].properties[0] as $.fieldConfig.defaults.custom.lineStlye",
    ),
    "wrong override value": (
        "timeseries", [*_OVERRIDE, "value", "fill"], "dashed",
        ".fieldConfig.overrides[3].properties[0] as $.field_config.defaults.custom.line_style.fill",
    ),
    "heatmap colour mode": ("heatmap", ["options", "color", "mode"], "x", ".options.color.mode"),
    "stat colour mode": ("stat", ["options", "colorMode"], "backgroud", ".options.color_mode"),
    "grid width as a string": ("stat", ["gridPos", "w"], "4", ".grid_pos.w"),
    "dashboard tooltip as bool": (None, ["graphTooltip"], True, "$.graph_tooltip"),
    "variable flag as a string": (
        None, ["templating", "list", 0, "includeAll"], "yes", "$.templating.list_val[0].include_all"
    ),
}  # fmt: skip


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_mutated_dashboard_is_rejected_at_the_mutated_field(mistake: str) -> None:
    kind, keys, value, blamed = MISTAKES[mistake]
    board = copy.deepcopy(BOARDS["rest-vs-grpc.json"])
    node: Any = board
    if kind is not None:
        i, node = next((i, p) for i, p in enumerate(board["panels"]) if p["type"] == kind)
        blamed = f"$.panels[{i}]{blamed}"
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    found = problems(board)
    assert [p.split(": ", 1)[0] for p in found] == [blamed], found

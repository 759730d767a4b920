"""One palette: the report notebook colours each protocol as the dashboards do."""

from __future__ import annotations

import ast
import json

from tests.config.queries import REPO

# Grafana's named colours and the matplotlib names the notebook uses for them.
GRAFANA_TO_MATPLOTLIB = {"blue": "tab:blue", "orange": "tab:orange"}


def dashboard_colours() -> dict[str, str]:
    """Protocol -> fixed colour, from the committed dashboards' per-protocol overrides."""
    found: dict[str, set[str]] = {}
    for path in (REPO / "grafana" / "dashboards").glob("*.json"):
        for panel in json.loads(path.read_text())["panels"]:
            for override in panel.get("fieldConfig", {}).get("overrides", []):
                pattern = override["matcher"].get("options", "")
                for proto in ("rest", "grpc"):
                    if pattern == f"^{proto}.*":
                        for prop in override["properties"]:
                            if prop["id"] == "color":
                                found.setdefault(proto, set()).add(prop["value"]["fixedColor"])
    assert all(len(colours) == 1 for colours in found.values()), found
    return {proto: colours.pop() for proto, colours in found.items()}


def notebook_colours() -> dict[str, str]:
    tree = ast.parse((REPO / "notebooks" / "report.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "COLORS" for t in node.targets
        ):
            colours: dict[str, str] = ast.literal_eval(node.value)
            return colours
    raise AssertionError("notebooks/report.py defines no COLORS")


def test_notebook_uses_the_dashboards_palette() -> None:
    dashboards = dashboard_colours()
    assert set(dashboards) == {"rest", "grpc"}
    expected = {proto: GRAFANA_TO_MATPLOTLIB[colour] for proto, colour in dashboards.items()}
    assert notebook_colours() == expected

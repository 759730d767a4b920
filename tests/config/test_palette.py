"""One palette: the report notebook and the benchmarks' plots colour each protocol as the
dashboards do."""

from __future__ import annotations

import ast
import json

from wirelab.contract import ARMS

from tests.config.queries import REPO

# Grafana's named colours and the matplotlib names the notebook uses for them.
GRAFANA_TO_MATPLOTLIB = {"blue": "tab:blue", "orange": "tab:orange", "green": "tab:green"}


def dashboard_colours() -> dict[str, str]:
    """Protocol -> fixed colour, from the committed dashboards' per-protocol overrides."""
    found: dict[str, set[str]] = {}
    for path in (REPO / "grafana" / "dashboards").glob("*.json"):
        for panel in json.loads(path.read_text())["panels"]:
            for override in panel.get("fieldConfig", {}).get("overrides", []):
                pattern = override["matcher"].get("options", "")
                for proto in ARMS:
                    if pattern == f"^{proto}.*":
                        for prop in override["properties"]:
                            if prop["id"] == "color":
                                found.setdefault(proto, set()).add(prop["value"]["fixedColor"])
    assert all(len(colours) == 1 for colours in found.values()), found
    return {proto: colours.pop() for proto, colours in found.items()}


def plot_palettes() -> dict[str, dict[str, str]]:
    """Every ``COLORS = {...}`` of the report notebook and the benchmarks that draw plots."""
    found = {}
    for path in [
        REPO / "notebooks" / "report.py",
        *sorted((REPO / "bench").rglob("*.py")),
        *sorted((REPO / "perf").rglob("*.py")),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "COLORS" for t in node.targets
            ):
                found[str(path.relative_to(REPO))] = ast.literal_eval(node.value)
    assert "notebooks/report.py" in found, "notebooks/report.py defines no COLORS"
    return found


def test_every_plot_uses_the_dashboards_palette() -> None:
    dashboards = dashboard_colours()
    assert set(dashboards) == set(ARMS)
    expected = {proto: GRAFANA_TO_MATPLOTLIB[colour] for proto, colour in dashboards.items()}
    palettes = plot_palettes()
    assert palettes.pop("notebooks/report.py") == expected  # the report draws every arm
    for path, colours in palettes.items():  # a benchmark, the arms it measures
        assert colours == {p: expected[p] for p in colours}, path

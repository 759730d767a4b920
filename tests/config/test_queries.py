"""Every PromQL expression parses and names only metrics the lab really produces."""

from __future__ import annotations

import re
from collections import Counter

import promql_parser
import pytest

from tests.config.catalogue import EXPORTER_LISTS, catalogue, listed_names
from tests.config.queries import (
    TOPOLOGY_PANELS,
    Query,
    all_queries,
    dashboard_queries,
    substitute,
)

QUERIES = all_queries()
KNOWN = catalogue()


def metric_names(expr: str) -> set[str]:
    names: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            by_matcher = [m.value for m in node.matchers.matchers if m.name == "__name__"]
            names.update([node.name] if node.name else by_matcher)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def test_every_source_contributes() -> None:
    sources = Counter(q.source.split(":")[0] for q in QUERIES)
    for source in (
        "grafana/dashboards/rest-vs-grpc.json",
        "grafana/dashboards/containers-host.json",
        "grafana/dashboards/load-generator.json",
        "grafana/dashboards/topology.json",
        "prometheus/rules/wirelab.rules.yml",
        "prometheus/rules/wirelab.alerts.yml",
    ):
        assert sources[source] > 0, f"no queries from {source}"


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.source)
def test_query_parses_and_names_known_metrics(query: Query) -> None:
    assert "$" not in query.expr.replace('"$1"', ""), "a Grafana variable was left in"
    names = metric_names(query.expr)
    assert names, "a query that selects no metric"
    unknown = sorted(names - KNOWN.keys())
    assert not unknown, f"{query.source} names metrics nobody exports: {unknown}"


def test_every_listed_exporter_metric_is_used() -> None:
    # The cAdvisor/node-exporter lists are claims the e2e run has to prove: keep them minimal.
    used = set().union(*(metric_names(q.expr) for q in QUERIES))
    for origin, path in EXPORTER_LISTS.items():
        unused = sorted(listed_names(path) - used)
        assert not unused, f"{origin} list names metrics no query uses: {unused}"


def test_unknown_metric_is_caught() -> None:
    assert "wirelab_server_request_total" not in KNOWN  # the missing "s" a typo would drop
    assert metric_names("rate(wirelab_server_request_total[1m])") - KNOWN.keys()


def test_substitution_rejects_unknown_variables() -> None:
    assert substitute("rate(x[$interval])", {"interval": "30s"}) == "rate(x[30s])"
    assert substitute('x{k=~"${kind:regex}"}', {"kind": "a"}) == 'x{k=~"a"}'
    with pytest.raises(KeyError):
        substitute("rate(x[$window])", {"interval": "30s"})


def test_recording_rules_follow_level_metric_operations() -> None:
    for name, origin in KNOWN.items():
        if origin == "recording rules":
            assert re.fullmatch(r"[a-z_]+:[a-z_]+:[a-z0-9_]+", name), name


def test_every_topology_panel_prefix_names_panels() -> None:
    """A renamed panel would otherwise slip into the one-hop lab's e2e check (and fail there)
    or out of the topology stage's: each prefix must still name dashboard queries."""
    for prefix, topology in TOPOLOGY_PANELS.items():
        named = [q for q in dashboard_queries() if f": {prefix}" in q.source.replace("'", "")]
        assert named, prefix
        assert all(q.needs == topology for q in named), prefix


REST_VS_GRPC = "grafana/dashboards/rest-vs-grpc.json"


def test_every_rest_vs_grpc_query_of_the_services_follows_the_runtime() -> None:
    """The dashboard shows one runtime's services (compose's node profile runs both): a panel
    over the services that forgot $runtime would add the other runtime's into its lines. Only
    Locust's own families (it has no runtime) may leave it out."""
    for query in dashboard_queries():
        if not query.source.startswith(REST_VS_GRPC):
            continue
        locust_only = all("wirelab_client_" in name for name in metric_names(query.expr))
        assert locust_only or "$runtime" in query.template, query.source


def test_a_chosen_runtime_replaces_the_default_in_every_query_that_reads_it() -> None:
    default = {q.source: q.expr for q in dashboard_queries() if "$runtime" in q.template}
    node = {q.source: q.expr for q in dashboard_queries({"runtime": "node"})
            if "$runtime" in q.template}  # fmt: skip
    assert default and default.keys() == node.keys()
    for source, expr in node.items():
        assert 'runtime="node"' in expr and "python" not in expr, source
        assert expr.replace('runtime="node"', 'runtime="python"') == default[source], source


def test_a_choice_no_dashboard_offers_is_refused() -> None:
    with pytest.raises(ValueError):
        dashboard_queries({"runtime": "java"})
    with pytest.raises(KeyError):
        dashboard_queries({"runtim": "node"})

"""The recording and alert rules are written by hand, so every wirelab_* series they select must
be one the metric contract (contract/metrics.json) defines, or one a rule records: a family
renamed in the contract fails here rather than leaving a rule that silently matches nothing."""

from __future__ import annotations

import promql_parser
import pytest
from wirelab.contract import CLIENT, SERVER, Family

from tests.config.catalogue import recorded_names
from tests.config.queries import Query, rule_queries

SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}


def _series(family: Family) -> set[str]:
    return {family.name + suffix for suffix in SUFFIXES[family.type]}


CONTRACT = set().union(*(_series(f) for f in (*SERVER.values(), *CLIENT.values())))
RECORDED = recorded_names()


def _selected(expr: str) -> set[str]:
    names: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def test_the_rules_select_the_contracts_families() -> None:
    selected = set().union(*(_selected(q.expr) for q in rule_queries()))
    assert selected & CONTRACT, "no rule selects a contract family: is the parser reading them?"


@pytest.mark.parametrize("query", rule_queries(), ids=lambda q: q.source)
def test_every_wirelab_series_a_rule_selects_is_the_contracts(query: Query) -> None:
    ours = {n for n in _selected(query.expr) if n.startswith("wirelab_") or ":wirelab_" in n}
    unknown = sorted(ours - CONTRACT - RECORDED)
    assert not unknown, f"{query.source} selects series the contract does not define: {unknown}"

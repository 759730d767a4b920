"""The monitoring-cost benchmark's pure parts: its PromQL, the parsing of answers, the verdict."""

from __future__ import annotations

import promql_parser
import pytest
from wirelab_perf.monitoring import (
    MONITORING,
    appended_query,
    by_label,
    cpu_query,
    scrape_query,
    verdict,
)


def test_cpu_query_selects_the_project_and_services_over_the_window() -> None:
    expr = cpu_query("wirelab", MONITORING, 120)
    assert expr == (
        "100 * sum by (container_label_com_docker_compose_service) "
        "(rate(container_cpu_usage_seconds_total{"
        'container_label_com_docker_compose_project="wirelab", '
        'container_label_com_docker_compose_service=~"prometheus|cadvisor|node-exporter"'
        "}[120s]))"
    )


@pytest.mark.parametrize(
    "expr",
    [
        cpu_query("wirelab-e2e", MONITORING, 90),
        scrape_query("scrape_samples_scraped", 90),
        appended_query(90),
    ],
)
def test_queries_parse(expr: str) -> None:
    promql_parser.parse(expr)


@pytest.mark.parametrize("project", ['wirelab"} or vector(1) #', "a.b", ""])
def test_cpu_query_refuses_a_name_that_would_change_the_query(project: str) -> None:
    with pytest.raises(ValueError, match="not a compose name"):
        cpu_query(project, MONITORING, 60)


def test_by_label_reads_an_instant_vector() -> None:
    data = {
        "resultType": "vector",
        "result": [
            {"metric": {"job": "rest"}, "value": [1700000000.0, "2301"]},
            {"metric": {"job": "locust"}, "value": [1700000000.0, "1.5e4"]},
        ],
    }
    assert by_label(data, "job") == {"rest": 2301.0, "locust": 15000.0}


def test_verdict_sums_the_stack_against_the_goal() -> None:
    cpu = {"prometheus": 3.0, "cadvisor": 1.0, "node-exporter": 0.5, "rest": 80.0}
    within = verdict(cpu, MONITORING, 5.0)
    assert within.ok and within.total == pytest.approx(4.5)
    assert "meets" in within.line()
    over = verdict(cpu, MONITORING, 4.0)
    assert not over.ok and "misses" in over.line()


def test_verdict_fails_when_a_service_has_no_series() -> None:
    result = verdict({"prometheus": 1.0, "cadvisor": 1.0}, MONITORING, 5.0)
    assert not result.ok
    assert result.missing == ("node-exporter",)
    assert "node-exporter" in result.line()

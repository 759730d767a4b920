"""The monitoring stack collects and computes only what the queries use (docs/observability.md)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import yaml

from tests.config.queries import REPO, RULES, seconds

# node-exporter collector -> the prefix of the names it exports.
COLLECTOR_PREFIX = {
    "cpu": "node_cpu_",
    "meminfo": "node_memory_",
    "netdev": "node_network_",
    "loadavg": "node_load",
}
NODE_EXPORTER_NAMES = REPO / "tests" / "config" / "node-exporter-1.12.1.txt"


def _command(service: str) -> list[str]:
    compose: dict[str, Any] = yaml.safe_load((REPO / "compose.yaml").read_text())
    command: list[str] = compose["services"][service]["command"]
    return command


def test_node_exporter_runs_only_the_collectors_the_queries_read() -> None:
    command = _command("node-exporter")
    assert "--collector.disable-defaults" in command
    assert "--web.disable-exporter-metrics" in command
    enabled = {
        flag.removeprefix("--collector.")
        for flag in command
        if re.fullmatch(r"--collector\.[a-z0-9_]+", flag) and flag != "--collector.disable-defaults"
    }
    lines = NODE_EXPORTER_NAMES.read_text().splitlines()
    used = {name for name in lines if name and not name.startswith("#")}
    needed = {c for c, p in COLLECTOR_PREFIX.items() if any(n.startswith(p) for n in used)}
    unmapped = {n for n in used if not any(n.startswith(p) for p in COLLECTOR_PREFIX.values())}
    assert unmapped == set(), "names whose collector COLLECTOR_PREFIX does not know"
    assert enabled == needed


# A histogram's buckets inside rate(), with the selector's matchers: the series rated.
RATED_BUCKETS = re.compile(r"rate\((\w+_bucket(?:\{[^}]*\})?)\[")


def test_each_histogram_is_rated_once_by_the_rules() -> None:
    """Three quantiles of one histogram read one recorded bucket rate: computing the rate of
    every bucket series once per quantile tripled the rules' cost (docs/observability.md).
    Two selections of one histogram are not a repeat: the edges' every kind (their jobs)
    and every service's orders only (kind="unary", the topology group) rate fewer series
    together than every kind of every hop rated once and split (a hop pre-initialises them all).
    """
    rated: Counter[str] = Counter()
    for path in sorted(RULES.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                rated.update(RATED_BUCKETS.findall(rule["expr"]))
    assert rated, "no rule rates a histogram: the check would pass vacuously"
    assert {name: n for name, n in rated.items() if n > 1} == {}


def test_groups_that_rate_histograms_evaluate_three_times_a_window() -> None:
    """Rating histogram buckets is what Prometheus spends most on: such a group is evaluated no
    more often than three times in its shortest window, which still follows that window."""
    default = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())["global"]
    checked = 0
    for path in sorted(RULES.glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            exprs = " ".join(rule["expr"] for rule in group["rules"])
            if not RATED_BUCKETS.search(exprs):
                continue
            shortest = min(seconds(w) for w in re.findall(r"\[(\d+[sm])\]", exprs))
            interval = seconds(group.get("interval", default["evaluation_interval"]))
            assert interval >= shortest / 3, f"{group['name']} every {interval} s"
            checked += 1
    assert checked == 3, "the server, client and topology groups rate histograms"

"""`wirelab perf trace-cost --runtime node` briefly: each Node service's variants (traces off, the
lab's hooks, OpenTelemetry's instrumentations) timed as processes of their own, each printed with
its CPU per order beside off and the spans it made, as many per order as its ratio says."""

from __future__ import annotations

import re

import pytest
from wirelab_perf import trace_cost

from tests.node.conftest import node_binary

pytestmark = pytest.mark.integration
LINE = re.compile(r"ratio +([\d.]+), ([^:]+?) *: +([\d.]+) us .* ([\d.]+) spans per order")


def test_node_services_are_timed_with_the_spans_each_variant_makes(
    capfd: pytest.CaptureFixture[str],
) -> None:
    argv = ["--runtime", "node", "--node", node_binary(), "--orders", "20", "--batches", "1"]
    argv += ["--ratios", "0,1", "--warmup", "0.2"]
    assert trace_cost.main(argv) == 0
    out = capfd.readouterr().out
    for title in ("Node REST service:", "Node gRPC service:"):
        section = out.split(title, 1)[1].split("Node gRPC service:", 1)[0]
        assert re.search(r"traces off: +[\d.]+ us", section), section
        found = {(ratio, name): float(spans) for ratio, name, _, spans in LINE.findall(section)}
        assert found == {
            ("0", "the lab's hooks (src/traces.js)"): 0.0,
            ("0", "OpenTelemetry's instrumentations"): 0.0,
            ("1", "the lab's hooks (src/traces.js)"): 1.0,
            ("1", "OpenTelemetry's instrumentations"): 1.0,
        }, section


def test_a_negative_warmup_is_refused_by_the_script(capfd: pytest.CaptureFixture[str]) -> None:
    argv = ["--runtime", "node", "--node", node_binary(), "--warmup", "-1"]
    assert trace_cost.main(argv) == 2
    assert capfd.readouterr().err == 'trace-cost: --warmup is a number of seconds (got "-1.0")\n'

"""The runner's exposition reader against prometheus_client's parser, on the pages the lab's
own instruments write: the same samples, label values with every escape, and a bad line refused."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from wirelab.metrics import ServerMetrics
from wirelab_bench.promql import EXPORTS, sample_names
from wirelab_bench.scrape import parse
from wirelab_locust.metrics import ClientCollector, Gauges, Observations


def _library(text: str, job: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, {**s.labels, "job": job}, float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def _same(ours: list, theirs: list) -> None:  # type: ignore[type-arg]
    assert len(ours) == len(theirs)
    for (name, labels, value), (name2, labels2, value2) in zip(ours, theirs, strict=True):
        assert (name, labels) == (name2, labels2)
        assert value == value2 or (math.isnan(value) and math.isnan(value2))


def _server_page() -> str:
    registry = CollectorRegistry()
    metrics = ServerMetrics("rest", registry, "async")
    for outcome, code in (("ok", "200"), ("client_error", "400"), ("ok", "200")):
        call = metrics.start("unary")
        call.received(120)
        call.sent(40)
        call.finish(outcome, code)
    metrics.flush()
    return generate_latest(registry).decode()


def _client_page() -> str:
    observations = Observations()
    observations.preinitialise({"rest": "rest", "grpc": "grpc"})
    registry = CollectorRegistry()
    registry.register(
        ClientCollector(observations, lambda: Gauges(users=2, workers=1, cpu={"master": 0.5}))
    )
    return generate_latest(registry).decode()


@pytest.mark.parametrize("page", [_server_page, _client_page], ids=["server", "locust"])
def test_a_real_page_reads_as_the_library_reads_it(page) -> None:  # type: ignore[no-untyped-def]
    text = page()
    ours = parse(text, "rest")
    assert len(ours) > 500
    _same(ours, _library(text, "rest"))


def test_label_values_with_escapes_braces_and_commas_read_as_the_library_reads_them() -> None:
    registry = CollectorRegistry()
    odd = ['say "hi"', "back\\slash", "two\nlines", "a}b {c}", "x,y=z", "", "end\\"]
    counter = Counter("odd_total", "Odd values.", ["value", "other"], registry=registry)
    for n, value in enumerate(odd):
        counter.labels(value=value, other=str(n)).inc(n + 0.5)
    Gauge("not_a_number", "NaN and infinities.", registry=registry).set(math.nan)
    text = generate_latest(registry).decode() + "with_stamp 3 1700000000000\ninf_value +Inf\n"
    ours = parse(text, "j")
    _same(ours, _library(text, "j"))
    assert {labels["value"] for name, labels, _ in ours if name == "odd_total"} == set(odd)


def test_names_keep_only_the_samples_an_export_reads() -> None:
    text = _server_page()
    wanted = sample_names(["server_requests", "server_duration_bucket"])
    assert wanted == {EXPORTS["server_requests"].metric, EXPORTS["server_duration_bucket"].metric}
    kept = parse(text, "rest", wanted)
    assert kept and {name for name, _, _ in kept} == wanted
    assert kept == [s for s in parse(text, "rest") if s[0] in wanted]


def test_a_line_that_is_no_sample_is_refused() -> None:
    with pytest.raises(ValueError, match="not a sample line"):
        parse("good 1\n{broken} 2\n", "j")

"""Direct scrapes of /metrics endpoints, for windows measured without a reachable Prometheus."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from wirelab_bench.promql import Sample


def scrape(url: str, job: str, timeout: float = 5.0) -> list[Sample]:
    """Every sample at ``url``, labelled ``job`` as Prometheus would label that target."""
    response = httpx.get(url, timeout=timeout)
    response.raise_for_status()
    return parse(response.text, job)


def parse(text: str, job: str) -> list[Sample]:
    """Samples of a Prometheus text exposition, each labelled ``job``."""
    samples: list[Sample] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.append((s.name, {**s.labels, "job": job}, float(s.value)))
    return samples


def probe(url: str, metric: str, **labels: str) -> str | None:
    """None when ``url`` serves ``metric`` with ``labels``; otherwise why it cannot be used."""
    try:
        samples = scrape(url, "probe", timeout=2.0)
    except (httpx.HTTPError, ValueError) as exc:
        return f"{url}: {type(exc).__name__}: {exc}"
    for name, got, _ in samples:
        if name == metric and all(got.get(k) == v for k, v in labels.items()):
            return None
    return f"{url}: serves no {metric}{labels}"

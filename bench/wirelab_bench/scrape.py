"""Direct scrapes of /metrics endpoints, for windows measured without a reachable Prometheus."""

from __future__ import annotations

import re
from collections.abc import Collection

import httpx

from wirelab_bench import webclient
from wirelab_bench.promql import Sample

# One sample line of the text exposition format: name, optional {labels}, value (a timestamp
# may follow). The runner reads pages several times a cell, on the machine under test, while the
# load runs. prometheus_client.parser reads a character at a time: 55 ms of CPU per read of a
# Locust child's page (1,496 samples) against 11 ms for these two expressions
# (`wirelab perf scrape-cost`), and 17 s of a 49 s tiny run (8 cells, cProfile).
# tests/bench/test_scrape.py holds them to the library's reading of real pages, escapes included.
_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")
_ESCAPED = {"n": "\n", "\\": "\\", '"': '"'}


def scrape(
    url: str, job: str, timeout: float = 5.0, names: Collection[str] | None = None
) -> list[Sample]:
    """Every sample at ``url`` (or those named in ``names``), labelled ``job`` as Prometheus
    would label that target."""
    response = webclient.client().get(url, timeout=timeout)
    response.raise_for_status()
    return parse(response.text, job, names)


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE.sub(lambda m: _ESCAPED.get(m.group(1), "\\" + m.group(1)), value)


def parse(text: str, job: str, names: Collection[str] | None = None) -> list[Sample]:
    """Samples of a Prometheus text exposition (only those named in ``names``, if given), each
    labelled ``job``. A line that is not a sample raises ValueError, as the library's parser
    does."""
    samples: list[Sample] = []
    for line in text.splitlines():
        if not line or line.startswith("#") or line.isspace():
            continue
        found = _LINE.match(line)
        if found is None:
            raise ValueError(f"not a sample line: {line[:200]!r}")
        name, labels, value = found.groups()
        if names is not None and name not in names:
            continue
        pairs = {k: _unescape(v) for k, v in _LABEL.findall(labels)} if labels else {}
        samples.append((name, {**pairs, "job": job}, float(value)))
    return samples


def probe(url: str, metric: str, **labels: str) -> str | None:
    """None when ``url`` serves ``metric`` with ``labels``; otherwise why it cannot be used."""
    try:
        samples = scrape(url, "probe", timeout=2.0, names=(metric,))
    except (httpx.HTTPError, ValueError) as exc:
        return f"{url}: {type(exc).__name__}: {exc}"
    for _, got, _ in samples:
        if all(got.get(k) == v for k, v in labels.items()):
            return None
    return f"{url}: serves no {metric}{labels}"

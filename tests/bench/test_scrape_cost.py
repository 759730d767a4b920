"""wirelab perf scrape-cost times the services' render of each service's page and
prometheus_client's, then the runner's reader and the library's parser on each page and a Locust
child's."""

from __future__ import annotations

import re

import pytest
from prometheus_client import metrics as library_metrics
from wirelab_perf import scrape_cost


def test_reports_cpu_per_scrape_for_each_protocol_and_format(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # main() turns _created samples off process-wide, as the services do: restored afterwards.
    monkeypatch.setattr(library_metrics, "_use_created", library_metrics._use_created)
    assert scrape_cost.main(["--scrapes", "3", "--rounds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    renders, flush, reads = lines[:10], lines[10], lines[11:]
    found = [re.match(r"(\w+) +(\d+) samples, [\d,]+ B: (.+?) +([\d.]+) ms", x) for x in renders]
    formats = [
        "served",
        "text 0.0.4",
        "OpenMetrics",
        "served OpenMetrics, exemplars",
        "OpenMetrics, exemplars",
    ]
    assert [(m[1], m[3]) for m in found if m] == [
        (protocol, fmt) for protocol in ("rest", "grpc") for fmt in formats
    ]
    assert all(m is not None and float(m[4]) > 0 and int(m[2]) > 500 for m in found)
    flushed = re.fullmatch(
        r"a flush of 16,000 queued unary calls: ([\d.]+) ms of CPU per flush", flush
    )
    assert flushed is not None and float(flushed[1]) > 0
    read = [
        re.match(
            r"(\w+) +page, (\d+) samples: the runner's reader ([\d.]+) ms .* parser ([\d.]+)", x
        )
        for x in reads
    ]
    assert [m[1] for m in read if m] == ["rest", "grpc", "locust"], reads
    assert all(m is not None and int(m[2]) > 500 and float(m[3]) > 0 for m in read)

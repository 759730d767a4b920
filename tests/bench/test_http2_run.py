"""The runner's HTTP/2 arm over real processes: REST over HTTP/1.1 and over h2c to one Granian
process, gRPC beside them, wirelab-loadgen timing all three; the report splits the HTTP/2 effect.
And a REST service that speaks no h2c is refused before anything is measured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from wirelab_bench.report import render
from wirelab_bench.runner import EXIT_LAB_NOT_READY

from tests.bench.lab import Services, bench, require_loadgen, running_services

pytestmark = pytest.mark.integration

ARMS = """
description = "integration test: REST over 1.1 and h2c, and gRPC"
warmup_s = 0.5
duration_s = 1.5
cooldown_s = 0
kinds = ["unary"]
generator = "loadgen"
loads = [{ label = "two", users = 2 }]

[[groups]]
name = "http1"

[[groups]]
name = "h2c"
protocols = ["rest"]
rest_http = "h2c"
"""


@pytest.fixture(scope="module")
def granian(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    require_loadgen()
    logs = tmp_path_factory.mktemp("granian-logs")
    with running_services(logs, {"wirelab.rest": {"WIRELAB_REST_HTTP": "2"}}) as found:
        yield found


def test_three_arms_are_timed_and_the_report_splits_the_http2_effect(
    granian: Services, tmp_path: Path
) -> None:
    code, run = bench(granian, tmp_path, "arms", ARMS)
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == 0 and manifest["status"] == "complete", manifest.get("interrupted")
    assert "unary (REST over h2c)" in manifest["parity"]
    tidy = pd.read_csv(run / "tidy.csv", keep_default_na=False)
    arms = dict(zip(tidy.cell_id, tidy.rest_http, strict=True))
    assert arms == {
        "000_rest_unary_two_0b_loadgen_r0": "1.1",
        "001_grpc_unary_two_0b_loadgen_r0": "",
        "002_rest_unary_two_0b_h2c_loadgen_r0": "h2c",
    }
    assert (tidy.error_pct == 0).all() and (tidy.requests > 0).all()
    # The server counted the h2c cell's calls as the client did (both REST, one process).
    ratio = tidy.requests / (tidy.server_requests_per_s * tidy.window_s)
    assert ratio.between(0.9, 1.1).all(), ratio
    text = render(run).read_text()
    # One repetition: the table of point ratios, and no split stated without an interval.
    assert "HTTP/2 alone" in text and "one repetition, so no interval and no split" in text


def test_h2c_cells_against_a_rest_service_without_h2c_are_refused_before_measuring(
    services: Services, tmp_path: Path
) -> None:
    require_loadgen()
    code, run = bench(services, tmp_path, "arms", ARMS)
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == EXIT_LAB_NOT_READY and manifest["status"] == "failed"
    assert "WIRELAB_REST_HTTP=2" in manifest["interrupted"]["reason"]
    assert not (run / "tidy.csv").exists()

"""A topology run on loopback: A -> B service processes, the runner's refusals, the report."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pandas as pd
import pytest
from wirelab_bench.cli import main
from wirelab_bench.report import render
from wirelab_bench.runner import EXIT_LAB_NOT_READY

from tests.bench.lab import Services, prometheus_binary, running_prometheus, running_services

pytestmark = pytest.mark.integration

# The a-to-b scenario's shape, one load level and seconds per cell.
A_TO_B = """
description = "integration test: A -> B on loopback"
topology = "a-to-b"
kinds = ["unary"]
work_ms = 10
warmup_s = 0.5
duration_s = 2
cooldown_s = 0
loads = [{ users = 2 }]

[gates]
max_error_ratio = 0.0
"""
ONE_HOP = A_TO_B.replace('topology = "a-to-b"\n', "")


@pytest.fixture(scope="module")
def a_and_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Services, Services]]:
    """A (the edges) relaying every order to B (REST and gRPC, doing the work), as
    topologies/a-to-b.yaml wires them."""
    logs = tmp_path_factory.mktemp("a-to-b-logs")
    with running_services(logs) as b:
        relay = {"WIRELAB_LOCAL_WORK": "off"}
        extra = {
            "wirelab.rest": {**relay, "WIRELAB_DOWNSTREAM": b.rest_url},
            "wirelab.rpc": {**relay, "WIRELAB_DOWNSTREAM": f"grpc://{b.grpc_target}"},
        }
        (logs / "a").mkdir()
        with running_services(logs / "a", extra) as a:
            yield a, b


@pytest.fixture(scope="module")
def a_to_b(a_and_b: tuple[Services, Services]) -> Services:
    return a_and_b[0]


def _bench(
    services: Services, root: Path, text: str, name: str, prometheus: str = ""
) -> tuple[int, Path]:
    scenario = root / f"{name}.toml"
    scenario.write_text(text)
    results = root / "results"
    args = services.args(results, prometheus)
    code = main(["bench", str(scenario), *args, "--progress", "off"])
    (run,) = results.glob(f"*_{name}")
    return code, run


@pytest.fixture(scope="module")
def finished(a_to_b: Services, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    return _bench(a_to_b, tmp_path_factory.mktemp("bench"), A_TO_B, "a2b")


def test_manifest_records_the_topology_and_each_edges_peers(finished: tuple[int, Path]) -> None:
    code, run = finished
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == manifest["exit_code"] == 0, manifest.get("interrupted") or manifest["gates"]
    topology = manifest["topology"]
    assert topology["name"] == "a-to-b"
    assert topology["peers"] == {"rest": ["127.0.0.1"], "grpc": ["127.0.0.1"]}
    assert topology["peers_source"] == {"rest": "scrape", "grpc": "scrape"}
    # A calls B one order at a time (WIRELAB_FANOUT's default), read from A's wirelab_server_info.
    assert manifest["fanout"] == {"rest": "sequential", "grpc": "sequential"}
    # ... and the library it calls B with, at the lab's defaults.
    assert manifest["clients"] == {"rest": "aiohttp", "grpc": "grpcio"}


def test_tidy_rows_carry_the_topology_floor_and_the_hop(finished: tuple[int, Path]) -> None:
    _, run = finished
    tidy = pd.read_csv(run / "tidy.csv")
    assert len(tidy) == 2 and set(tidy.topology) == {"a-to-b"}
    assert (tidy.hop_peers == "127.0.0.1").all()
    # One call to B per order A served (give or take an order in flight at a window's end).
    assert ((tidy.hop_calls_per_order - 1).abs() < 0.1).all(), tidy.hop_calls_per_order
    assert (tidy.hop_error_pct == 0).all()
    # B works 10 ms per order, so each call of A's takes at least that, and an order longer.
    assert (tidy.hop_mean_ms >= 10).all() and (tidy.hop_p50_ms <= tidy.hop_p99_ms).all()
    assert (tidy.client_mean_ms > tidy.hop_mean_ms).all()
    assert (tidy.work_floor_ms == 10).all() and (tidy.fanout == "sequential").all()
    over = tidy.client_mean_ms - tidy.work_floor_ms
    assert (tidy.overhead_above_floor_ms == over).all() and (over > 0).all()
    hist = pd.read_csv(run / "histograms.csv")
    assert set(hist.side) == {"client", "server", "hop"}
    # No Prometheus, so no replica counts: the table is there, empty, and says which columns.
    assert list(pd.read_csv(run / "replicas.csv").columns) == [
        "cell_id",
        "service",
        "instance",
        "requests",
    ]
    # ... nor cAdvisor's per-container figures.
    assert pd.read_csv(run / "containers.csv").empty


def _report(run: Path) -> str:
    """The report's HTML text, once the notebook ran without an error."""
    html = render(run).read_text()
    nb = json.loads((run / "report.ipynb").read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors
    return html


def test_report_has_the_topology_section(finished: tuple[int, Path]) -> None:
    _, run = finished
    html = _report(run)
    assert "Topology <strong>a-to-b</strong>" in html
    assert "27 % faster than HTTP/1.1" in html and "by mean client latency" in html
    assert "No per-replica counts in this run" in html
    assert "No per-container figures in this run" in html
    assert {"topology_a-to-b_cdf", "topology_a-to-b_overhead"} <= {
        p.stem for p in run.glob("*.png")
    }


def test_report_names_the_container_that_ran_out_of_cpu(
    finished: tuple[int, Path], tmp_path: Path
) -> None:
    """The same run with cAdvisor's figures as a lab's Prometheus gives them: B held back by its
    CPU limit for most of the window, A not."""
    _, run = finished
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    tidy = pd.read_csv(copy / "tidy.csv")
    rows = [
        {"cell_id": cell, "service": f"{proto}{suffix}", "cpu_ms_per_order": cpu,
         "cores": cores, "throttled_pct": throttled, "memory_peak_mib": 60.0}
        for cell, proto in zip(tidy.cell_id, tidy.protocol, strict=True)
        for suffix, cpu, cores, throttled in (("", 1.5, 0.4, 0.0), ("-b", 3.2, 0.97, 85.0))
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(copy / "containers.csv", index=False)
    html = _report(copy)
    assert "What each container on the path used" in html
    assert "<code>rest-b</code> ran out of CPU (0.97 cores, held back by its limit in 85 %" in html


def test_a_topology_scenario_refuses_the_plain_lab(services: Services, tmp_path: Path) -> None:
    code, run = _bench(services, tmp_path, A_TO_B, "needs_a2b")
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == manifest["exit_code"] == EXIT_LAB_NOT_READY
    assert manifest["status"] == "failed" and manifest["interrupted"]["phase"] == "topology"
    assert "`make lab TOPOLOGY=a-to-b`" in manifest["interrupted"]["reason"]
    assert not (run / "tidy.csv").exists()


def test_a_one_hop_scenario_refuses_a_topology(a_to_b: Services, tmp_path: Path) -> None:
    code, run = _bench(a_to_b, tmp_path, ONE_HOP, "plain")
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == EXIT_LAB_NOT_READY
    assert "labelled one-hop" in manifest["interrupted"]["reason"]


def test_through_prometheus_hops_and_replica_counts(
    a_and_b: tuple[Services, Services], tmp_path: Path
) -> None:
    """No direct scrapes: peers, the edge's calls and each hop replica's orders from Prometheus
    (B is one replica here; the cluster topology has three)."""
    binary = prometheus_binary()
    a, b = a_and_b
    with running_prometheus(binary, a, tmp_path, hops=b) as url:
        deadline = time.monotonic() + 30
        while len(httpx.get(f"{url}/api/v1/query", params={"query": "up == 1"}).json()
                  .get("data", {}).get("result", [])) < 4:  # fmt: skip
            assert time.monotonic() < deadline, "Prometheus never scraped A and B"
            time.sleep(0.5)
        edges = replace(a, rest_metrics="", grpc_metrics="")
        code, run = _bench(edges, tmp_path, A_TO_B, "a2b_prom", prometheus=url)
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == 0, manifest.get("interrupted") or manifest["gates"]
    assert manifest["topology"]["peers"] == {"rest": ["127.0.0.1"], "grpc": ["127.0.0.1"]}
    assert manifest["topology"]["peers_source"] == {"rest": "prometheus", "grpc": "prometheus"}
    tidy = pd.read_csv(run / "tidy.csv")
    assert set(tidy.server_source) == {"prometheus"}
    assert (tidy.hop_calls > 0).all() and (tidy.hop_mean_ms >= 10).all()
    tidy["per_s"] = tidy.hop_calls / tidy.window_s
    columns = ["cell_id", "protocol", "hop_calls", "per_s"]
    replicas = pd.read_csv(run / "replicas.csv").merge(tidy[columns])
    assert sorted(zip(replicas.protocol, replicas.service, strict=True)) == [
        ("grpc", "grpc-b"),
        ("rest", "rest-b"),
    ]
    # B served what A sent it, give or take the calls of the 1 s between A's and B's scrapes
    # (a window's ends are Prometheus samples, each target scraped at its own phase).
    assert (replicas.requests > 0).all()
    assert ((replicas.requests - replicas.hop_calls).abs() <= 1.5 * replicas.per_s).all()
    assert "share of the orders its service served" in _report(run)

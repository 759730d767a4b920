"""Tidy rows from real metric expositions: the server metrics module's own output, scraped twice."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from wirelab.metrics import ServerMetrics
from wirelab_bench.histo import delta, key
from wirelab_bench.promql import EXPORT_QUERIES, EXPORTS, aggregate
from wirelab_bench.results import new_run_dir, write_tables
from wirelab_bench.scenario import Gates
from wirelab_bench.scenario_file import load_scenario
from wirelab_bench.scrape import parse
from wirelab_bench.tidy import Window, build_row, schedule_columns


def _scenario(tmp_path: Path, extra: str = "") -> list:  # type: ignore[type-arg]
    path = tmp_path / "t.toml"
    path.write_text(f'kinds = ["unary", "download"]\nloads = [{{users = 1}}]\n{extra}')
    return load_scenario(path).cells()


def _server_snapshot(registry: CollectorRegistry) -> dict:  # type: ignore[type-arg]
    return aggregate(parse(generate_latest(registry).decode(), "rest"))


def test_row_from_server_metrics_window(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = ServerMetrics("rest", registry, "async")
    for _ in range(5):  # before the window: must not count
        metrics.start("unary").finish("ok", "200")
    before = _server_snapshot(registry)
    for i in range(10):
        call = metrics.start("unary")
        call.received(100)
        call.sent(300)
        call.finish("ok" if i < 9 else "client_error", "200" if i < 9 else "400")
    after = _server_snapshot(registry)
    cell = next(c for c in _scenario(tmp_path) if c.protocol == "rest" and c.kind == "unary")
    window = Window(cell, time.time(), 2.0, server=delta(before, after))
    window.sources["server"] = "scrape"
    row = build_row(window, Gates(max_error_ratio=0.05))
    assert row["requests"] == 10
    assert row["errors"] == 1
    assert row["requests_per_s"] == pytest.approx(5.0)
    assert row["error_pct"] == pytest.approx(10.0)
    assert row["wire_bytes_per_request"] == pytest.approx(400.0)
    assert 0 < row["server_p50_ms"] <= row["server_p99_ms"] <= row["server_p999_ms"]
    assert math.isnan(row["client_p50_ms"])  # no client source: empty, not invented
    assert math.isnan(row["container_cpu_s_per_request"])
    assert row["gate_passed"] is False
    assert "error ratio" in row["gate_reasons"]
    assert row["server_source"] == "scrape"


def test_client_side_preferred_for_rates_and_p99_gate(tmp_path: Path) -> None:
    locust = {"job": "locust", "protocol": "grpc", "kind": "download", "call": "Download"}
    samples = [("wirelab_client_requests_total", {**locust, "outcome": "ok"}, 40.0)]
    for le, count in (("0.01", 0.0), ("0.5", 10.0), ("+Inf", 40.0)):
        labels = {**locust, "outcome": "ok"}
        samples.append(
            ("wirelab_client_request_duration_seconds_bucket", {**labels, "le": le}, count)
        )
    client = aggregate(samples)
    cell = next(c for c in _scenario(tmp_path) if c.protocol == "grpc" and c.kind == "download")
    row = build_row(Window(cell, 0.0, 4.0, client=client), Gates(max_p99_ms=100))
    assert row["requests_per_s"] == 10.0
    assert row["client_p99_ms"] == pytest.approx(500.0)
    assert row["payload_bytes_per_s"] == pytest.approx(10 * cell.payload_bytes)
    assert row["gate_passed"] is False and "p99" in row["gate_reasons"]


def test_export_queries_are_the_exports() -> None:
    assert set(EXPORT_QUERIES) == set(EXPORTS)
    assert EXPORT_QUERIES["server_cpu_seconds"] == (
        'sum by (job) (process_cpu_seconds_total{job=~"rest|grpc|amqp"})'
    )
    assert EXPORT_QUERIES["server_requests"] == (
        "sum by (protocol, kind, outcome) (label_replace(wirelab_server_requests_total"
        '{job=~"rest|grpc|amqp"}, "protocol", "$1", "job", "(amqp)"))'
    )
    assert EXPORT_QUERIES["client_requests"] == (
        'sum by (protocol, kind, outcome) (wirelab_client_requests_total{job="locust"})'
    )


def test_exports_read_the_edge_and_locust_not_a_topologys_hops() -> None:
    # In a topology the hops serve the same calls again (job hops) and the edge's own outgoing
    # calls use the client families (job rest): counted, a run would report twice its orders.
    unary = {"protocol": "rest", "kind": "unary", "outcome": "ok"}
    served = ("wirelab_server_requests_total", {**unary, "code": "200"})
    sent = ("wirelab_client_requests_total", {**unary, "call": "ProcessOrder"})
    snap = aggregate(
        [
            (served[0], {**served[1], "job": "rest", "service": "rest"}, 10.0),
            (served[0], {**served[1], "job": "hops", "service": "rest-b"}, 10.0),
            (sent[0], {**sent[1], "job": "locust", "peer": "rest"}, 10.0),
            (sent[0], {**sent[1], "job": "rest", "peer": "rest-b"}, 10.0),
        ]
    )
    assert snap == {
        key("server_requests", unary): 10.0,
        key("client_requests", unary): 10.0,
    }


def test_tables_written_and_folders_never_reused(tmp_path: Path) -> None:
    first = new_run_dir(tmp_path, "s", now=0)
    second = new_run_dir(tmp_path, "s", now=0)
    assert first != second and first.name.startswith("19700101T000000Z_s")
    write_tables(first, [{"cell_id": "a", "requests": 1.0}], [])
    assert (first / "tidy.csv").read_text().startswith("cell_id,requests")
    assert (first / "tidy.parquet").stat().st_size > 0
    assert (first / "histograms.csv").exists()


def test_container_columns_unknown_when_no_cadvisor_scrape_fell_in_the_window(
    tmp_path: Path,
) -> None:
    cell = next(c for c in _scenario(tmp_path) if c.protocol == "grpc" and c.kind == "unary")
    svc = {"container_label_com_docker_compose_service": "grpc"}
    server = aggregate(
        [("wirelab_server_requests_total",
          {"job": "grpc", "protocol": "grpc", "kind": "unary", "outcome": "ok", "code": "OK"},
          100.0)]
    )  # fmt: skip
    memory = {key("container_memory", svc): 5e7}
    moved = {
        key("container_cpu_seconds", svc): 0.5,
        key("container_network_receive_bytes", svc): 1e4,
        key("container_cpu_periods", svc): 80.0,
        key("container_cpu_throttled_periods", svc): 6.0,
    }
    row = build_row(
        Window(cell, 0.0, 10.0, server=server, containers=moved, peaks=dict(memory)), Gates()
    )
    assert row["container_cpu_s_per_request"] == pytest.approx(0.005)
    assert row["container_cpu_pct"] == pytest.approx(5.0)
    assert row["container_net_bytes_per_request"] == pytest.approx(100.0)
    assert row["container_peak_memory_bytes"] == 5e7
    assert row["container_throttled_pct"] == pytest.approx(7.5)
    # No CPU limit (no CFS periods): throttling unknown, not zero.
    unlimited = {k: v for k, v in moved.items() if k[0] != "container_cpu_periods"}
    row = build_row(Window(cell, 0.0, 10.0, server=server, containers=unlimited), Gates())
    assert row["container_cpu_pct"] == pytest.approx(5.0)
    assert math.isnan(row["container_throttled_pct"])
    still = {key("container_cpu_seconds", svc): 0.0}
    row = build_row(Window(cell, 0.0, 2.0, server=server, containers=still), Gates())
    assert math.isnan(row["container_cpu_s_per_request"])
    assert math.isnan(row["container_net_bytes_per_request"])
    assert math.isnan(row["container_throttled_pct"])


@pytest.mark.parametrize(
    ("cpu", "flag", "saturated"),
    [(0.5, None, False), (0.95, None, True), (0.5, 1.0, True), (0.5, 0.0, False)],
)
def test_generator_saturated_from_its_cpu_or_locusts_own_flag(
    tmp_path: Path, cpu: float, flag: float | None, saturated: bool
) -> None:
    cell = _scenario(tmp_path)[0]
    peaks = {} if flag is None else {key("client_saturated", {"instance_name": "w1"}): flag}
    row = build_row(Window(cell, 0.0, 2.0, peaks=peaks, generator_cpu_ratio=cpu), Gates())
    assert row["generator_saturated"] is saturated
    assert row["generator_cpu_ratio"] == cpu


def test_an_open_loops_drops_are_those_of_its_window_when_the_summary_has_one(
    tmp_path: Path,
) -> None:
    """Drops in the warm-up (a cold service, a generator starting) stay out of the row: the
    window's counts decide ``on_time``; a summary without a window gives the whole run's."""
    path = tmp_path / "open.toml"
    path.write_text('kinds = ["unary"]\ngenerator = "loadgen"\nloads = [{users = 4, rate = 100}]\n')
    cell = load_scenario(path).cells()[0]
    lag = {"p50": 0.1, "p99": 0.4, "max": 2.0}
    whole = {"scheduled": 700, "dropped": 30, "start_lag_ms": {**lag, "p99": 9.0}}
    summary = {**whole, "window": {"from_s": 1, "to_s": 6, "scheduled": 500, "dropped": 0,
                                   "start_lag_ms": lag}}  # fmt: skip
    row = schedule_columns(cell, summary, answered_per_s=99.0)
    assert (row["scheduled"], row["dropped"], row["dropped_pct"]) == (500, 0, 0.0)
    assert row["start_lag_p99_ms"] == 0.4 and row["on_time"] is True
    row = schedule_columns(cell, whole, answered_per_s=99.0)
    assert (row["scheduled"], row["dropped"], row["start_lag_p99_ms"]) == (700, 30, 9.0)
    assert row["dropped_pct"] == pytest.approx(30 / 7) and row["on_time"] is False

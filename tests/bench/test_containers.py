"""Which container on a topology cell's path used what: the rows a collapse is attributed by."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from wirelab_bench.histo import Snapshot, key
from wirelab_bench.results import CONTAINERS_CSV, write_tables
from wirelab_bench.scenario import Cell
from wirelab_bench.scenario_file import load_scenario
from wirelab_bench.tidy_hops import container_rows, in_arm

SVC = "container_label_com_docker_compose_service"


def _cell(tmp_path: Path, topology: str, protocol: str, runtime: str = "python") -> Cell:
    path = tmp_path / "s.toml"
    path.write_text(
        f'topology = "{topology}"\nprotocols = ["{protocol}"]\nruntimes = ["{runtime}"]\n'
        'kinds = ["unary"]\nloads = [{users = 1}]\nwork_ms = 100\n'
    )
    return load_scenario(path).cells()[0]


def _containers(**by_metric: dict[str, float]) -> Snapshot:
    return {
        key(metric, {SVC: service}): value
        for metric, values in by_metric.items()
        for service, value in values.items()
    }


@pytest.mark.parametrize(
    ("runtime", "service", "mine"),
    [
        ("python", "rest", True),
        ("python", "rest-b", True),
        ("python", "rest-shipping", True),
        ("python", "rest-node", False),
        ("python", "rest-node-b", False),
        ("python", "grpc-b", False),
        ("python", "restless", False),
        ("node", "rest-node", True),
        ("node", "rest-node-b", True),
        ("node", "rest", False),
        ("node", "rest-b", False),
    ],
)
def test_a_cell_s_arm_is_its_runtime_s_edge_and_hops(
    tmp_path: Path, runtime: str, service: str, mine: bool
) -> None:
    assert in_arm(_cell(tmp_path, "a-to-b", "rest", runtime), service) is mine


def test_each_container_on_the_path_says_what_it_used(tmp_path: Path) -> None:
    cell = _cell(tmp_path, "cluster", "rest")
    containers = _containers(
        container_cpu_seconds={"rest": 5.0, "lb": 1.0, "rest-b": 9.5, "grpc": 7.0, "rest-node": 2},
        container_cpu_periods={"rest": 100.0, "lb": 100.0, "rest-b": 100.0},
        container_cpu_throttled_periods={"rest": 0.0, "lb": 0.0, "rest-b": 80.0},
        container_memory={"rest": 100 * 2**20, "rest-b": 50 * 2**20},
    )
    rows = {r["service"]: r for r in container_rows(cell, "cluster", containers, 10.0, 500.0)}
    # The other protocol's arm and the other runtime's are not on this cell's path.
    assert set(rows) == {"rest", "lb", "rest-b"}
    b = rows["rest-b"]
    assert b["cell_id"] == cell.cell_id
    assert b["cores"] == pytest.approx(0.95)
    assert b["cpu_ms_per_order"] == pytest.approx(19.0)
    assert b["throttled_pct"] == pytest.approx(80.0)
    assert b["memory_peak_mib"] == pytest.approx(50.0)
    assert math.isnan(rows["lb"]["memory_peak_mib"])
    assert rows["rest"]["throttled_pct"] == 0.0


def test_the_amqp_arm_s_path_holds_its_broker(tmp_path: Path) -> None:
    cell = _cell(tmp_path, "order-chain", "amqp")
    containers = _containers(container_cpu_seconds={"amqp": 1.0, "rabbitmq": 2.0, "rest": 3.0})
    rows = container_rows(cell, "order-chain", containers, 10.0, 0.0)
    assert [r["service"] for r in rows] == ["amqp", "rabbitmq"]
    # No order served in the window: CPU per order is unknown, the cores are not.
    assert math.isnan(rows[0]["cpu_ms_per_order"]) and rows[1]["cores"] == pytest.approx(0.2)


def test_no_rows_outside_a_topology_or_without_a_scrape(tmp_path: Path) -> None:
    cell = _cell(tmp_path, "one-hop", "grpc")
    some = _containers(container_cpu_seconds={"grpc": 1.0})
    assert container_rows(cell, "one-hop", some, 10.0, 10.0) == []
    assert container_rows(_cell(tmp_path, "a-to-b", "grpc"), "a-to-b", None, 10.0, 10.0) == []


def test_the_rows_are_written_as_containers_csv(tmp_path: Path) -> None:
    cell = _cell(tmp_path, "a-to-b", "grpc")
    containers = _containers(container_cpu_seconds={"grpc": 1.0, "grpc-b": 2.0})
    rows = container_rows(cell, "a-to-b", containers, 10.0, 100.0)
    write_tables(tmp_path, [{"cell_id": cell.cell_id}], [], [], rows)
    table = pd.read_csv(tmp_path / CONTAINERS_CSV)
    assert list(table.service) == ["grpc", "grpc-b"]
    assert list(table.cpu_ms_per_order) == [10.0, 20.0]

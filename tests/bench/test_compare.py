"""`wirelab compare` on two small synthetic results folders: matching, ratios, flags, refusals."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from scipy import stats
from wirelab_bench import compare as cmp
from wirelab_bench.cli import main

SCENARIO = """description = "synthetic"
repetitions = 3
kinds = ["unary"]
loads = [{ users = 4, label = "low" }]
payload_sizes = [0]
warmup_s = 1
duration_s = 5

[gates]
max_error_ratio = 0.0
"""

MANIFEST: dict[str, Any] = {
    "scenario": "synthetic",
    "scenario_text": SCENARIO,
    "status": "complete",
    "knobs": {"locust_args": "", "network": "", "results_dir": "results", "progress": "on"},
    "git": {"sha": "a" * 40, "dirty": False},
    "host": {"hostname": "vm", "cpu_count": 2, "cpu_model": "AMD EPYC", "kernel": "6.1"},
    "packages": {"lock_sha256": "1" * 64},
    "docker": {
        "version": "20.10",
        "images": {"rest": {"image": "wirelab/rest:local", "id": "sha256:r1"}},
    },
    "servers": {"rest": "async", "grpc": "aio"},
    "topology": {"name": "one-hop", "peers": {"rest": [], "grpc": []}},
}


def _rows(protocol: str, rps: list[float], p99: list[float], **extra: Any) -> list[dict[str, Any]]:
    return [
        {"topology": "one-hop", "network": "direct", "protocol": protocol, "kind": "unary"}
        | {"load": "low", "users": 4, "payload_bytes": 0, "repetition": i}
        | {"requests_per_s": r, "client_p50_ms": 1.0, "client_p99_ms": p}
        | {"client_mean_ms": 1.2, "cpu_s_per_request": 0.001, "wire_bytes_per_request": 400.0}
        | extra
        for i, (r, p) in enumerate(zip(rps, p99, strict=True))
    ]


def _run(folder: Path, rows: list[dict[str, Any]], manifest: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(manifest or MANIFEST))
    pd.DataFrame(rows).to_csv(folder / "tidy.csv", index=False)
    return folder


def _verdicts(table: pd.DataFrame, protocol: str) -> dict[str, str]:
    part = table[table.protocol == protocol]
    return dict(zip(part.figure, part.verdict, strict=True))


def test_cells_match_on_their_keys_and_unmatched_ones_are_listed() -> None:
    a = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3) + _rows("grpc", [90] * 3, [6] * 3))
    # B's second cell has another payload: it must not match A's grpc cell of payload 0.
    b = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3) + _rows("grpc", [90] * 3, [6] * 3))
    b.loc[b.protocol == "grpc", "payload_bytes"] = 1024
    table = cmp.compare(a, b)
    assert set(table.protocol) == {"rest"}
    assert list(table.figure) == list(cmp.FIGURES)
    only_a, only_b = cmp.unmatched(a, b)
    assert only_a == ["topology=one-hop network=direct protocol=grpc kind=unary load=low "
                      "users=4 payload_bytes=0"]  # fmt: skip
    assert len(only_b) == 1 and "payload_bytes=1024" in only_b[0]


def test_a_folder_without_topology_or_network_columns_matches_the_defaults() -> None:
    old = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3)).drop(columns=["topology", "network"])
    table = cmp.compare(old, pd.DataFrame(_rows("rest", [100] * 3, [5] * 3)))
    assert len(table) == len(cmp.FIGURES) and set(table.verdict) == {cmp.SAME}


def test_runtime_is_a_key_once_a_run_has_it() -> None:
    a = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3, runtime="python"))
    b = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3, runtime="node"))
    assert cmp.compare(a, b).empty
    assert "runtime" in cmp.keys_of(a, b)
    # A folder from before the column measured the Python services: it matches python cells.
    older = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3))
    assert len(cmp.compare(older, a)) == len(cmp.FIGURES)


def test_hop_links_profile_is_a_key_and_older_topology_runs_carried_the_edges() -> None:
    edge = {"topology": "a-to-b", "network": "region"}
    older = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3, **edge))
    same = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3, **edge, hop_network="region"))
    other = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3, **edge, hop_network="direct"))
    assert "hop_network" in cmp.keys_of(older, same)
    assert len(cmp.compare(older, same)) == len(cmp.FIGURES)
    assert cmp.compare(older, other).empty
    assert cmp.compare(same, other).empty


def test_rest_http_and_arrivals_are_keys_and_older_runs_had_their_defaults() -> None:
    older = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3) + _rows("grpc", [90] * 3, [6] * 3))
    h1 = _rows("rest", [100] * 3, [5] * 3, rest_http="1.1")
    h2 = _rows("rest", [80] * 3, [4] * 3, rest_http="h2c")
    grpc = _rows("grpc", [90] * 3, [6] * 3, rest_http="")
    both = pd.DataFrame(h1 + h2 + grpc)
    table = cmp.compare(older, both)
    # The older run's REST cells spoke HTTP/1.1: they match those, never the h2c ones.
    assert set(zip(table.protocol, table.rest_http, strict=True)) == {("rest", "1.1"), ("grpc", "")}
    assert set(table[table.figure == "requests_per_s"].mean_b) == {100.0, 90.0}
    assert any("rest_http=h2c" in u for u in cmp.unmatched(older, both)[1])
    paced = {"generator": "loadgen", "target_rate": 500.0}
    before = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3, **paced))
    poisson = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3, **paced, arrivals="poisson"))
    constant = pd.DataFrame(_rows("rest", [100] * 3, [5] * 3, **paced, arrivals="constant"))
    assert cmp.compare(before, poisson).empty
    assert len(cmp.compare(before, constant)) == len(cmp.FIGURES)


@pytest.mark.filterwarnings("error")
def test_keys_empty_on_every_row_match_without_a_warning(tmp_path: Path) -> None:
    """A one-hop gRPC run's tidy.csv has hop_network and rest_http empty on every row, which read
    back as float64 columns of NaN: filling those with text printed a Pandas4Warning."""
    empty = {"hop_network": "", "rest_http": ""}
    a = _run(tmp_path / "A", _rows("grpc", [90] * 3, [6] * 3, **empty))
    b = _run(tmp_path / "B", _rows("grpc", [90] * 3, [6] * 3, **empty))
    (_, tidy_a), (_, tidy_b) = cmp.load_run(a), cmp.load_run(b)
    assert tidy_a["hop_network"].dtype == float  # as the runner's folders read back
    table = cmp.compare(tidy_a, tidy_b)
    assert len(table) == len(cmp.FIGURES) and set(table.hop_network) == {""}


def test_ratio_and_student_t_intervals() -> None:
    a = pd.DataFrame(_rows("rest", [98, 100, 102], [5, 5, 5]))
    b = pd.DataFrame(_rows("rest", [108, 110, 112], [5, 5, 5]))
    row = cmp.compare(a, b).set_index("figure").loc["requests_per_s"]
    half = stats.t.ppf(0.975, 2) * 2 / math.sqrt(3)  # sd 2 over 3 repetitions
    assert row.n_a == row.n_b == 3
    assert (row.low_a, row.high_a) == pytest.approx((100 - half, 100 + half))
    assert row.ratio == pytest.approx(1.1)
    assert row.ratio_low == pytest.approx((110 - half) / (100 + half))
    assert row.ratio_high == pytest.approx((110 + half) / (100 - half))
    assert row.ratio_low > 1  # the intervals do not overlap: more throughput, flagged
    assert row.verdict == cmp.IMPROVEMENT


def test_a_worse_figure_outside_the_intervals_is_a_regression() -> None:
    a = pd.DataFrame(_rows("rest", [100, 101, 99], [5.0, 5.1, 4.9]))
    worse = pd.DataFrame(_rows("rest", [100, 101, 99], [7.0, 7.1, 6.9]))
    noisy = pd.DataFrame(_rows("rest", [100, 101, 99], [4.0, 9.0, 5.0]))
    table = cmp.compare(a, worse)
    assert _verdicts(table, "rest")["client_p99_ms"] == cmp.REGRESSION
    assert _verdicts(table, "rest")["requests_per_s"] == cmp.SAME
    assert cmp.exit_code(table) == cmp.EXIT_REGRESSION
    # A higher mean whose interval overlaps A's is not flagged.
    assert _verdicts(cmp.compare(a, noisy), "rest")["client_p99_ms"] == cmp.SAME
    assert cmp.exit_code(cmp.compare(a, noisy)) == cmp.EXIT_OK
    # Fewer requests per second, outside the intervals: a regression too.
    slower = pd.DataFrame(_rows("rest", [80, 81, 79], [5.0, 5.1, 4.9]))
    assert _verdicts(cmp.compare(a, slower), "rest")["requests_per_s"] == cmp.REGRESSION


def test_one_repetition_gives_the_point_ratio_and_flags_nothing() -> None:
    a = pd.DataFrame(_rows("rest", [100], [5.0]))
    b = pd.DataFrame(_rows("rest", [50], [50.0]))
    table = cmp.compare(a, b)
    row = table.set_index("figure").loc["client_p99_ms"]
    assert row.ratio == pytest.approx(10.0)
    assert math.isnan(row.ratio_low) and math.isnan(row.ratio_high)
    assert set(table.verdict) == {cmp.ONE_REP}
    assert cmp.exit_code(table) == cmp.EXIT_OK


def _changed(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(MANIFEST)
    for dotted, value in changes.items():
        *path, last = dotted.split("__")
        node = out
        for part in path:
            node = node[part]
        node[last] = value
    return out


def test_manifest_fields_that_invalidate_and_those_that_do_not() -> None:
    blocking, shown = cmp.manifest_differences(MANIFEST, MANIFEST)
    assert blocking == shown == []
    new_commit = _changed(git__sha="b" * 40, packages__lock_sha256="2" * 64)
    new_commit["docker"]["images"]["rest"]["id"] = "sha256:r2"
    blocking, shown = cmp.manifest_differences(MANIFEST, new_commit)
    assert blocking == []  # a new commit, rebuilt images and packages: what a check compares
    assert {line.split(":")[0] for line in shown} == {
        "git.sha", "packages.lock_sha256", "docker.images.rest.id",
    }  # fmt: skip
    same_commit = _changed()
    same_commit["docker"]["images"]["rest"]["id"] = "sha256:r2"
    assert cmp.manifest_differences(MANIFEST, same_commit)[0] == [
        "docker.images.rest.id: 'sha256:r1' (A) vs 'sha256:r2' (B)"
    ]
    same_commit["git"]["dirty"] = True  # uncommitted changes: new images are expected
    assert cmp.manifest_differences(MANIFEST, same_commit)[0] == []
    other = _changed(
        host__cpu_count=8,
        knobs__locust_args="--processes 2",
        knobs__progress="off",
        scenario_text=SCENARIO.replace("duration_s = 5", "duration_s = 30").replace(
            "synthetic", "renamed"
        ),
    )
    other["servers"]["rest"] = "sync"
    other["docker"]["images"]["rest"]["image"] = "wirelab/rest:other"
    blocking, _ = cmp.manifest_differences(MANIFEST, other)
    assert [line.split(":")[0] for line in blocking] == [
        "docker.images.rest.image", "host.cpu_count", "knobs.locust_args",
        "scenario.duration_s", "servers",
    ]  # fmt: skip


def test_runs_traced_otherwise_refuse_where_both_know_and_show_where_one_cannot_tell() -> None:
    off = {**MANIFEST, "traces": {"on": False, "ratio": None}}
    every = {**MANIFEST, "traces": {"on": True, "ratio": 1.0}}
    unknown = {**MANIFEST, "traces": {"on": None, "ratio": None}}
    assert cmp.manifest_differences(off, every)[0] == ["traces: 'off' (A) vs 'on, ratio 1.0' (B)"]
    assert cmp.manifest_differences(every, {**every})[0] == []
    for a, b in ((MANIFEST, every), (unknown, every)):  # before the record; inside the lab
        blocking, shown = cmp.manifest_differences(a, b)
        assert blocking == [] and shown == ["traces: None (A) vs 'on, ratio 1.0' (B)"]


def test_cli_exit_codes_and_the_files_it_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "A", _rows("rest", [100, 101, 99], [5.0, 5.1, 4.9]))
    same = _run(tmp_path / "same", _rows("rest", [100, 102, 98], [5.0, 5.2, 4.8]))
    worse = _run(tmp_path / "worse", _rows("rest", [100, 101, 99], [7.0, 7.1, 6.9]))
    assert main(["compare", str(a), str(same)]) == 0
    assert (same / "compare_A.csv").is_file() and (same / "compare_A.html").is_file()
    assert main(["compare", str(a), str(worse), "--output-dir", str(tmp_path / "out")]) == 1
    out = capsys.readouterr().out
    assert (
        "regression: topology=one-hop network=direct protocol=rest kind=unary load=low users=4 "
        "payload_bytes=0 client_p99_ms B/A 1.400"
    ) in out
    csv = pd.read_csv(tmp_path / "out" / "compare_A.csv")
    assert set(csv.verdict) == {cmp.SAME, cmp.REGRESSION}
    page = (tmp_path / "out" / "compare_A.html").read_text()
    assert "regression" in page and "client_p99_ms" in page
    assert main(["compare", str(a), str(tmp_path / "missing")]) == 2
    assert "has no manifest.json" in capsys.readouterr().err


def test_cli_refuses_naming_the_fields_and_force_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "A", _rows("rest", [100, 101, 99], [5.0, 5.1, 4.9]))
    rows = _rows("rest", [100, 101, 99], [7.0, 7.1, 6.9])
    b = _run(tmp_path / "B", rows, _changed(host__hostname="other", knobs__network="region"))
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "refused" in err and "host.hostname: 'vm' (A) vs 'other' (B)" in err
    assert "knobs.network" in err and "--force" in err
    assert not (b / "compare_A.html").exists()
    assert main(["compare", str(a), str(b), "--force"]) == 1
    page = (b / "compare_A.html").read_text()
    assert "compared with --force" in page and "host.hostname" in page

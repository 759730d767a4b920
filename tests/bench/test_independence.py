"""Generator independence on synthetic cross-checks: each generator's gRPC/REST ratio per kind,
its interval, whether it is the reference tools', and what the report then says of each kind."""

from __future__ import annotations

from pathlib import Path

import pytest
from wirelab_bench import independence
from wirelab_bench.independence import Measured, Spread, agrees, spread, verdicts


def rounds(
    kind: str, generator: str, ratios: list[float], rest_ok: float = 1000.0, rest_p50: float = 2.0
) -> list[Measured]:
    """Both protocols per round, gRPC's figures ``ratio`` times REST's (its median too)."""
    out = []
    for rnd, ratio in enumerate(ratios):
        out.append(Measured(kind, generator, "rest", rnd, rest_ok, rest_p50))
        out.append(Measured(kind, generator, "grpc", rnd, rest_ok * ratio, rest_p50 * ratio))
    return out


def test_each_rounds_ratio_pairs_the_protocols_of_that_round() -> None:
    rows = rounds("unary", "locust", [0.5, 0.6, 0.7])
    rows.append(Measured("unary", "locust", "rest", 3, 900.0, 1.0))  # gRPC's run of round 3 failed
    assert independence.round_ratios(rows, "unary", "locust", "ok_per_s") == [0.5, 0.6, 0.7]
    assert independence.round_ratios(rows, "unary", "ghz+wrk", "ok_per_s") == []


def test_too_few_rounds_give_the_range_and_say_how_often_it_covers_the_median() -> None:
    three = spread([0.7, 0.5, 0.6])
    assert three == Spread(0.6, 0.5, 0.7, 3) and three.coverage == 0.75
    six = spread([0.50, 0.55, 0.60, 0.65, 0.70, 0.75])
    assert six is not None and six.coverage == 0.95 and (six.low, six.high) == (0.50, 0.75)
    assert spread([]) is None


def test_a_ratio_agrees_when_the_intervals_meet_or_within_ten_percent() -> None:
    ref = [Spread(0.50, 0.45, 0.55, 6)]
    assert agrees(Spread(0.58, 0.54, 0.62, 6), ref)  # intervals meet
    assert agrees(Spread(0.545, 0.56, 0.57, 6), ref)  # apart, but 9 % off the reference
    assert not agrees(Spread(0.70, 0.65, 0.75, 6), ref)


def test_a_generator_far_from_the_references_makes_the_kind_depend_on_it() -> None:
    rows = rounds("unary", "ghz+wrk", [0.50, 0.52, 0.48])
    rows += rounds("unary", "ghz+vegeta", [0.49, 0.51, 0.53])
    rows += rounds("unary", "loadgen", [0.50, 0.47, 0.51])
    rows += rounds("unary", "locust", [0.90, 0.95, 1.00])
    rows += rounds("upload", "ghz+wrk", [1.5, 1.6, 1.7])
    rows += rounds("upload", "locust", [1.6, 1.65, 1.7])
    found = verdicts(rows)
    assert found["unary"].differs == [("locust", "ok_per_s"), ("locust", "p50_ms")]
    assert not found["upload"].depends
    said = independence.sentence(found["unary"])
    assert "**The ratio depends on the generator**" in said
    assert "Locust's ratio of successful calls/s" in said and "wirelab-loadgen" in said
    assert "75 % over 3 rounds" in said
    assert "not shown to depend on the generator" in independence.sentence(found["upload"])


def test_references_that_disagree_say_the_rest_tool_moves_the_ratio() -> None:
    rows = rounds("download", "ghz+wrk", [2.0, 2.1, 2.2]) + rounds(
        "download", "ghz+vegeta", [4.0, 4.2, 4.4]
    )
    verdict = verdicts(rows)["download"]
    assert ("references", "ok_per_s") in verdict.differs and verdict.depends
    assert "the reference tools' ratios of successful calls/s among themselves" in (
        independence.sentence(verdict)
    )


def test_a_kind_without_a_reference_is_the_lab_generators_alone() -> None:
    rows = rounds("unary", "ghz+wrk", [0.5, 0.5]) + rounds("unary", "locust", [0.5, 0.5])
    # A generator without a reference on both sides gives no verdict for its kind.
    rows += rounds("server_stream", "locust", [0.4, 0.5])
    run = {"unary": {"locust"}, "bidi": {"locust"}, "upload_json": {"locust"},
           "server_stream": {"locust"}}  # fmt: skip
    lines = independence.report_lines(rows, run)
    assert lines[0].startswith("**unary**: gRPC/REST")
    assert any(line.startswith("**bidi**: Locust is the only generator") and "WebSocket" in line
               for line in lines)  # fmt: skip
    assert any(line.startswith("**server_stream**: Locust is the only generator") and
               "the cross-check did not measure it" in line for line in lines)  # fmt: skip
    assert not any("upload_json" in line for line in lines)  # REST's alone: no ratio to check


def test_the_file_round_trips_and_is_found_given_then_in_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = rounds("unary", "ghz+wrk", [0.5])
    meta = {"rate": 0, "connections": 5, "shape": {"payload_bytes": 65536}}
    independence.write(tmp_path / independence.FILE, meta, rows)
    assert independence.read(tmp_path / independence.FILE) == (meta, rows)
    monkeypatch.delenv("WIRELAB_REPORT_CROSSCHECK", raising=False)
    assert independence.find(tmp_path) == tmp_path / independence.FILE
    assert independence.find(tmp_path / "none") is None
    assert independence.find(tmp_path, "given.json") == Path("given.json")
    monkeypatch.setenv("WIRELAB_REPORT_CROSSCHECK", "from-env.json")
    assert independence.find(tmp_path) == Path("from-env.json")
    assert "closed loop over 5 connections" in independence.conditions(meta)


def test_the_table_marks_the_references_and_each_generators_agreement() -> None:
    rows = rounds("unary", "ghz+wrk", [0.5, 0.5]) + rounds("unary", "locust", [0.9, 0.9])
    table = independence.table(rows)
    assert [(r["generator"], r["agrees"]) for r in table] == [
        ("ghz / wrk", "reference"),
        ("Locust", "no"),
    ]
    assert table[0]["grpc/rest successful calls/s"] == "0.50 [0.50-0.50]"

"""The HTTP/2 benchmark's pure parts: h2load's output, the outcome check, the arm order, ratios."""

from __future__ import annotations

import struct
from collections import Counter

import pytest
from wirelab.v1 import wirelab_pb2 as pb
from wirelab_perf import ORDER, h2
from wirelab_perf.h2load import failed, grpc_body, parse_log, percentile
from wirelab_perf.loadtools import Load

SUMMARY = """finished in 2.00s, 200.00 req/s, 51.45KB/s
requests: 400 total, 404 started, 400 done, 398 succeeded, 2 failed, 1 errored, 0 timeout
status codes: 398 2xx, 0 3xx, 0 4xx, 1 5xx
"""


def test_log_lines_count_statuses_and_time_calls_in_ms() -> None:
    log = "1795471756917003\t200\t10253\n1795471756916991\t503\t899\n1795471756916951\t-1\t5\n"
    codes, latencies = parse_log(log)
    assert codes == Counter({"200": 1, "503": 1, "no answer": 1})
    assert latencies == [10.253, 0.899, 0.005]


def test_summary_gives_the_failed_calls() -> None:
    assert failed(SUMMARY) == 2
    with pytest.raises(ValueError, match="no requests line"):
        failed("h2load: connection refused\n")


def test_percentiles_interpolate() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == pytest.approx(50.5)
    assert percentile(values, 0.99) == pytest.approx(99.01)
    assert percentile([3.0], 0.99) == 3.0


def test_grpc_body_is_one_length_prefixed_order() -> None:
    body = grpc_body(ORDER)
    flag, length = struct.unpack(">BI", body[:5])
    assert flag == 0 and length == len(body) - 5
    assert pb.OrderRequest.FromString(body[5:]).order.order_id == ORDER["order"]["order_id"]


def test_every_arm_runs_in_every_position_over_a_turn_of_rounds() -> None:
    names = [arm.name for arm in h2.ARMS]
    turn = [h2.arm_order(r) for r in range(len(names))]
    for position in range(len(names)):
        assert sorted(order[position] for order in turn) == sorted(names)


def _load(ok: int) -> Load:
    return Load(1.0, Counter({"200": ok}), 1.0, 2.0)


def test_outcomes_must_match_what_h2load_saw() -> None:
    before = {"ok": 10.0, "client_error": 1.0}
    h2.check_outcomes("grpc", before, {"ok": 110.0, "client_error": 1.0}, _load(100), cut=4)
    # Calls cut off when h2load stopped may be ok (or cancelled) on the server: up to ``cut``.
    h2.check_outcomes("grpc", before, {"ok": 113.0, "cancelled": 1.0}, _load(100), cut=4)
    # A 200 with grpc-status INVALID_ARGUMENT in its trailers: h2load counted it ok.
    with pytest.raises(RuntimeError, match="others"):
        h2.check_outcomes("grpc", before, {"ok": 109.0, "client_error": 2.0}, _load(100), cut=4)
    with pytest.raises(RuntimeError):
        h2.check_outcomes("grpc", before, {"ok": 90.0}, _load(100), cut=4)


def _round(factor: float) -> h2.Round:
    base = {arm.name: h2.ArmRun(Load(1.0, Counter({"200": 100}), 1.0, 4.0), 0.05)
            for arm in h2.ARMS}  # fmt: skip
    base["h2-json"] = h2.ArmRun(Load(1.0, Counter({"200": 100}), factor, 4.0 * factor), 0.05)
    return base


def test_ratios_are_taken_within_each_round_then_their_median() -> None:
    rounds = [_round(f) for f in (0.5, 0.8, 0.9, 1.0, 1.2)]
    assert h2.ratios(rounds, "h2-json", "h1-granian", "p50") == [0.5, 0.8, 0.9, 1.0, 1.2]
    assert h2.interval([0.5, 0.8, 0.9, 1.0, 1.2])[0] == 0.9
    assert h2.ratios(rounds, "grpc", "h2-json", "cpu") == [1.0] * 5
    lines = h2.report(rounds)
    http2 = next(line for line in lines if line.startswith("HTTP/2: h2c / HTTP/1.1"))
    assert "0.90 [" in http2

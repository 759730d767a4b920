"""The Locust h2c/1.1 benchmark: its ratios, and one short round over a real Granian process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
from wirelab_perf import locust_h2
from wirelab_perf.locust_overhead import Result


def _result(rps: float, cpu: float, median: float) -> Result:
    return Result(int(rps * 10), 0, rps, cpu, median, median)


def test_a_round_without_calls_fails_the_run_instead_of_a_ratio(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Locust run that answered nothing (it ended before its users called) is no figure."""

    @contextmanager
    def no_service(*_: Any) -> Iterator[SimpleNamespace]:
        yield SimpleNamespace(address="http://127.0.0.1:1")

    rounds = iter([_result(1, 1, 1), _result(1, 1, 1), _result(100, 5, 2), _result(0, 1, 0)])
    monkeypatch.setattr(locust_h2, "service", no_service)
    monkeypatch.setattr(locust_h2, "run_locust", lambda *_: next(rounds))
    assert locust_h2.main(["--rounds", "1"]) == 1
    out = capsys.readouterr().out
    assert "a round answered no call: no ratio" in out and "h2c / 1.1" not in out


def test_ratios_are_h2c_over_1_1_from_each_clients_median_round() -> None:
    results = {
        "1.1": [_result(100, 5, 2), _result(120, 5, 2), _result(300, 5, 9)],
        "h2c": [_result(60, 5, 4), _result(60, 6, 4), _result(90, 6, 5)],
    }
    got = locust_h2.ratios(results)
    assert got["calls/s"] == pytest.approx(60 / 120)
    # Per CPU-second, 1.1: 200, 240, 600; h2c: 120, 100, 150. Medians 240 and 120.
    assert got["calls per client CPU-s"] == pytest.approx(120 / 240)
    assert got["Locust median ms"] == pytest.approx(4 / 2)


def test_each_client_calls_the_same_service_with_its_own_http() -> None:
    one, two = (locust_h2.args_for(c, "http://127.0.0.1:1", 3) for c in locust_h2.CLIENTS)
    assert one[one.index("--rest-http") + 1] == "1.1" and two[two.index("--rest-http") + 1] == "h2c"
    assert [a for a in one if a not in ("1.1", "h2c")] == [
        a for a in two if a not in ("1.1", "h2c")
    ]


@pytest.mark.integration
def test_one_short_round_over_granian(capsys: pytest.CaptureFixture[str]) -> None:
    # Locust's run time counts from before its users start: 2 s answered no call once on this
    # 2-core machine while the integration stage's other worker and a unit run were busy.
    assert locust_h2.main(["--seconds", "5", "--rounds", "1", "--users", "2"]) == 0
    out = capsys.readouterr().out
    assert "1.1 round 0:" in out and "h2c round 0:" in out and " 0 failures" in out
    assert "calls per client CPU-s: " in out.split("h2c / 1.1")[1]

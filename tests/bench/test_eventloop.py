"""The event-loop benchmark (wirelab_perf.eventloop): its rounds, its summary, its arms."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest
from wirelab_perf import eventloop
from wirelab_perf.loadtools import Load

needs_tools = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("wrk") is None, reason="needs node and wrk"
)


def result(p50: float, heavy: float = 10.0, lag: float | None = 1.0) -> eventloop.Result:
    return eventloop.Result(Load(1.0, Counter({"200": 100}), p50, 4 * p50), heavy, lag, 1.0)


def test_each_arm_runs_first_as_often_as_the_others() -> None:
    arms = list(eventloop.ARMS)
    firsts = Counter(eventloop.rotation(arms, r)[0] for r in range(8))
    assert firsts == dict.fromkeys(arms, 2)
    assert all(sorted(eventloop.rotation(arms, r)) == sorted(arms) for r in range(8))


def test_the_summary_takes_each_rounds_ratio_to_the_first_arm() -> None:
    runs = [
        {"node": result(2.0), "node-cluster": result(1.0), "python-async": result(4.0, lag=None)}
        for _ in range(6)
    ]
    text = "\n".join(eventloop.summary(["node", "node-cluster", "python-async"], runs))
    assert "  node-cluster         1.00   x0.50 [0.50-0.50]" in text
    assert "  python-async         4.00   x2.00 [2.00-2.00]" in text
    # No lag series in Python: said, not computed as zero.
    lag = text.split("lag p99 ms")[1]
    assert "  python-async    -" in lag


@pytest.mark.parametrize(
    "argv",
    [["--arms", "java"], ["--arms", ""], ["--light", "0"], ["--workers", "1"], ["--rounds", "0"]],
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        eventloop.main(argv)
    assert exited.value.code == 2


@pytest.mark.integration
@needs_tools
def test_one_short_round_over_real_services(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--arms", "node,node-cluster,python-async", "--rounds", "1", "--seconds", "1"]
    assert eventloop.main([*argv, "--light", "2", "--heavy", "1", "--blob", "65536"]) == 0
    out = capsys.readouterr().out
    rounds = [line for line in out.splitlines() if line.startswith("round 0 ")]
    assert len(rounds) == 3
    for line in rounds:
        assert " 0.0/s" not in line.split("|")[0], line  # small orders answered
        assert "heavy    0.0/s" not in line, line
    lags = {line.split()[2]: line.split("lag p99")[1] for line in rounds}
    assert lags["python-async"].strip().startswith("-")
    assert not lags["node"].strip().startswith("-")
    assert "x" in out.split("small p50 ms")[1]  # ratios to the first arm

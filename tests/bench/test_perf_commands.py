"""`wirelab perf <name>`: every experiment of the lab is listed once, with its line, and run."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from wirelab_bench.cli import main
from wirelab_perf import commands
from wirelab_perf import scrape_cost as an_experiment

PERF = Path(commands.__file__).parent
# A module with a main that is no experiment: the relay process the hop experiment starts.
PROCESSES = {"barerelay"}


def _has_main(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)


def test_every_module_with_a_main_is_an_experiment_of_the_list() -> None:
    with_main = {p.stem for p in PERF.glob("*.py") if _has_main(p)} - PROCESSES
    listed = {name.replace("-", "_") for name in commands.EXPERIMENTS}
    assert with_main == listed, "add the new experiment to perf/commands.py EXPERIMENTS"
    assert len(set(commands.EXPERIMENTS)) == len(commands.EXPERIMENTS)


@pytest.mark.parametrize("name", commands.EXPERIMENTS)
def test_each_experiment_has_one_line_of_help(name: str) -> None:
    line = commands.summary(name)
    assert line[:1].isupper() and line.endswith(".") and len(line) <= 100, line


def test_wirelab_help_lists_every_experiment_with_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for name in commands.EXPERIMENTS:
        assert f"  {name}" in out and commands.summary(name) in out


def test_perf_help_lists_them_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["perf", "--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in commands.EXPERIMENTS)


def test_everything_after_the_name_goes_to_the_experiment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        seen.append(argv)
        return 7

    monkeypatch.setattr(an_experiment, "main", fake_main)
    assert main(["perf", "scrape-cost", "--help", "--rounds", "1", "x"]) == 7
    assert seen == [["--help", "--rounds", "1", "x"]]


def test_an_experiment_prints_its_own_usage_under_its_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["perf", "scrape-cost", "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: wirelab perf scrape-cost")


def test_an_unknown_experiment_or_argument_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["perf", "no-such"])
    assert done.value.code == 2
    with pytest.raises(SystemExit) as done:
        main(["report", "--no-such-option"])
    assert done.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err

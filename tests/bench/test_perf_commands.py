"""`wirelab perf <name>`: every experiment of the lab is declared once, listed with its line, and
run; the runner finds them by entry point and imports nothing of theirs."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import wirelab_perf
from wirelab_bench import experiments
from wirelab_bench.cli import main
from wirelab_perf import scrape_cost as an_experiment

from tests.config.queries import REPO

PERF = Path(wirelab_perf.__file__).parent
RUNNER = REPO / "bench" / "wirelab_bench"
# A module with a main that is no experiment: the relay process the hop experiment starts.
PROCESSES = {"barerelay"}
# pyproject.toml's declaration, name -> "module:main": what an install of the checkout gives.
DECLARED: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
    "entry-points"
][experiments.GROUP]


def _has_main(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)


def test_every_module_with_a_main_is_declared_as_an_experiment() -> None:
    with_main = {p.stem for p in PERF.glob("*.py") if _has_main(p)} - PROCESSES
    expected = {stem.replace("_", "-"): f"wirelab_perf.{stem}:main" for stem in with_main}
    assert expected == DECLARED, (
        'declare each experiment in pyproject.toml [project.entry-points."wirelab.experiments"]'
    )


def test_the_installed_experiments_are_the_declared_ones() -> None:
    installed = {name: experiment.value for name, experiment in experiments.installed().items()}
    assert installed == DECLARED, "stale install: offline/venv reinstalls the checkout"
    assert list(installed) == sorted(DECLARED), "listed by name"


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_runner_imports_nothing_of_the_experiments() -> None:
    sources = sorted(RUNNER.rglob("*.py"))
    assert RUNNER / "cli.py" in sources
    back = {
        f"{path.relative_to(REPO)}: {name}"
        for path in sources
        for name in _imported(path)
        if name.split(".")[0] == "wirelab_perf"
    }
    assert not back, back


def test_wirelab_help_imports_no_experiment() -> None:
    # In a fresh interpreter: this one has imported some experiments already.
    code = (
        "import contextlib, io, sys\n"
        "from wirelab_bench.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('wirelab_perf.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", DECLARED)
def test_each_experiment_has_one_line_of_help(name: str) -> None:
    line = experiments.summary(experiments.installed()[name])
    assert line[:1].isupper() and line.endswith(".") and len(line) <= 100, line


def test_wirelab_help_lists_every_experiment_with_its_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for name, experiment in experiments.installed().items():
        assert f"  {name}" in out and experiments.summary(experiment) in out


def test_perf_help_lists_them_too(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["perf", "--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in DECLARED)


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

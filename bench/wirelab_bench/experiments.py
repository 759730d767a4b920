"""The lab's own experiments as `wirelab perf <name>`: found by entry point, listed, run."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

# The entry points' group (pyproject.toml): each experiment's name is its command, its value the
# main(argv) that returns the exit code, its module docstring's first line its help. The runner
# reads the group instead of importing the experiments' package, which imports the runner.
GROUP = "wirelab.experiments"


def installed() -> dict[str, EntryPoint]:
    """Every installed experiment by its command name, in the names' order (setuptools writes
    the group sorted, whatever pyproject.toml's order)."""
    found = entry_points(group=GROUP)
    return {experiment.name: experiment for experiment in sorted(found, key=lambda e: e.name)}


def summary(experiment: EntryPoint) -> str:
    """The experiment's one line, read from its source without importing it: the experiments
    import grpc, uvicorn, Locust and the services (about a second each here), which
    `wirelab --help` has no need of. find_spec imports the package's light __init__ only."""
    spec = importlib.util.find_spec(experiment.module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"experiment {experiment.name}: no module {experiment.module}")
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or ""
    line = doc.splitlines()[0].removeprefix("Benchmark: ") if doc else ""
    return line[:1].upper() + line[1:]


def listing() -> str:
    """Every experiment with its line, for `wirelab --help`."""
    experiments = installed()
    if not experiments:
        return f"  none installed: no entry point of {GROUP} (reinstall the checkout: offline/venv)"
    width = max(map(len, experiments))
    return "\n".join(
        f"  {name:{width}}  {summary(experiment)}" for name, experiment in experiments.items()
    )


def run(name: str, argv: Sequence[str]) -> int:
    """Run one experiment with its own arguments; its exit code."""
    main = installed()[name].load()
    return int(main(list(argv)))

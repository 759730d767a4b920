"""The lab's own experiments as `wirelab perf <name>`: the one list, their help, their run."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Sequence
from pathlib import Path

# Every experiment, by its command name: a module of this package (dashes for underscores) whose
# main(argv) returns the exit code and whose docstring's first line is its help. The package's
# other modules are what the experiments share; barerelay has a main too, but it is the relay
# process that `hop` starts, not an experiment.
EXPERIMENTS = (
    "overhead",
    "trace-cost",
    "node",
    "eventloop",
    "payloads",
    "grpc-memory",
    "overload",
    "soak",
    "locust-overhead",
    "crosscheck",
    "openloop",
    "monitoring",
    "probes",
    "hop",
    "relay-client",
    "h2",
    "locust-h2",
    "orderchain",
    "scrape-cost",
)


def module(name: str) -> str:
    """The experiment's module, importable."""
    return f"{__package__}.{name.replace('-', '_')}"


def summary(name: str) -> str:
    """The experiment's one line, read from its source without importing it: the experiments
    import grpc, uvicorn, Locust and the services (about a second each here), which
    `wirelab --help` has no need of."""
    source = Path(__file__).with_name(f"{name.replace('-', '_')}.py").read_text()
    doc = ast.get_docstring(ast.parse(source)) or ""
    line = doc.splitlines()[0].removeprefix("Benchmark: ") if doc else ""
    return line[:1].upper() + line[1:]


def listing() -> str:
    """Every experiment with its line, for `wirelab --help`."""
    width = max(map(len, EXPERIMENTS))
    return "\n".join(f"  {name:{width}}  {summary(name)}" for name in EXPERIMENTS)


def run(name: str, argv: Sequence[str]) -> int:
    """Run one experiment with its own arguments; its exit code."""
    main = importlib.import_module(module(name)).main
    return int(main(list(argv)))

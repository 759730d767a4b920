"""The runner's and the experiments' knobs, from the knob table (contract/knobs-lab.json): each
part's defaults, types and --help lines are the table's, each knob a flag and a variable."""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection, Iterable
from pathlib import Path

from wirelab.contract.table import Entry, of, part_of_prefix

# The runner's knobs typed, generated from the table's part "runner" (make knobs).
from wirelab_bench.runnerfields import Knobs as Knobs

# Source checkout root, for defaults that point at the repository's own files.
REPO = Path(__file__).resolve().parents[2]


# The runner's knobs, (name, type, default, help), from the table's part "runner".
RUNNER: tuple[Entry, ...] = of("runner")
KNOBS: tuple[tuple[str, type, object, str], ...] = tuple(
    (e.name, e.python_type, e.value, e.help) for e in RUNNER
)
_DEFAULTS = {name: value for name, _, value, _ in KNOBS}
NETWORK_PROFILES = str(_DEFAULTS["network_profiles"])
# Where `make tools` installs the lab's precise generator (loadgen/, offline/go-tools).
LOADGEN_BINARY = str(_DEFAULTS["loadgen"])


def env_name(name: str) -> str:
    return "WIRELAB_BENCH_" + name.upper()


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add(parser: argparse.ArgumentParser, entry: Entry) -> None:
    """One option for ``entry``; its default comes from the variable when set."""
    fallback = entry.value
    raw = os.environ.get(entry.env)
    try:
        value = entry.python_type(raw) if raw is not None else fallback
    except ValueError:
        parser.error(f"{entry.env}={raw!r} is not a valid {entry.python_type.__name__}")
    parser.add_argument(
        entry.flag,
        dest=entry.name,
        type=entry.python_type,
        default=value,
        choices=entry.choices or None,
        help=f"{entry.help} (default {fallback!r}; env {entry.env})",
    )


def add_arguments(parser: argparse.ArgumentParser, only: Collection[str] = ()) -> None:
    """One option per runner knob (or per knob named in ``only``)."""
    for entry in RUNNER:
        if not only or entry.name in only:
            _add(parser, entry)


def from_namespace(ns: argparse.Namespace) -> Knobs:
    return Knobs(**{e.name: getattr(ns, e.name) for e in RUNNER})


def parser(prog: str, description: str | None, prefix: str) -> argparse.ArgumentParser:
    """An experiment's command line: every knob of the table's part whose variables start with
    ``prefix`` (``WIRELAB_HOP`` for `wirelab perf hop`), as ``--flag`` read from the variable
    first."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    for entry in of(part_of_prefix(prefix)):
        _add(p, entry)
    return p


def listed(cli: argparse.ArgumentParser, value: str, known: Iterable[str], what: str) -> list[str]:
    """A comma-separated knob's items, in order, each one of ``known``; else a usage error (exit
    2) naming the unknown ones, or that none was given."""
    items = [item for item in value.split(",") if item]
    unknown = sorted(set(items) - set(known))
    if unknown or not items:
        cli.error(f"unknown or no {what}: {', '.join(unknown) or 'none given'}")
    return items

"""Command-line knobs for the services' benchmark commands: flag, env variable, default, help."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Sequence

# (flag, type, default, help)
Knob = tuple[str, type, object, str]


def parser(
    prog: str, description: str | None, prefix: str, knobs: Sequence[Knob]
) -> argparse.ArgumentParser:
    """Each knob is ``--flag`` with its default read from ``<prefix>_<FLAG>`` first."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    for flag, kind, default, text in knobs:
        env = f"{prefix}_{flag.upper().replace('-', '_')}"
        p.add_argument(
            f"--{flag}",
            type=kind,
            default=kind(os.environ.get(env, default)),
            help=f"{text} (env {env}, default {default})",
        )
    return p


def listed(cli: argparse.ArgumentParser, value: str, known: Iterable[str], what: str) -> list[str]:
    """A comma-separated knob's items, in order, each one of ``known``; else a usage error (exit
    2) naming the unknown ones, or that none was given."""
    items = [item for item in value.split(",") if item]
    unknown = sorted(set(items) - set(known))
    if unknown or not items:
        cli.error(f"unknown or no {what}: {', '.join(unknown) or 'none given'}")
    return items

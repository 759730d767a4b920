"""Every knob of the lab as one table: the services' (contract/knobs.json, which Node.js reads
too) and every other part's (contract/knobs-lab.json), each with its variable, flag, type, default,
reader and one line of meaning. docs/knobs.md is generated from it (wirelab.contract.knobdoc)."""

from __future__ import annotations

import builtins
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wirelab.contract import HOST_PORTS, host_address, host_url
from wirelab.contract.folder import read
from wirelab.contract.knobs import KNOBS as SERVICE_KNOBS

_LAB: dict[str, Any] = read("knobs-lab.json")
# Python's type for each of the table's types, for argparse.
PYTHON_TYPES: dict[str, type] = {
    "int": int,
    "number": float,
    "seconds": float,
    "ratio": float,
    "choice": str,
    "text": str,
    "list": str,
}


@dataclass(frozen=True)
class Part:
    """A reader of knobs: the prefix of its variables and what reads them."""

    name: str
    prefix: str
    reader: str


@dataclass(frozen=True)
class Entry:
    """One knob: variable ``<prefix><NAME>``, flag ``--<name-with-dashes>``."""

    part: str
    name: str
    type: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    runtimes: tuple[str, ...] = ()
    web_ui: bool = False
    # Why the default is what it is, where it was measured.
    why: str = ""

    @property
    def env(self) -> str:
        return PARTS[self.part].prefix + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def python_type(self) -> builtins.type[Any]:
        return PYTHON_TYPES[self.type]

    @property
    def value(self) -> Any:
        """The default as its reader takes it: templates resolved, typed."""
        return self.python_type(resolve(self.default))


PARTS: dict[str, Part] = {name: Part(name, **raw) for name, raw in _LAB["parts"].items()}
ENTRIES: tuple[Entry, ...] = (
    *(
        Entry("services", k.name, k.type, k.default, k.help, k.choices, k.runtimes, why=k.why)
        for k in SERVICE_KNOBS
    ),
    *(
        Entry(
            k["part"],
            k["name"],
            k["type"],
            k["default"],
            k["help"],
            tuple(k.get("choices", ())),
            web_ui=k.get("web_ui", False),
            why=k.get("why", ""),
        )
        for k in _LAB["knobs"]
    ),
)
BY_ENV: dict[str, Entry] = {e.env: e for e in ENTRIES}
REPO = Path(__file__).resolve().parents[3]


def of(part: str) -> tuple[Entry, ...]:
    """The knobs one part reads, in the table's order."""
    if part not in PARTS:
        raise KeyError(f"no part {part!r} in the knob table")
    return tuple(e for e in ENTRIES if e.part == part)


def part_of_prefix(prefix: str) -> str:
    """The part whose variables start with ``prefix`` (``WIRELAB_HOP`` or ``WIRELAB_HOP_``)."""
    wanted = prefix if prefix.endswith("_") else prefix + "_"
    found = [p.name for p in PARTS.values() if p.prefix == wanted]
    if len(found) != 1:
        raise KeyError(f"no one part of the knob table has the prefix {wanted!r}")
    return found[0]


def resolve(default: object, repo: Path = REPO, *, here: bool = True) -> str:
    """A default as text, its templates filled: ``{url[rest]}``, ``{address[grpc]}`` (where the
    lab publishes a service: HOST_PORTS), ``{repo}`` (the checkout), ``{home}``, and
    ``{here}/path``: the working directory's ``path`` when it has one (a compose service mounts
    the repository at its workdir), else the checkout's (``here=False``: the checkout's)."""
    if not isinstance(default, str):
        return str(default)
    if default.startswith("{here}/"):
        relative = default.removeprefix("{here}/")
        return relative if here and Path(relative).exists() else str(repo / relative)
    return default.format(
        url={name: host_url(name) for name in HOST_PORTS},
        address={name: host_address(name) for name in HOST_PORTS},
        repo=repo,
        home=Path.home(),
    )


def value(env: str, environ: Mapping[str, str] = os.environ) -> Any:
    """A declared knob as a file that reads it alone takes it: its variable when set and not
    empty, else its default, typed (KeyError for a name the table does not declare)."""
    entry = BY_ENV[env]
    raw = environ.get(env, "")
    return entry.python_type(raw) if raw else entry.value

"""The services' WIRELAB_* knobs (contract/knobs.json): one table both runtimes read, so
each default, type and help line is written once (node/src/settings.js reads the same file)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from wirelab.contract.folder import read

KnobType = Literal["int", "seconds", "ratio", "choice", "text", "list"]
_SECONDS = re.compile(r"\d+(\.\d+)?")


@dataclass(frozen=True)
class Knob:
    """One knob: env ``WIRELAB_<NAME>``, flag ``--<name-with-dashes>``."""

    name: str
    type: KnobType
    default: int | float | str
    help: str
    runtimes: tuple[str, ...]
    choices: tuple[str, ...] = ()
    minimum: int = 0
    # A field of the core's Limits rather than of Settings.
    limits: bool = False
    # Why the default is what it is, where it was measured.
    why: str = ""

    @property
    def env(self) -> str:
        return f"WIRELAB_{self.name.upper()}"

    @property
    def flag(self) -> str:
        return f"--{self.name.replace('_', '-')}"

    @property
    def switch(self) -> bool:
        """An on/off choice, which the Python settings hold as a boolean."""
        return self.type == "choice" and set(self.choices) == {"on", "off"}

    def parse(self, text: str) -> int | float | str:
        """``text`` (a flag's or the variable's value) as this knob's type; ValueError naming the
        variable when it is not one (the same words as node/src/settings.js)."""
        if self.type == "int":
            if not text.isdigit() or not text.isascii():
                raise ValueError(f"{self.env} must be a non-negative integer (got {text!r})")
            if int(text) < self.minimum:
                raise ValueError(f"{self.env} must be at least {self.minimum}")
            return int(text)
        if self.type == "seconds":
            if not _SECONDS.fullmatch(text):
                what = "a non-negative number of seconds"
                raise ValueError(f"{self.env} must be {what} (got {text!r})")
            return float(text)
        if self.type == "ratio":
            if not _SECONDS.fullmatch(text) or float(text) > 1:
                raise ValueError(f"{self.env} must be a number from 0 to 1 (got {text!r})")
            return float(text)
        if self.type == "choice" and text not in self.choices:
            raise ValueError(f"{self.env} must be one of {', '.join(self.choices)}")
        return text


def _knob(raw: dict[str, Any]) -> Knob:
    if raw["type"] not in ("int", "seconds", "ratio", "choice", "text", "list"):
        raise ValueError(f"{raw['name']}: unknown type {raw['type']!r}")
    knob = Knob(
        raw["name"],
        raw["type"],
        raw["default"],
        raw["help"],
        tuple(raw["runtimes"]),
        tuple(raw.get("choices", ())),
        raw.get("minimum", 0),
        raw.get("limits", False),
        raw.get("why", ""),
    )
    knob.parse(str(knob.default))  # a default its own type refuses is a broken table
    return knob


TABLE: dict[str, Any] = read("knobs.json")
KNOBS: tuple[Knob, ...] = tuple(_knob(k) for k in TABLE["knobs"])
# name -> default, typed (seconds as float): what Settings and Limits default to.
DEFAULTS: dict[str, Any] = {k.name: k.parse(str(k.default)) for k in KNOBS}

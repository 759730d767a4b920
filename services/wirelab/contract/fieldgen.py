"""The Python services' settings as typed dataclass fields, generated from the knob table
(contract/knobs.json) into wirelab/knobfields.py: `python -m wirelab.contract.fieldgen` writes it,
`--check` exits 1 when it is stale (tests/config/test_knobs.py runs it). Settings and the core's
Limits are these classes, so no knob's name, type or default is typed twice by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from wirelab.contract.folder import write_or_check
from wirelab.contract.knobs import KNOBS, Knob

MODULE = Path(__file__).resolve().parents[1] / "knobfields.py"
HEAD = '''"""The Python services' knobs as typed fields: generated from contract/knobs.json by
`python -m wirelab.contract.fieldgen`; do not edit."""

from __future__ import annotations

from dataclasses import dataclass, field
'''


def annotation(knob: Knob) -> str:
    if knob.switch:
        return "bool"
    if knob.type == "list":
        return "tuple[str, ...]"
    return {"int": "int", "seconds": "float", "ratio": "float"}.get(knob.type, "str")


def default(knob: Knob) -> str:
    value = knob.parse(str(knob.default))
    if knob.switch:
        return str(value == "on")
    if knob.type == "list":
        return repr(tuple(item.strip() for item in str(value).split(",") if item.strip()))
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _fields(knobs: list[Knob]) -> list[str]:
    return [f"    {k.name}: {annotation(k)} = {default(k)}" for k in knobs]


def render() -> str:
    python = [k for k in KNOBS if "python" in k.runtimes]
    limits = [k for k in python if k.limits]
    rest = [k for k in python if not k.limits]
    return "\n".join(
        [
            HEAD,
            "",
            "@dataclass(frozen=True)",
            "class Limits:",
            '    """Largest values the services accept: the knobs the table marks limits."""',
            "",
            *_fields(limits),
            "",
            "",
            "@dataclass(frozen=True)",
            "class Fields:",
            '    """Every other knob the Python services honour, resolved."""',
            "",
            *_fields(rest),
            "    limits: Limits = field(default_factory=Limits)",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return write_or_check(MODULE, render(), args, "python -m wirelab.contract.fieldgen")


if __name__ == "__main__":
    sys.exit(main())

"""Typed dataclass fields generated from the knob table: the Python services' settings
(contract/knobs.json) into wirelab/knobfields.py, the runner's knobs (contract/knobs-lab.json's
part "runner") into wirelab_bench/runnerfields.py. `python -m wirelab.contract.fieldgen` writes
both, `--check` exits 1 when one is stale (tests/config/test_knobs.py runs it). Settings, the
core's Limits and the runner's Knobs are these classes, so no knob's name, type or default is
typed twice by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from wirelab.contract.folder import write_or_check
from wirelab.contract.knobs import KNOBS, Knob
from wirelab.contract.table import of

MODULE = Path(__file__).resolve().parents[1] / "knobfields.py"
# The runner lives beside the services in the checkout (bench/), the one place this runs from.
RUNNER_MODULE = Path(__file__).resolve().parents[3] / "bench" / "wirelab_bench" / "runnerfields.py"
COMMAND = "python -m wirelab.contract.fieldgen"
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


def render_runner() -> str:
    """The runner's Knobs: a field per knob of the part, in the table's order, without defaults
    (they hold the checkout's and the user's paths, resolved when the command line is read)."""
    return "\n".join(
        [
            '"""The runner\'s knobs as typed fields: generated from contract/knobs-lab.json (part',
            '"runner") by `python -m wirelab.contract.fieldgen`; do not edit."""',
            "",
            "from __future__ import annotations",
            "",
            "from dataclasses import dataclass",
            "",
            "",
            "@dataclass(frozen=True)",
            "class Knobs:",
            '    """The runner\'s knobs resolved (wirelab_bench.knobs.from_namespace)."""',
            "",
            *(f"    {e.name}: {e.python_type.__name__}" for e in of("runner")),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return max(
        write_or_check(MODULE, render(), args, COMMAND),
        write_or_check(RUNNER_MODULE, render_runner(), args, COMMAND),
    )


if __name__ == "__main__":
    sys.exit(main())

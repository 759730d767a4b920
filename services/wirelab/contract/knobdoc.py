"""docs/knobs.md from the knob table: `python -m wirelab.contract.knobdoc` writes it, `--check`
exits 1 when the page is not what the table says (tests/config/test_knobs.py runs it)."""

from __future__ import annotations

import sys
from pathlib import Path

from wirelab.contract.folder import write_or_check
from wirelab.contract.table import ENTRIES, PARTS, Entry, resolve

PAGE = Path(__file__).resolve().parents[3] / "docs" / "knobs.md"
HEAD = """# Knobs

Every knob of the lab, one table: the variable, its default, its type and one line of meaning,
by the part that reads it. Generated from `contract/knobs.json` (the services') and
`contract/knobs-lab.json` (every other part's) by `python -m wirelab.contract.knobdoc`; do not edit
by hand. A flag of the same name (`--name-with-dashes`) sets a knob of the services, the runner,
Locust and the experiments too, and wins over the variable. `tests/config/test_knobs.py` fails on
a `WIRELAB_*` name read anywhere that this table does not declare, and on one it declares that
nothing reads.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(entry: Entry) -> str:
    # Templates shown as the lab's defaults, the checkout and home as a reader's own.
    shown = resolve(entry.default, repo=Path("<repo>"), here=False)
    shown = shown.replace(str(Path.home()), "~")
    return f"`{_cell(shown)}`" if shown != "" else "empty"


def _type(entry: Entry) -> str:
    if entry.type == "choice":
        return " \\| ".join(f"`{c}`" for c in entry.choices)
    return entry.type


def render() -> str:
    out = [HEAD]
    for part in PARTS.values():
        rows = [e for e in ENTRIES if e.part == part.name]
        out.append(f"## {part.name}\n")
        out.append(f"Read by {part.reader}; variables `{part.prefix}*`.\n")
        extra = " runtimes |" if part.name == "services" else ""
        out.append(f"| variable | default | type |{extra} meaning |")
        out.append("|---|---|---|" + ("---|" if extra else "") + "---|")
        for e in rows:
            runtimes = f" {', '.join(e.runtimes)} |" if extra else ""
            out.append(f"| `{e.env}` | {_default(e)} | {_type(e)} |{runtimes} {_cell(e.help)} |")
        out.append("")
        out.extend(f"- `{e.env}`: {e.why}" for e in rows if e.why)
        if any(e.why for e in rows):
            out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    return write_or_check(PAGE, render(), args, "python -m wirelab.contract.knobdoc")


if __name__ == "__main__":
    sys.exit(main())

"""docs/knobs.md from the knob table, and the knob blocks of the other docs pages: a block is the
rows of the knobs its marker selects, between `<!-- knobs: SELECTOR -->` and `<!-- /knobs -->`.
A selector is words, each `part:<name>` (a part without spaces in its name: services, runner,
locust, lab, scripts, ...), `runtime:<python|node>` (the services' knobs that runtime honours),
a variable or a glob of variables (`WIRELAB_AMQP_*`), or one of these after `-` to leave those
out; the rows come in the table's order.
`python -m wirelab.contract.knobdoc` writes the page and the blocks, `--check` exits 1 when one is
not what the table says (tests/config/test_knobs.py runs it)."""

from __future__ import annotations

import re
import sys
from fnmatch import fnmatchcase
from pathlib import Path

from wirelab.contract.folder import write_or_check
from wirelab.contract.table import ENTRIES, PARTS, Entry, resolve

DOCS = Path(__file__).resolve().parents[3] / "docs"
PAGE = DOCS / "knobs.md"
COMMAND = "python -m wirelab.contract.knobdoc"
BLOCK = re.compile(r"(<!-- knobs: ([^>]*?) -->\n)(.*?)(<!-- /knobs -->)", re.DOTALL)
# Parts whose knobs are flags too (`--name-with-dashes`), as the page's head says.
FLAGGED = ("services", "runner", "locust", "perf ")
HEAD = """# Knobs

Every knob of the lab, one table: the variable, its default, its type and one line of meaning,
by the part that reads it. Generated from `contract/knobs.json` (the services') and
`contract/knobs-lab.json` (every other part's) by `python -m wirelab.contract.knobdoc`; do not edit
by hand. A flag of the same name (`--name-with-dashes`) sets a knob of the services, the runner,
Locust and the experiments too, and wins over the variable. A page links to a knob's row as
`knobs.md#` and the variable in lower case (`knobs.md#wirelab_rest_port`).
`tests/config/test_knobs.py` fails on a `WIRELAB_*` name read anywhere that this table does not
declare, on one it declares that nothing reads, and on a page that gives a knob another default.
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


def _table(
    rows: list[Entry], flags: bool = False, web_ui: bool = False, anchors: bool = False
) -> list[str]:
    """The rows as a Markdown table (with a flag and a web UI column, and an anchor on each row,
    when asked), then the reasons of those that have one."""
    runtimes = any(e.part == "services" for e in rows)
    head = ["variable", *(["flag"] * flags), "default", "type", *(["runtimes"] * runtimes)]
    head += [*(["web UI"] * web_ui), "meaning"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in rows:
        name = f'<a id="{e.env.lower()}"></a>`{e.env}`' if anchors else f"`{e.env}`"
        cells = [name, *([f"`{e.flag}`"] * flags), _default(e), _type(e)]
        cells += [*([", ".join(e.runtimes)] * runtimes), *(["yes" if e.web_ui else "no"] * web_ui)]
        out.append("| " + " | ".join([*cells, _cell(e.help)]) + " |")
    out.append("")
    out.extend(f"- `{e.env}`: {e.why}" for e in rows if e.why)
    if any(e.why for e in rows):
        out.append("")
    return out


def render() -> str:
    out = [HEAD]
    for part in PARTS.values():
        out.append(f"## {part.name}\n")
        out.append(f"Read by {part.reader}; variables `{part.prefix}*`.\n")
        out.extend(_table([e for e in ENTRIES if e.part == part.name], anchors=True))
    return "\n".join(out)


def _matches(entry: Entry, word: str) -> bool:
    if word.startswith("part:"):
        return entry.part == word.removeprefix("part:")
    if word.startswith("runtime:"):
        return word.removeprefix("runtime:") in entry.runtimes
    return fnmatchcase(entry.env, word)


def select(selector: str) -> list[Entry]:
    """The knobs ``selector`` names, in the table's order (ValueError when a word names none)."""
    words = selector.split()
    for word in words:
        if not any(_matches(e, word.removeprefix("-")) for e in ENTRIES):
            raise ValueError(f"knob block {selector!r}: {word!r} names no knob of the table")
    return [
        e
        for e in ENTRIES
        if any(_matches(e, w) for w in words if not w.startswith("-"))
        and not any(_matches(e, w[1:]) for w in words if w.startswith("-"))
    ]


def block(selector: str) -> str:
    """A block's content: the table of the knobs ``selector`` names and where it comes from."""
    rows = select(selector)
    flags = any(e.part.startswith(FLAGGED) for e in rows)
    web_ui = any(e.part == "locust" for e in rows)
    note = "Generated from the knob table by `make knobs`; every knob: [knobs.md](knobs.md).\n"
    return "\n".join([*_table(rows, flags, web_ui), note])


def with_blocks(text: str) -> str:
    """``text`` with each knob block's content what the table says now."""
    return BLOCK.sub(lambda m: m[1] + "\n" + block(m[2]) + "\n" + m[4], text)


def pages() -> list[Path]:
    """The docs pages that hold a knob block."""
    return sorted(p for p in DOCS.glob("*.md") if p != PAGE and BLOCK.search(p.read_text()))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    stale = [write_or_check(PAGE, render(), args, COMMAND)]
    for page in pages():
        try:
            text = with_blocks(page.read_text())
        except ValueError as exc:
            print(f"{page}: {exc}", file=sys.stderr)
            return 2
        stale.append(write_or_check(page, text, args, COMMAND))
    return max(stale)


if __name__ == "__main__":
    sys.exit(main())

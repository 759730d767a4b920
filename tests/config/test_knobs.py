"""The knob table declares every knob once (contract/knobs.json, contract/knobs-lab.json): a
WIRELAB_* name that code, compose, a script or a page uses must be declared there, a declared one
must be read by something, docs/knobs.md and the pages' knob blocks must be what the table says,
and no page may give a knob another default, in a table or in a sentence."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from wirelab.contract import fieldgen, knobdoc
from wirelab.contract.knobs import KNOBS as SERVICE_KNOBS
from wirelab.contract.knobs import Knob
from wirelab.contract.table import BY_ENV, ENTRIES, PARTS, Entry, part_of_prefix, resolve

from tests.config.test_doc_links import prose

REPO = Path(__file__).resolve().parents[2]
NAME = re.compile(r"WIRELAB_[A-Z0-9_]*[A-Z0-9]")
# Names that look like knobs and are not variables.
NOT_VARIABLES = {
    "WIRELAB_NODE": "a Python constant, the wirelab-node arm's name (perf/hopstats.py)",
    "WIRELAB_PATH": "a JavaScript constant, the gRPC service's path prefix (grpc/server.js)",
    "WIRELAB_X": "a placeholder in prose: any knob",
}
# Where a name is its own declaration or its generated page.
DECLARATIONS = {"contract/knobs.json", "contract/knobs-lab.json", "docs/knobs.md"}
# Parts whose reader takes every knob of its part from the table, by prefix.
TABLE_READ = {"services", "runner", "locust"}


def _files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [f for f in listed if (REPO / f).is_file() and f not in DECLARATIONS]


def _text(path: str) -> str:
    try:
        return (REPO / path).read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return ""


FILES = {path: _text(path) for path in _files()}
CODE = {p: t for p, t in FILES.items() if not p.endswith(".md")}
PREFIXES = {part.prefix.rstrip("_") for part in PARTS.values()}


def _declared(name: str, after: str) -> bool:
    if name in BY_ENV or name in PREFIXES or name in NOT_VARIABLES:
        return True
    # A family written with a wildcard: WIRELAB_CLUSTER_*, WIRELAB_{REST,GRPC}_HOST_PORT, ...
    if after[:2] in ("_*", "_{", "_…") or after[:1] in ("*", "…"):
        return any(env.startswith(name) for env in BY_ENV)
    return False


def test_every_name_used_is_declared() -> None:
    undeclared: dict[str, set[str]] = {}
    for path, text in FILES.items():
        for match in NAME.finditer(text):
            if not _declared(match.group(), text[match.end() : match.end() + 2]):
                undeclared.setdefault(match.group(), set()).add(path)
    assert not undeclared, "declare these in contract/knobs-lab.json: " + "; ".join(
        f"{name} ({', '.join(sorted(paths))})" for name, paths in sorted(undeclared.items())
    )


def _read(entry: Entry) -> bool:
    if entry.part in TABLE_READ:
        return True
    prefix = PARTS[entry.part].prefix
    if prefix != "WIRELAB_":
        # An experiment reads its part by prefix (wirelab_bench.knobs.parser).
        return any(f'"{prefix.rstrip("_")}"' in text for text in CODE.values())
    # A test that sets a variable does not read it: only the tests' own knobs count theirs.
    return any(
        entry.env in text
        for path, text in CODE.items()
        if entry.part == "tests" or not path.startswith("tests/")
    )


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.env)
def test_every_declared_name_is_read(entry: Entry) -> None:
    assert _read(entry), f"nothing reads {entry.env}: drop it from the knob table"


def test_each_variable_is_declared_once() -> None:
    envs = [e.env for e in ENTRIES]
    assert len(envs) == len(set(envs))
    for entry in ENTRIES:
        assert entry.help and "\n" not in entry.help, entry.env
        entry.value  # noqa: B018 - a default its own type refuses is a broken table


def test_compose_defaults_are_the_tables() -> None:
    """compose cannot read the table, so a default it writes must be the table's (one of them,
    where a topology gives another, e.g. the cluster's through Toxiproxy)."""
    written: dict[str, set[str]] = {}
    compose = ["compose.yaml", *(p for p in CODE if p.startswith("topologies/"))]
    for path in compose:
        for m in re.finditer(r"\$\{(WIRELAB_[A-Z0-9_]+):?-([^}]*)\}", CODE.get(path, "")):
            written.setdefault(m.group(1), set()).add(m.group(2))
    wrong = {
        env: (BY_ENV[env].default, defaults)
        for env, defaults in written.items()
        if env in BY_ENV
        and BY_ENV[env].part != "services"
        and str(BY_ENV[env].default) not in defaults
    }
    assert not wrong


def test_the_reference_page_and_the_pages_knob_blocks_are_current() -> None:
    assert knobdoc.main(["--check"]) == 0, "python -m wirelab.contract.knobdoc"


def test_a_knob_block_is_the_rows_its_selector_names() -> None:
    selector = "WIRELAB_HOP_RATE part:tests -WIRELAB_CHROMIUM"
    stale = f"a\n<!-- knobs: {selector} -->\nold rows\n<!-- /knobs -->\nb"
    text = knobdoc.with_blocks(stale)
    rows = re.findall(r"^\| `(WIRELAB_\w+)`", text, re.MULTILINE)
    tests = [e.env for e in ENTRIES if e.part == "tests" and e.env != "WIRELAB_CHROMIUM"]
    assert rows == ["WIRELAB_HOP_RATE", *tests]
    assert "old rows" not in text and text.startswith("a\n") and text.endswith("<!-- /knobs -->\nb")
    assert knobdoc.with_blocks(text) == text
    with pytest.raises(ValueError, match="'WIRELAB_X_\\*' names no knob"):
        knobdoc.with_blocks("<!-- knobs: WIRELAB_X_* -->\n<!-- /knobs -->")


KNOB_NAME = re.compile(r"\b(?:WIRELAB|LOCUST)_[A-Z0-9_]*[A-Z0-9]\b")
# A name beside a bare value in a row: `WIRELAB_RABBITMQ_HOST_PORT` 5672.
BESIDE = re.compile(r"`((?:WIRELAB|LOCUST)_[A-Z0-9_]*[A-Z0-9])` (\d[\w.]*)")
EMPTY = {"", "empty", "(empty)", "unset", "—"}


def _said(cell: str) -> str:
    return cell.strip().strip("`").strip()


def _is_default(entry: Entry, said: str) -> bool:
    shown = _said(knobdoc._default(entry))
    if shown == "empty":
        return said in EMPTY
    return said in (shown, str(entry.default))


def wrong_defaults(text: str) -> list[str]:
    """Each table row of a Markdown page that gives a declared knob a default other than the
    table's: in a column headed "default", or as a bare value beside the name."""
    wrong = []
    header: list[str] = []
    for line in text.splitlines():
        if not line.startswith("|"):
            header = []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header:
            header = [c.lower() for c in cells]
            continue
        for env, value in BESIDE.findall(line):
            if env in BY_ENV and not _is_default(BY_ENV[env], value):
                wrong.append(f"{env} {value}: {line[:80]}")
        column = next((i for i, h in enumerate(header) if h.startswith("default")), None)
        if column is None or column >= len(cells):
            continue
        # The names of the first cell before the default column that has any (a name in the
        # meaning, after it, is not the row's knob).
        found = (KNOB_NAME.findall(c) for c in cells[:column])
        named = [n for n in next((f for f in found if f), []) if n in BY_ENV]
        if not named:
            continue
        said = re.split(r", | / ", cells[column])
        if len(named) != len(said) or not all(
            _is_default(BY_ENV[n], _said(s)) for n, s in zip(named, said, strict=False)
        ):
            wrong.append(f"{', '.join(named)} {cells[column]}: {line[:80]}")
    return wrong


# A default said in a sentence, in the forms the pages use: `NAME` (V ...), `NAME` (default V ...),
# `NAME`, default V, `NAME` two words (default V ...), `NAME=x` (default V ...), and `NAME=V`, the
# default / (the default ...). NAME is a variable or a flag; V a value in backticks, or a word
# with an optional binary unit ("1.25 GiB"). Without the word "default", V must be a number or
# on/off, so `--blob` (the 8 MiB one) says nothing about a default. A flag's knob is the one of
# that flag in the part its paragraph, else its section, names (`WIRELAB_H2_*`, `wirelab perf h2`).
NAMED = re.compile(r"`((?:WIRELAB|LOCUST)_[A-Z0-9_]*[A-Z0-9]|--[a-z][a-z0-9-]*)(=[^`\s]+)?`")
# A list ("250,500,1000") keeps its commas; one followed by a space ends the value.
VALUE = r"(`[^`]*`|[^\s,;)]+(?:,[^\s,;)]+)*(?: [KMG]iB)?)"
BARE = r"((?:\d|on\b|off\b)[^\s,;)]*(?: [KMG]iB)?)"
AFTER_NAME = re.compile(rf"(?:(?: [a-z]+){{0,2}} \(default |,? default ){VALUE}| \({BARE}")
AFTER_SETTING = re.compile(rf" \(default {VALUE}")
IS_THE_DEFAULT = re.compile(r",? \(?the default\b")
UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
# Where a paragraph (else its section) says whose flags it means.
PART_NAMED = re.compile(r"`WIRELAB_([A-Z0-9]+)_\*`|wirelab perf ([a-z0-9-]+)")


def _parts_named(text: str) -> set[str]:
    parts = set()
    for prefix, perf in PART_NAMED.findall(text):
        if prefix:
            try:
                parts.add(part_of_prefix("WIRELAB_" + prefix))
            except KeyError:
                continue
        elif f"perf {perf}" in PARTS:
            parts.add(f"perf {perf}")
    return parts


def _agrees(entry: Entry, said: str) -> bool:
    said = said.strip("`")
    number, _, unit = said.partition(" ")
    if unit in UNITS:
        return float(number) * UNITS[unit] == float(resolve(entry.default))
    if _is_default(entry, said):
        return True
    try:
        return float(said) == float(resolve(entry.default))
    except ValueError:
        return False


def prose_defaults(text: str) -> list[tuple[Entry | None, str, str]]:
    """Each default a page's sentences give a knob, outside tables, code and knob blocks: (the
    knob, or None for a flag its paragraph and section do not tie to one knob, the value said,
    the words)."""
    found: list[tuple[Entry | None, str, str]] = []
    for section in re.split(r"^#+ .*$", prose(knobdoc.BLOCK.sub("", text)), flags=re.MULTILINE):
        section_parts = _parts_named(section)
        for paragraph in re.split(r"\n\s*\n", section):
            words = " ".join(
                line.strip() for line in paragraph.splitlines() if not line.startswith("|")
            )
            parts = _parts_named(words) or section_parts
            for m in NAMED.finditer(words):
                name, setting = m.groups()
                rest = words[m.end() :]
                if setting and IS_THE_DEFAULT.match(rest):
                    said = setting[1:]
                elif said_match := (AFTER_SETTING if setting else AFTER_NAME).match(rest):
                    said = next(v for v in said_match.groups() if v)
                else:
                    continue
                if name.startswith("--"):
                    knobs = [e for e in ENTRIES if e.flag == name and e.part in parts]
                    entry = knobs[0] if len(knobs) == 1 else None
                else:
                    entry = BY_ENV.get(name)
                found.append((entry, said, words[m.start() : m.end() + 50]))
    return found


def wrong_prose_defaults(text: str) -> list[str]:
    return [
        f"{entry.env} {said}: {words}"
        for entry, said, words in prose_defaults(text)
        if entry is not None and not _agrees(entry, said)
    ]


PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_no_page_gives_a_knob_a_default_other_than_the_tables() -> None:
    """A knob's default is written once, in the table; a page shows it in a block `make knobs`
    writes from the table (docs/knobs.md and each page's `<!-- knobs: ... -->` blocks), or links
    to its row there; a sentence that still says it must say the table's."""
    wrong = {
        p.name: w
        for p in PAGES
        if (w := wrong_defaults(t := p.read_text()) + wrong_prose_defaults(t))
    }
    assert not wrong, wrong


def test_a_wrong_default_in_a_page_is_found() -> None:
    page = (
        "| variable | default | meaning |\n|---|---|---|\n"
        "| `WIRELAB_REST_PORT` | `8000` | right |\n| `WIRELAB_GRPC_PORT` | `50052` | wrong |\n"
        "| `WIRELAB_HOST`, `WIRELAB_METRICS` | `0.0.0.0`, `off` | one of two wrong |\n"
        "| `WIRELAB_RABBITMQ_HOST_PORT`, `WIRELAB_DOWNSTREAM` | empty, empty | one wrong |\n\n"
        "| option | env | default |\n|---|---|---|\n| `--pace` | LOCUST_PACE | 1 |\n\n"
        "| what | where |\n|---|---|\n| broker | `WIRELAB_RABBITMQ_HOST_PORT` 5673 |\n"
        "| UI | `WIRELAB_RABBITMQ_UI_HOST_PORT` 15672 |\n"
    )
    found = [w.split(":")[0] for w in wrong_defaults(page)]
    assert found == [
        "WIRELAB_GRPC_PORT `50052`",
        "WIRELAB_HOST, WIRELAB_METRICS `0.0.0.0`, `off`",
        "WIRELAB_RABBITMQ_HOST_PORT, WIRELAB_DOWNSTREAM empty, empty",
        "LOCUST_PACE 1",
        "WIRELAB_RABBITMQ_HOST_PORT 5673",
    ]


def test_a_wrong_default_in_a_sentence_is_found() -> None:
    page = (
        "# A page\n\nThe budget, `WIRELAB_PAYLOAD_BUDGET_BYTES` (default 1.25 GiB), and\n"
        "`WIRELAB_NODE_WORKERS=N` (default 2). `WIRELAB_FANOUT=parallel` (the default) and\n"
        "`WIRELAB_REST_HTTP=1.1`, the default. `--rounds` (3) names no part here; `--vus` workers\n"
        "(default 64) neither.\n\n"
        "## perf h2\n\nKnobs (flag, `WIRELAB_H2_*` variable): `--rate` (400 calls/s), `--clients`\n"
        "(5 connections), `--metrics` (on), `--blob` (the 8 MiB one).\n\n"
        "## perf openloop\n\n`wirelab perf openloop`: `--vus` workers (default 32, a connection\n"
        "each), `--rates` (default 250,500,1000,1500,2000,3000).\n\n"
        "| `WIRELAB_GRPC_PORT` (1) | in a table |\n"
    )
    said = [(e.env if e else None, v) for e, v, _ in prose_defaults(page)]
    assert said == [
        ("WIRELAB_PAYLOAD_BUDGET_BYTES", "1.25 GiB"),
        ("WIRELAB_NODE_WORKERS", "2"),
        ("WIRELAB_FANOUT", "parallel"),
        ("WIRELAB_REST_HTTP", "1.1"),
        (None, "3"),
        (None, "64"),
        ("WIRELAB_H2_RATE", "400"),
        ("WIRELAB_H2_CLIENTS", "5"),
        ("WIRELAB_H2_METRICS", "on"),
        ("WIRELAB_OPENLOOP_VUS", "32"),
        ("WIRELAB_OPENLOOP_RATES", "250,500,1000,1500,2000,3000"),
    ]
    assert [w.split(":")[0] for w in wrong_prose_defaults(page)] == [
        "WIRELAB_NODE_WORKERS 2",
        "WIRELAB_FANOUT parallel",
        "WIRELAB_H2_CLIENTS 5",
        "WIRELAB_OPENLOOP_VUS 32",
    ]


def test_the_services_fields_are_current() -> None:
    """Settings and Limits (wirelab/knobfields.py) and the runner's Knobs
    (wirelab_bench/runnerfields.py) are generated from the table."""
    assert fieldgen.main(["--check"]) == 0, "python -m wirelab.contract.fieldgen"


def _attribute_reads(folder: str, suffix: str, skip: set[str]) -> str:
    return "\n".join(
        text
        for path, text in CODE.items()
        if path.startswith(folder) and path.endswith(suffix) and path.rsplit("/", 1)[-1] not in skip
    )


PYTHON_CODE = _attribute_reads("services/wirelab/", ".py", {"knobfields.py", "settings.py"})
NODE_CODE = _attribute_reads("node/src/", ".js", {"settings.js"})
NODE_SETTINGS = CODE["node/src/settings.js"]


@pytest.mark.parametrize("knob", SERVICE_KNOBS, ids=lambda k: k.env)
def test_every_service_knob_is_read_by_each_runtime_it_names(knob: Knob) -> None:
    """A services knob is parsed by its table's mechanism; this asks that the code then uses it:
    Python as a Settings or Limits attribute, Node.js as the key settings.js maps it to."""
    if "python" in knob.runtimes:
        assert re.search(rf"\.{knob.name}\b", PYTHON_CODE), f"no Python code reads {knob.name}"
    if "node" in knob.runtimes:
        mapped = re.search(rf"(\w+): k\.{knob.name}\b", NODE_SETTINGS)
        assert mapped, f"node/src/settings.js does not map {knob.name}"
        assert re.search(rf"\b{mapped.group(1)}\b", NODE_CODE), f"Node.js never reads {knob.name}"

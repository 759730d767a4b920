"""Every relative link in the repository's Markdown resolves: the file exists and the heading a
`#anchor` names is on that page, by GitHub's slug of it."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

from tests.config.queries import REPO

# Folders of a copy without git that hold no pages of the lab (gitignored, caches, packages).
NOT_PAGES = {"node_modules", "results", "build"}
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?^ {0,3}\1[`~]*[ \t]*$", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
# An inline link or image `[text](target "title")`, the text possibly over several lines.
INLINE = re.compile(r"\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:[ \t]+(<[^>]*>|\S+)", re.MULTILINE)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]*)\"", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:name|id)=\"([^\"]*)\"", re.IGNORECASE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:, ...
# What a reader of the repository alone cannot look up: the tracker's issues and a spec that is
# not in it. A page states what they said instead.
OUTSIDE = re.compile(r"(?i:\bissue[- ]#?\d+|\bthe issue's\b|\bthe spec\b)|\bSPEC\b")
# A page and heading named in code, as a comment points to where a decision's reasons are.
CODE_TO_PAGE = re.compile(r"\bdocs/([\w-]+\.md)#([\w-]+)")


def pages(*globs: str) -> list[Path]:
    """Every page git tracks (README.md, docs/, any other), or every file matching ``globs``;
    outside a git checkout, those outside hidden and ignored folders."""
    globs = globs or ("*.md",)
    if shutil.which("git") and (REPO / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--", *globs], cwd=REPO, capture_output=True, text=True
        )
        tracked = [REPO / name for name in listed.stdout.split("\0") if name]
        return sorted(p for p in tracked if p.exists())
    found = []
    for glob in globs:
        for page in REPO.rglob(glob):
            folders = page.relative_to(REPO).parts[:-1]
            if not any(f.startswith(".") or f in NOT_PAGES for f in folders):
                found.append(page)
    return sorted(found)


def prose(text: str) -> str:
    """The page without its code blocks, whose `#` lines and `](` are not Markdown."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text lower-cased, punctuation other than `-`
    and `_` dropped, each space a hyphen."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`").strip(), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a page offers: its headings' slugs (a repeat numbered -1, -2, ... as GitHub
    does) and its HTML `name`/`id` anchors."""
    body = prose(text)
    found: set[str] = set(HTML_ANCHOR.findall(body))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(body):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def targets(text: str) -> Iterator[str]:
    """Every link target on a page: inline, reference-style and HTML, outside code."""
    body = CODE_SPAN.sub("", prose(text))
    for pattern in (INLINE, REFERENCE, HTML_LINK):
        for target in pattern.findall(body):
            yield target.strip("<>")


def broken(page: Path) -> Iterator[str]:
    """Each relative link of a page that names a missing file or a heading its page lacks."""
    for target in targets(page.read_text()):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = unquote(target).partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            yield f"{target}: no file {dest.relative_to(REPO)}"
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            yield f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}"


def test_the_slug_is_githubs() -> None:
    page = """# Open-loop load: latency against offered rate (`wirelab-loadgen`)
```sh
# Not a heading
```
## Event loops (`WIRELAB_NODE_WORKERS`)
## The A→B study, [its data](x.md)
## Knobs
### Knobs
<a name="kept"></a>
"""
    assert anchors(page) == {
        "open-loop-load-latency-against-offered-rate-wirelab-loadgen",
        "event-loops-wirelab_node_workers",
        "the-ab-study-its-data",
        "knobs",
        "knobs-1",
        "kept",
    }


def test_the_links_of_a_page_are_found_outside_code() -> None:
    page = """See [the runner
](bench.md#knobs), ![a figure](img/a.png "A") and <a href="lab.md">the lab</a>.
`[not](a-link.md)` and
```
[nor](this.md)
```
[ref]: <studies.md#top>
"""
    assert list(targets(page)) == ["bench.md#knobs", "img/a.png", "studies.md#top", "lab.md"]


def test_every_relative_link_and_anchor_resolves() -> None:
    found = pages()
    assert REPO / "README.md" in found and REPO / "docs" / "bench.md" in found
    links = sum(1 for p in found for t in targets(p.read_text()) if not EXTERNAL.match(t))
    # The pages hold about 190 relative links; far fewer means the parser lost them.
    assert links >= 150, links
    bad = [f"{p.relative_to(REPO)}: {b}" for p in found for b in broken(p)]
    assert not bad, "\n".join(bad)


def test_no_page_cites_what_the_repository_does_not_hold() -> None:
    assert OUTSIDE.search("the observer-effect goal (issue 11)")
    # Lines joined, so a citation wrapped over two lines is found too.
    cited = [
        f"{p.relative_to(REPO)}: ...{m.string[max(m.start() - 40, 0) : m.end() + 40]}..."
        for p in pages()
        for m in OUTSIDE.finditer(" ".join(p.read_text().split()))
    ]
    assert not cited, "\n".join(cited)


def test_no_code_comment_cites_what_the_repository_does_not_hold() -> None:
    """The same for the code, its comments and its scenario and config files: what an issue
    said is stated in place (a figure with the command behind it), never cited."""
    code = pages("*.py", "*.js", "*.go", "*.toml", "*.yaml", "*.yml", "*.sh")
    assert Path(__file__) in code
    cited = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in code
        if p != Path(__file__)
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not cited, "\n".join(cited)


def test_every_heading_the_code_points_to_is_on_its_page() -> None:
    """A comment that leaves a decision's reasons to a page (``docs/services.md#a-flat-queue``)
    names a page and a heading that exist."""
    code = pages("*.py", "*.js", "*.go", "*.toml", "*.yaml", "*.yml", "*.sh")
    named = [
        (f"{p.relative_to(REPO)}:{n}", m.group(1), m.group(2))
        for p in code
        for n, line in enumerate(p.read_text().splitlines(), 1)
        for m in CODE_TO_PAGE.finditer(line)
    ]
    assert len(named) >= 20, named  # far fewer means the pattern lost them
    bad = [
        f"{where}: docs/{page}#{anchor}"
        for where, page, anchor in named
        if not (REPO / "docs" / page).exists()
        or anchor not in anchors((REPO / "docs" / page).read_text())
    ]
    assert not bad, "\n".join(bad)

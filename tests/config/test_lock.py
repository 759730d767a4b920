"""requirements.lock pins every dependency pyproject.toml declares, at a version it accepts."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.config.queries import REPO

LOCK = REPO / "requirements.lock"


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    texts = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        texts.extend(extra)
    return [r for r in map(Requirement, texts) if canonicalize_name(r.name) != "wirelab"]


def pinned(text: str) -> dict[str, str]:
    pins = re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+)", text, re.MULTILINE)
    return {canonicalize_name(name): version for name, version in pins}


def test_every_declared_dependency_is_pinned_within_its_range() -> None:
    pins = pinned(LOCK.read_text())
    wrong = [
        f"{r} (lock: {pins.get(canonicalize_name(r.name), 'missing')})"
        for r in declared()
        if canonicalize_name(r.name) not in pins
        or not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    ]
    assert not wrong, f"requirements.lock is stale, run `make lock`: {wrong}"


def test_lock_is_repeatable() -> None:
    # Without a cut-off date the same command pins whatever is newest on the day it runs.
    header = LOCK.read_text().splitlines()[1]
    assert "--exclude-newer" in header and "--all-extras" in header


def test_pinned_reads_only_pins() -> None:
    text = "# via x\nfoo-bar==1.2\n    # via y\nBaz==3!4.0\n"
    assert pinned(text) == {"foo-bar": "1.2", "baz": "3!4.0"}

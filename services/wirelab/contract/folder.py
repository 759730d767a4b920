"""Where the contract's data lives: the repository's top-level ``contract/`` folder, which every
runtime reads (Node.js and wirelab-loadgen from the checkout too)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# An image installs the package from a wheel, so it copies contract/ into the package as data/
# before building it (services/Dockerfile, locust/Dockerfile, notebooks/Dockerfile); a checkout,
# installed editable or not at all, reads the folder in place.
_PACKAGED = Path(__file__).with_name("data")
FOLDER: Path = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[3] / "contract"


def read(name: str) -> Any:
    """One of the contract's JSON files, parsed."""
    return json.loads((FOLDER / name).read_text(encoding="utf-8"))


def write_or_check(path: Path, text: str, argv: list[str], command: str) -> int:
    """A file generated from the contract: written, or with ``--check`` in ``argv`` compared
    (exit 1, naming ``command`` that regenerates it, when it is missing or stale)."""
    if argv == ["--check"]:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is stale: {command}", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0

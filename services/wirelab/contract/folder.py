"""Where the contract's data lives: the repository's top-level ``contract/`` folder, which every
runtime reads (Node.js and wirelab-loadgen from the checkout too)."""

from __future__ import annotations

import json
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

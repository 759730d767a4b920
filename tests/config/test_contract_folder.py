"""The contract's data lives once, in the top-level contract/ folder: every image that installs
the Python package copies it into the package (wirelab/contract/folder.py reads it there), and the
Node.js image copies it where src/paths.js looks."""

from __future__ import annotations

from pathlib import Path

import pytest
from wirelab.contract.folder import FOLDER

REPO = Path(__file__).resolve().parents[2]
COPY_INTO_PACKAGE = "contract ./services/wirelab/contract/data"
PYTHON_IMAGES = ["services/Dockerfile", "locust/Dockerfile", "notebooks/Dockerfile"]


def test_a_checkout_reads_the_top_level_folder() -> None:
    assert FOLDER.resolve() == REPO / "contract"
    assert not (REPO / "services/wirelab/contract/data").exists()


@pytest.mark.parametrize("dockerfile", PYTHON_IMAGES)
def test_each_python_image_copies_the_contract_into_the_package(dockerfile: str) -> None:
    text = (REPO / dockerfile).read_text()
    copies = [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("COPY ")]
    assert COPY_INTO_PACKAGE in [c.replace(" services/", " ./services/") for c in copies]
    # Before the wheel is built from the copied sources.
    install = text.index("--force-reinstall")
    assert text.index("COPY contract") < install


def test_the_node_image_copies_the_contract_where_paths_js_reads_it() -> None:
    text = (REPO / "node/Dockerfile").read_text()
    assert "COPY contract/metrics.json contract/knobs.json /app/contract/" in text
    assert "path.join(ROOT, 'contract', 'metrics.json')" in (REPO / "node/src/paths.js").read_text()

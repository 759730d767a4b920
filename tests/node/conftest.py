"""The Node.js runtime's tests: where it lives, and the node binary they need (CI must have it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parents[2] / "node"
NODE = shutil.which("node")


def node_binary() -> str:
    """The node binary with the project's packages installed, else skip (fail in CI)."""
    if NODE is None:
        if os.environ.get("CI"):
            pytest.fail("node is not installed, and CI must run the Node.js runtime's tests")
        pytest.skip("node is not installed: the Node.js runtime's tests need Node.js 20+")
    assert (NODE_DIR / "node_modules").is_dir(), f"run `npm ci` in {NODE_DIR} (tests/run does)"
    return NODE


@pytest.fixture(scope="module")
def node() -> str:
    return node_binary()

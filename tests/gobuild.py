"""The stand-ins' binaries at compose.yaml's pinned releases, built once by offline/go-build."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def go_build(component: str) -> Path:
    """The folder holding ``component``'s binaries (offline/go-build; cached per version)."""
    if shutil.which("go") is None:
        pytest.fail(f"Go is needed to build {component} (apt-get install -y golang-go)")
    done = subprocess.run(
        [str(REPO / "offline" / "go-build"), component],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())

"""The generated stubs are current: regenerating them as `make proto` does changes nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "services" / "wirelab" / "v1"


def _make_proto_command(out: Path) -> list[str]:
    """The Makefile's protoc line with the output folder swapped, so the two cannot drift."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^proto:\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "Makefile has no proto target"
    words = recipe.group(1).replace("\\\n", " ").split()
    assert words[:3] == ["$(PYTHON)", "-m", "grpc_tools.protoc"], words
    return [sys.executable, *(w.replace("=services", f"={out}") for w in words[1:])]


def test_stubs_match_a_fresh_generation(tmp_path: Path) -> None:
    if shutil.which("protoc-gen-mypy_grpc") is None:
        pytest.skip("protoc-gen-mypy_grpc (mypy-protobuf, a dev extra) is not installed")
    subprocess.run(_make_proto_command(tmp_path), cwd=ROOT, check=True)
    fresh = {
        p.relative_to(tmp_path / "wirelab" / "v1"): p
        for p in (tmp_path / "wirelab" / "v1").iterdir()
    }
    assert fresh, "protoc generated nothing"
    for name, path in fresh.items():
        committed = GENERATED / name
        assert committed.exists(), f"{name} is generated but not committed; run `make proto`"
        assert committed.read_bytes() == path.read_bytes(), f"{name} is stale; run `make proto`"

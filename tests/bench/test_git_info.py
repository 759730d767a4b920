"""The manifest's git section outside a checkout (an image without the repository's .git): the
commit WIRELAB_GIT_SHA names (its "-dirty" suffix the dirty flag), read through the knob table,
else null."""

from __future__ import annotations

from pathlib import Path

import pytest
from wirelab_bench.environment import git_info


def test_outside_a_checkout_the_commit_is_the_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No repository above tmp_path either.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.setenv("WIRELAB_GIT_SHA", "0123abcd")
    found = git_info(tmp_path)
    assert (found["sha"], found["dirty"]) == ("0123abcd", False) and found["reason"]
    monkeypatch.setenv("WIRELAB_GIT_SHA", "0123abcd-dirty")  # as offline/bench-in-lab says it
    assert (git_info(tmp_path)["sha"], git_info(tmp_path)["dirty"]) == ("0123abcd", True)
    monkeypatch.setenv("WIRELAB_GIT_SHA", "")
    assert git_info(tmp_path)["sha"] is None
    monkeypatch.delenv("WIRELAB_GIT_SHA")
    assert git_info(tmp_path)["sha"] is None

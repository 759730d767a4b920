"""make swarm and make swarm-down never leave a swarm under a running compose lab's feet."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.config.queries import REPO

# `docker ps -q` lists three containers; `inspect` answers as its template would: a compose
# service on its project's network, a container on the default bridge only, and a stack's task
# (the template prints nothing for a container carrying a stack namespace).
FAKE_DOCKER = """#!/usr/bin/env bash
case "$1" in
    ps) printf 'c1\\nc2\\nc3\\n' ;;
    inspect)
        case "${@: -1}" in
            c1) echo "/wirelab-rest-1 wirelab_default" ;;
            c2) echo "/plain bridge" ;;
            c3) echo "" ;;
        esac ;;
esac
"""


def test_the_containers_a_swarm_leave_would_take_names_from(tmp_path: Path) -> None:
    fake = tmp_path / "docker"
    fake.write_text(FAKE_DOCKER)
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    script = f"source {REPO / 'swarm' / 'resolvable'}; resolvable_containers"
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.split() == ["wirelab-rest-1"]


def test_up_checks_before_it_initialises_and_down_before_it_leaves() -> None:
    up = (REPO / "swarm" / "up").read_text()
    assert up.index("resolvable_containers") < up.index("    docker swarm init")
    down = (REPO / "swarm" / "down").read_text()
    assert down.index("resolvable_containers") < down.index("    docker swarm leave")

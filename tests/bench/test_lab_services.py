"""The runner tests' service processes (tests/bench/lab.py): started on ports of their own."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.bench import lab

pytestmark = pytest.mark.integration


def test_a_service_whose_port_was_taken_is_started_again_on_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A port chosen free and taken before the service binds it (by a parallel test's process,
    as in a CI run): the service exits, and both start again on other ports instead of the
    tests talking to whatever holds the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        chosen: list[list[int]] = []

        def ports(n: int) -> list[int]:
            picked = free(n)
            if not chosen:
                picked[0] = taken.getsockname()[1]  # REST's port
            chosen.append(picked)
            return picked

        free = lab.free_ports
        monkeypatch.setattr(lab, "free_ports", ports)
        with lab.running_services(tmp_path) as services:
            assert len(chosen) == 2
            assert services.rest_url == f"http://127.0.0.1:{chosen[1][0]}"
            assert all(p.poll() is None for p in services.procs.values())

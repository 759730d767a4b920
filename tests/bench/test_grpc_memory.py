"""The memory benchmark runs end to end on small payloads and prints every cell, the lab's
bursts on both runtimes too."""

from __future__ import annotations

import pytest
from wirelab_perf import bursts, grpc_memory

from tests.node.conftest import node_binary

pytestmark = pytest.mark.integration


def test_prints_every_path_and_burst(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--size-mib", "2", "--modes", "aio", "--burst", "3", "--burst-mib", "2"]
    assert grpc_memory.main(argv) == 0
    out = capsys.readouterr().out
    for path in grpc_memory.PATHS:
        assert path in out
    # The burst budget has room for one 2 MiB call charged at its peak: 4 x 2 MiB + 0.5 MiB.
    assert "upload, 8 MiB" in out and "download, off" in out
    # With admission off nothing is refused; each burst row ends with its refusal count.
    off_rows = [line for line in out.splitlines() if ", off" in line]
    assert len(off_rows) == 2 and all(line.rstrip().endswith(" 0") for line in off_rows)


def test_the_lab_bursts_every_path_on_both_runtimes(capsys: pytest.CaptureFixture[str]) -> None:
    node = node_binary()
    argv = ["--size-mib", "0", "--burst", "0", "--bursts", "3", "--bursts-mib", "1"]
    assert grpc_memory.main([*argv, "--node", node]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(bursts.RUNTIMES)]
    # One row per runtime, protocol and path, each cell every call served (1 MiB fits the budget).
    assert len(rows) == len(bursts.RUNTIMES) * len(bursts.PROTOCOLS) * len(bursts.PATHS), out
    for runtime, protocol, kind in bursts.cells(
        bursts.RUNTIMES, bursts.PROTOCOLS, list(bursts.PATHS)
    ):
        label = f"{runtime} {protocol} {bursts.PATHS[kind][protocol]} "
        row = next(r for r in rows if r.startswith(label))
        assert row.rstrip().endswith("3 / 0"), row

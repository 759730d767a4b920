"""The gRPC memory benchmark runs end to end on small payloads and prints every cell."""

from __future__ import annotations

import pytest
from wirelab_bench.perf import grpc_memory

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

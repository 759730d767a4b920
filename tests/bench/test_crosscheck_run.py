"""`wirelab perf crosscheck` briefly over real service processes: every generator runs every
kind on both protocols, and the file it writes gives the report a verdict per kind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from wirelab_bench import independence
from wirelab_perf import crosscheck

pytestmark = pytest.mark.integration


def require(*tools: str) -> None:
    """Skip without the reference tools (`make tools` builds ghz, Debian packages wrk); CI's
    tests/run installs both, so there the test fails instead."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        why = f"no {', '.join(missing)}: make tools (ghz), apt-get install wrk"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def test_each_kind_is_measured_by_each_generator_on_both_protocols(tmp_path: Path) -> None:
    ghz = shutil.which("ghz") or str(Path.home() / "go" / "bin" / "ghz")
    require(ghz, "wrk")
    out = tmp_path / independence.FILE
    argv = ["--ghz", ghz, "--kinds", "unary,upload_chunked", "--generators", "ghz+wrk,locust"]
    argv += ["--rounds", "1", "--seconds", "1", "--out", str(out)]
    assert crosscheck.main(argv) == 0
    meta, rows = independence.read(out)
    assert meta["generators"] == ["ghz+wrk", "locust"] and meta["git"]["sha"]
    measured = {(r.kind, r.generator, r.protocol) for r in rows}
    assert measured == {
        (k, g, p)
        for k in ("unary", "upload_chunked")
        for g in ("ghz+wrk", "locust")
        for p in ("grpc", "rest")
    }
    # wrk's chunked body and ghz's client stream were answered as Locust's calls are.
    assert all(r.failed == 0 and r.ok_per_s > 0 and r.p50_ms > 0 for r in rows), rows
    assert set(independence.verdicts(rows)) == {"unary", "upload_chunked"}

"""vegeta: the small order POSTed at a fixed rate (open loop), counted and timed like loadtools'."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from wirelab_perf import ORDER
from wirelab_perf.loadtools import Load, _run

INSTALL = "go install github.com/tsenart/vegeta/v12@v12.13.0"


def find_vegeta(given: str) -> str:
    found = given or shutil.which("vegeta") or str(Path.home() / "go" / "bin" / "vegeta")
    if not os.access(found, os.X_OK):
        sys.exit(f"vegeta not found: {INSTALL} (or pass --vegeta)")
    return found


def parse_vegeta(report: dict[str, Any], seconds: float) -> Load:
    """``vegeta report -type=json``: answers by HTTP status, failures without one under "0"
    (vegeta's code for a call that got no answer), latency in nanoseconds."""
    codes = Counter({str(k): int(v) for k, v in (report.get("status_codes") or {}).items()})
    latency = report.get("latencies") or {}
    p50, p99 = (latency.get(key, float("nan")) / 1e6 for key in ("50th", "99th"))
    return Load(seconds, codes, p50, p99)


def vegeta(binary: str, url: str, rate: int, seconds: int, timeout_s: int = 10) -> Load:
    """POST the order to ``url``/v1/orders at ``rate`` calls a second for ``seconds``: each call
    starts on its own schedule, whether or not earlier ones have been answered (vegeta adds
    workers as needed), so a slow answer delays no later call."""
    with tempfile.TemporaryDirectory() as tmp:
        body, out = Path(tmp) / "order.json", Path(tmp) / "results.bin"
        body.write_text(json.dumps(ORDER))
        targets = Path(tmp) / "targets"
        targets.write_text(f"POST {url}/v1/orders\n")
        _run([
            binary, "attack", f"-rate={rate}/s", f"-duration={seconds}s", f"-timeout={timeout_s}s",
            f"-targets={targets}", f"-body={body}", "-header=Content-Type: application/json",
            f"-output={out}",
        ])  # fmt: skip
        report = json.loads(_run([binary, "report", "-type=json", str(out)]))
    return parse_vegeta(report, seconds)

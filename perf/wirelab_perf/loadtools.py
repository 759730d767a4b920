"""wrk and ghz runs of the small order call that count every answer by status, errors included."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wirelab_bench.knobs import REPO

from wirelab_perf import ORDER
from wirelab_perf.svcprocs import CLIENT_CPU, pinned

WRK_SCRIPT = Path(__file__).with_name("wrk_paced.lua")
PROTO = REPO / "proto" / "wirelab" / "v1" / "wirelab.proto"
OK = frozenset({"200", "OK"})


@dataclass(frozen=True)
class Load:
    """One run of a load tool: answers by status ("200", "503", "OK", "ResourceExhausted") and
    failures without one ("socket timeout", or ghz's error text), and the tool's latency."""

    seconds: float
    codes: Counter[str]
    p50_ms: float
    p99_ms: float

    @property
    def ok(self) -> int:
        return sum(n for code, n in self.codes.items() if code in OK)

    @property
    def errors(self) -> Counter[str]:
        return Counter({code: n for code, n in self.codes.items() if code not in OK})

    @property
    def ok_per_second(self) -> float:
        return self.ok / self.seconds


def _run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    # taskset, not a preexec_fn (svcprocs.pinned): a fork while the probe's gRPC channel had
    # threads running broke the child (ghz exited with grpc's "epoll_wait error: Bad file
    # descriptor" from the forked copy of this process).
    done = subprocess.run(pinned(cmd, CLIENT_CPU), capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if match is None:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(match.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[match.group(2)]


def parse_wrk(out: str, seconds: float) -> Load:
    """wrk's report with ``--latency`` and the status lines of wrk_paced.lua."""
    codes: Counter[str] = Counter()
    for status, n in re.findall(r"^status (\d+) (\d+)$", out, re.M):
        codes[status] += int(n)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if errors:
        for kind, n in zip(("connect", "read", "write", "timeout"), errors.groups(), strict=True):
            if int(n):
                codes[f"socket {kind}"] += int(n)
    # wrk pads a one-letter unit with a space ("1.37s "), two-letter ones not ("152.54ms").
    latency = {p: _ms(v) for p, v in re.findall(r"^\s+(50|99)%\s+(\S+) ?$", out, re.M)}
    return Load(seconds, codes, latency.get("50", float("nan")), latency.get("99", float("nan")))


def wrk(
    url: str, connections: int, seconds: int, pause_ms: float = 0.0, timeout_s: int = 10
) -> Load:
    """``connections`` keep-alive connections POSTing the order to ``url``/v1/orders, each
    pausing ``pause_ms`` after every answer."""
    # wrk inherits this environment plus its script's variables (declared in the knob table).
    env = {
        **os.environ,
        "WIRELAB_WRK_BODY": json.dumps(ORDER),
        "WIRELAB_WRK_DELAY_MS": f"{pause_ms:.0f}",
    }
    cmd = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", f"--timeout={timeout_s}s"]
    cmd += ["--latency", "-s", str(WRK_SCRIPT), f"{url}/v1/orders"]
    return parse_wrk(_run(cmd, env), seconds)


def parse_ghz(report: dict[str, Any], seconds: float) -> Load:
    """ghz's JSON report: every call counted under its gRPC status name, errors included."""
    codes = Counter({str(k): int(v) for k, v in report.get("statusCodeDistribution", {}).items()})
    latency = {d["percentage"]: d["latency"] / 1e6 for d in report.get("latencyDistribution") or []}
    return Load(seconds, codes, latency.get(50, float("nan")), latency.get(99, float("nan")))


def ghz(
    binary: str,
    target: str,
    concurrency: int,
    seconds: int,
    rps: float = 0.0,
    timeout_s: int = 10,
) -> Load:
    """ProcessOrder with the order from ``concurrency`` workers, at most ``rps`` calls/s (0: as
    fast as answered). Calls in flight when the time is up are waited for, not cut: ghz's
    default would count every one of them as an error of the run."""
    cmd = [binary, "--insecure", "--proto", str(PROTO), "--import-paths", str(PROTO.parents[2])]
    cmd += ["--call", "wirelab.v1.WireLab.ProcessOrder", "-d", json.dumps(ORDER)]
    cmd += ["-c", str(concurrency), "--connections", str(min(concurrency, 8))]
    cmd += ["-z", f"{seconds}s", "--duration-stop", "wait", "-t", f"{timeout_s}s"]
    cmd += ["--rps", f"{rps:.0f}"] if rps > 0 else []
    cmd += ["-O", "json", target]
    return parse_ghz(json.loads(_run(cmd)), seconds)

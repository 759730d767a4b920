"""h2load (nghttp2): one load tool for HTTP/1.1, h2c and gRPC calls at a fixed rate per client."""

from __future__ import annotations

import re
import shutil
import statistics
import struct
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from wirelab.v1 import wirelab_pb2 as pb

from wirelab_perf.loadtools import Load, _run

INSTALL = "apt-get install -y nghttp2-client"
GRPC_PATH = "/wirelab.v1.WireLab/ProcessOrder"
# What a gRPC client sends with each call (h2load sends its body as it is).
GRPC = ("content-type: application/grpc", "te: trailers")


def find_h2load(given: str) -> str:
    found = given or shutil.which("h2load")
    if not found:
        sys.exit(f"h2load not found: {INSTALL} (or pass --h2load)")
    return found


def protobuf_body(order: dict[str, Any]) -> bytes:
    return json_format.ParseDict(order, pb.OrderRequest()).SerializeToString()


def grpc_body(order: dict[str, Any]) -> bytes:
    """One gRPC message on the wire: uncompressed flag, big-endian length, the OrderRequest."""
    message = protobuf_body(order)
    return struct.pack(">BI", 0, len(message)) + message


@dataclass(frozen=True)
class Call:
    """What h2load sends: a POST of ``body`` to ``path`` with ``headers``, over HTTP/1.1 (no
    pipelining: one call at a time per connection) or h2c with prior knowledge."""

    path: str
    body: bytes
    headers: tuple[str, ...]
    http1: bool = False


def parse_log(text: str) -> tuple[Counter[str], list[float]]:
    """h2load's ``--log-file``: one line per finished call, tab-separated start time (us since
    the epoch), HTTP status (-1: the call failed without one) and microseconds to the end of
    the response. Returns the calls by status and their latencies in ms."""
    codes: Counter[str] = Counter()
    latencies: list[float] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        _, status, micros = line.split("\t")
        codes["no answer" if status == "-1" else status] += 1
        latencies.append(int(micros) / 1000)
    return codes, latencies


def failed(out: str) -> int:
    """The calls h2load's summary counts as failed: every call that did not end in a 2xx or 3xx
    (those it errored or timed out on among them), including any the log file lacks."""
    found = re.search(r"^requests: .* (\d+) failed, \d+ errored, \d+ timeout$", out, re.M)
    if found is None:
        raise ValueError(f"no requests line in h2load's output:\n{out[-1000:]}")
    return int(found.group(1))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation; NaN without values."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[round(q * 1000) - 1]


def h2load(
    binary: str, url: str, call: Call, rate: int, clients: int, streams: int, seconds: int
) -> Load:
    """``clients`` connections, each starting ``rate // clients`` calls a second for ``seconds``
    (h2load's --rps ticks), at most ``streams`` in flight on each (1 over HTTP/1.1)."""
    with tempfile.TemporaryDirectory() as tmp:
        body, log = Path(tmp) / "body", Path(tmp) / "log.tsv"
        body.write_bytes(call.body)
        cmd = [binary, "-c", str(clients), "-m", "1" if call.http1 else str(streams)]
        cmd += ["--rps", str(max(1, rate // clients)), "-D", str(seconds), "-d", str(body)]
        cmd += ["--log-file", str(log), *(f"-H{h}" for h in call.headers)]
        cmd += ["--h1"] if call.http1 else []
        out = _run([*cmd, url + call.path])
        codes, latencies = parse_log(log.read_text())
    # Failures the log does not list (no line, not even status -1) are counted apart.
    answered_badly = sum(n for code, n in codes.items() if not code.startswith(("2", "3")))
    unlisted = failed(out) - answered_badly
    if unlisted > 0:
        codes["failed"] += unlisted
    return Load(float(seconds), codes, percentile(latencies, 0.50), percentile(latencies, 0.99))

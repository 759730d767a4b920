"""What the reference tools send for each kind: ghz's gRPC calls, wrk's and vegeta's REST ones."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wirelab_locust.content import chunks, order_request, payload

from wirelab_perf.loadtools import PROTO, WRK_SCRIPT, Load, _run, parse_ghz, parse_wrk
from wirelab_perf.vegeta import parse_vegeta

# The one small order, as Locust's lab users send it (wirelab-loadgen sends it too).
BODY = order_request()
OCTETS = "application/octet-stream"


@dataclass(frozen=True)
class Shape:
    """What each call of a kind carries: Locust's defaults (stream_count, stream_size) unless
    the command says otherwise."""

    payload_bytes: int = 65536
    chunk_bytes: int = 16384
    stream_count: int = 10
    stream_size: int = 64


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def ghz_call(kind: str, shape: Shape) -> tuple[str, Any]:
    """The gRPC method and its message(s) as ghz's JSON (bytes as base64; a client stream is a
    list of messages)."""
    size = shape.payload_bytes
    stream = {"count": shape.stream_count, "size": shape.stream_size}
    return {
        "unary": ("ProcessOrder", BODY),
        "server_stream": ("StreamMessages", stream),
        "upload": ("Upload", {"data": _b64(payload(size))}),
        "upload_chunked": (
            "UploadStream", [{"data": _b64(c)} for c in chunks(size, shape.chunk_bytes)]
        ),
        "download": ("Download", {"size": size}),
        "download_chunked": ("DownloadStream", {"size": size, "chunk_size": shape.chunk_bytes}),
    }[kind]  # fmt: skip


def rest_call(kind: str, shape: Shape) -> tuple[str, str, bytes, str]:
    """The REST call of a kind: method, path and query, body, content type."""
    size, step = shape.payload_bytes, shape.chunk_bytes
    stream = f"/v1/stream?count={shape.stream_count}&size={shape.stream_size}&interval_ms=0"
    return {
        "unary": ("POST", "/v1/orders", json.dumps(BODY).encode(), "application/json"),
        "server_stream": ("GET", stream, b"", ""),
        "upload": ("POST", "/v1/blobs", payload(size), OCTETS),
        "upload_chunked": ("POST", "/v1/blobs/stream", payload(size), OCTETS),
        "download": ("GET", f"/v1/blobs?size={size}", b"", ""),
        "download_chunked": ("GET", f"/v1/blobs/stream?size={size}&chunk_size={step}", b"", ""),
    }[kind]


def ghz(
    binary: str, target: str, kind: str, shape: Shape, conns: int, seconds: int, rate: float
) -> Load:
    """``conns`` workers over as many connections, each calling as soon as its last call is
    answered (closed loop), or at ``rate`` calls/s in all when it is above 0."""
    method, data = ghz_call(kind, shape)
    with tempfile.TemporaryDirectory() as tmp:
        body = Path(tmp) / "data.json"
        body.write_text(json.dumps(data))
        cmd = [binary, "--insecure", "--proto", str(PROTO), "--import-paths", str(PROTO.parents[2])]
        cmd += ["--call", f"wirelab.v1.WireLab.{method}", "-D", str(body)]
        cmd += ["-c", str(conns), "--connections", str(conns), "-z", f"{seconds}s"]
        cmd += ["--duration-stop", "wait", "-t", "10s", "-O", "json"]
        cmd += ["--rps", f"{rate:.0f}"] if rate > 0 else []
        return parse_ghz(json.loads(_run([*cmd, target])), seconds)


def wrk(url: str, kind: str, shape: Shape, conns: int, seconds: int, rate: float) -> Load:
    """``conns`` keep-alive connections, each calling as soon as its last call is answered, or
    pausing so that the calls add up to about ``rate`` a second (Debian's wrk has no rate option).
    upload_chunked's body goes with Transfer-Encoding: chunked, one HTTP chunk per chunk_bytes."""
    method, path, body, ctype = rest_call(kind, shape)
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "body"
        file.write_bytes(body)
        # wrk inherits this environment plus its script's variables (declared in the knob table).
        env = {
            **os.environ,
            "WIRELAB_WRK_METHOD": method,
            "WIRELAB_WRK_BODY_FILE": str(file) if body else "",
            "WIRELAB_WRK_CONTENT_TYPE": ctype,
            "WIRELAB_WRK_CHUNK_BYTES": str(shape.chunk_bytes if kind == "upload_chunked" else 0),
            "WIRELAB_WRK_DELAY_MS": f"{conns * 1000 / rate:.0f}" if rate > 0 else "0",
        }
        cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout=10s", "--latency"]
        return parse_wrk(_run([*cmd, "-s", str(WRK_SCRIPT), url + path], env), seconds)


def vegeta(
    binary: str, url: str, kind: str, shape: Shape, conns: int, seconds: int, rate: float
) -> Load | None:
    """vegeta at ``rate`` calls/s, or with ``conns`` workers calling back to back (-rate=0);
    None for upload_chunked, whose chunked body vegeta cannot send."""
    if kind == "upload_chunked":
        return None
    method, path, body, ctype = rest_call(kind, shape)
    with tempfile.TemporaryDirectory() as tmp:
        file, out, targets = Path(tmp) / "body", Path(tmp) / "results.bin", Path(tmp) / "targets"
        file.write_bytes(body)
        lines = [f"{method} {url}{path}"] + ([f"Content-Type: {ctype}"] if ctype else [])
        lines += [f"@{file}"] if body else []
        targets.write_text("\n".join(lines) + "\n")
        pace = [f"-rate={rate:.0f}/s"] if rate > 0 else ["-rate=0", f"-max-workers={conns}"]
        _run([
            binary, "attack", *pace, f"-workers={conns}", f"-duration={seconds}s",
            "-timeout=10s", f"-targets={targets}", f"-output={out}",
        ])  # fmt: skip
        return parse_vegeta(json.loads(_run([binary, "report", "-type=json", str(out)])), seconds)

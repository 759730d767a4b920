"""The bench image's Go (locust/Dockerfile, stage loadgen): loadgen/toolchain.py fetches the
pinned release from a Go module proxy, refuses a zip whose SHA-256 is not the pinned one, and
keeps the files' modes; the pinned release builds what loadgen/go.mod asks for."""

from __future__ import annotations

import hashlib
import io
import re
import runpy
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.config.queries import REPO

VERSION = "v0.0.1-go1.99.0.linux-amd64"
TOOLCHAIN = runpy.run_path(str(REPO / "loadgen" / "toolchain.py"))


def _zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        prefix = f"golang.org/toolchain@{VERSION}/"
        for name, mode, text in (("bin/go", 0o755, "#!/bin/sh\n"), ("VERSION", 0o644, "go1.99.0")):
            entry = zipfile.ZipInfo(prefix + name)
            entry.external_attr = (0o100000 | mode) << 16
            archive.writestr(entry, text)
    return out.getvalue()


@pytest.fixture
def proxy() -> Iterator[tuple[str, bytes, list[str]]]:
    """A Go module proxy on loopback serving one toolchain zip; the paths it was asked for."""
    body, asked = _zip(), []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            found = self.path == f"/golang.org/toolchain/@v/{VERSION}.zip"
            self.send_response(200 if found else 404)
            self.end_headers()
            self.wfile.write(body if found else b"not found")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", body, asked
    finally:
        server.shutdown()


def test_the_pinned_zip_is_unpacked_with_its_modes(
    proxy: tuple[str, bytes, list[str]], tmp_path: Path
) -> None:
    url, body, asked = proxy
    root = TOOLCHAIN["fetch"](VERSION, hashlib.sha256(body).hexdigest(), tmp_path / "go", url)
    assert asked == [f"/golang.org/toolchain/@v/{VERSION}.zip"]
    assert (root / "bin" / "go").stat().st_mode & 0o777 == 0o755
    assert (root / "VERSION").read_text() == "go1.99.0"
    assert (root / "VERSION").stat().st_mode & 0o777 == 0o644


def test_a_zip_with_another_sha256_is_refused_and_nothing_unpacked(
    proxy: tuple[str, bytes, list[str]], tmp_path: Path
) -> None:
    url, _, _ = proxy
    with pytest.raises(SystemExit, match="not the pinned 0000"):
        TOOLCHAIN["fetch"](VERSION, "0" * 64, tmp_path / "go", url)
    assert not (tmp_path / "go").exists()


def test_the_dockerfiles_go_builds_what_go_mod_asks_for() -> None:
    dockerfile = (REPO / "locust" / "Dockerfile").read_text()
    pinned = re.search(r"^ARG GO_TOOLCHAIN=v0\.0\.1-go([\d.]+)\.linux-amd64$", dockerfile, re.M)
    wanted = re.search(r"^go ([\d.]+)$", (REPO / "loadgen" / "go.mod").read_text(), re.M)
    assert pinned and wanted
    assert re.search(r"^ARG GO_TOOLCHAIN_SHA256=[0-9a-f]{64}$", dockerfile, re.M)

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split("."))

    assert version(pinned.group(1)) >= version(wanted.group(1))

"""Fetch a Go toolchain from the Go module proxy into a folder, for building wirelab-loadgen in an
image (locust/Dockerfile, stage loadgen) where no registry holds a Go image.

`go` itself fetches toolchains this way (GOTOOLCHAIN): each release is the module
golang.org/toolchain at v0.0.1-go<version>.<os>-<arch>. The zip is checked against the SHA-256 the
Dockerfile pins (that of the zip `go mod download` verified against sum.golang.org), and unpacked
with its files' modes, which Python's zipfile.extractall drops.

    python3 toolchain.py <version, e.g. v0.0.1-go1.26.8.linux-amd64> <sha256> <folder>

The proxy is the first of $GOPROXY's entries (https://proxy.golang.org when unset).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import urllib.request
import zipfile
from pathlib import Path

MODULE = "golang.org/toolchain"


def fetch(version: str, sha256: str, into: Path, proxy: str) -> Path:
    """Download, check and unpack ``version`` into ``into``; the toolchain's GOROOT."""
    url = f"{proxy.rstrip('/')}/{MODULE}/@v/{version}.zip"
    with urllib.request.urlopen(url, timeout=600) as response:
        data = response.read()
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise SystemExit(f"toolchain: {url} has SHA-256 {got}, not the pinned {sha256}")
    prefix = f"{MODULE}@{version}/"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for entry in archive.infolist():
            if not entry.filename.startswith(prefix) or entry.is_dir():
                continue
            path = into / entry.filename.removeprefix(prefix)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(archive.read(entry))
            path.chmod((entry.external_attr >> 16) & 0o777 or 0o644)
    return into


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    # Go's own variable, read as the go command reads it; not a knob of the lab.
    proxy = (os.environ.get("GOPROXY") or "https://proxy.golang.org").split(",")[0]
    if proxy in ("direct", "off"):
        print(f"toolchain: GOPROXY={proxy!r} names no proxy to fetch from", file=sys.stderr)
        return 2
    root = fetch(argv[0], argv[1], Path(argv[2]), proxy)
    print(f"toolchain: {argv[0]} in {root}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The REST user's HTTP/2 transport (--rest-http h2c): httpx with h2, read like geventhttpclient.

Kept apart from the users so that tests import it without Locust (whose import patches the
process with gevent).
"""

from __future__ import annotations

import socket

import httpx
from wirelab.contract import CLIENT_IDLE_SECONDS


class H2Response:
    """An httpx response streamed over HTTP/2, read as the user reads geventhttpclient's:
    ``read(n)``, ``readline(sep)``, ``get(header)`` and ``status_code``."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status_code = response.status_code
        self._pieces = response.iter_raw()
        self._buffer = bytearray()

    def _more(self) -> bool:
        piece = next(self._pieces, b"")
        self._buffer += piece
        return bool(piece)

    def _take(self, n: int) -> bytes:
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out

    def read(self, n: int) -> bytes:
        while len(self._buffer) < n and self._more():
            pass
        return self._take(n)

    def readline(self, sep: bytes = b"\n") -> bytes:
        while (at := self._buffer.find(sep)) < 0 and self._more():
            pass
        return self._take(len(self._buffer) if at < 0 else at + len(sep))

    def get(self, name: str, default: str | None = None) -> str | None:
        value: str | None = self.response.headers.get(name, default)
        return value


def h2c_client(base_url: str, timeout: float) -> httpx.Client:
    """One HTTP/2 connection (h2c, prior knowledge: no Upgrade round trip) per user, as each
    gRPC user has one channel. TCP_NODELAY as on the 1.1 path: h2 writes a request's HEADERS and
    DATA frames separately, and a small DATA frame would otherwise wait on the delayed ACK. An
    idle connection is closed before the server would close it, as on the 1.1 path
    (wirelab.contract.CLIENT_IDLE_SECONDS; httpx's own expiry is the servers' 5 s)."""
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    limits = httpx.Limits(keepalive_expiry=CLIENT_IDLE_SECONDS)
    transport = httpx.HTTPTransport(http1=False, http2=True, socket_options=nodelay, limits=limits)
    return httpx.Client(transport=transport, base_url=base_url, timeout=timeout)

"""uvicorn's httptools protocol with the bounds it lacks: header size, header and body read time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

# Set in the request's scope when the body read timed out, so the metrics middleware records the
# cut-off call as a timeout (408) rather than as a client that went away.
BODY_TIMED_OUT = "wirelab.body_timed_out"

_IDLE, _HEADERS, _BODY = 0, 1, 2


@dataclass(frozen=True)
class Bounds:
    """What a connection may take: header bytes, and seconds for headers and between body bytes
    (0 turns a bound off)."""

    max_header_bytes: int = 64 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0


def _answer(status: bytes, reason: str) -> bytes:
    body = reason.encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"connection: close\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn (0.54) reads request headers of any size for as long as they take, and waits for a
    body forever: a 128 MiB header was accepted after 23.6 s while other calls waited up to 8 s,
    3,000 connections with unfinished headers were all held, and a half-sent body was held
    forever. Here headers past ``max_header_bytes`` are answered 431, headers not complete within
    ``header_timeout`` 408, and a body with no new bytes for ``body_timeout`` (while the app waits
    for them) cuts the call off, recorded as a timeout. One watchdog timer per connection, re-armed
    only when it fires, so a call costs a few attribute writes, not a timer of its own."""

    bounds = Bounds()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watchdog: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._enter(_HEADERS)  # a connection that never sends a byte is held no longer

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # Counted after parsing: on_message_begin resets the count for each request. Headers
        # split over reads are refused within one read (at most 256 KiB) of the bound.
        if self._phase == _HEADERS and self.bounds.max_header_bytes:
            self._header_bytes += len(data)
            if (
                self._header_bytes > self.bounds.max_header_bytes
                and not self.transport.is_closing()
            ):
                limit = self.bounds.max_header_bytes
                self._refuse(b"431 Request Header Fields Too Large", f"headers over {limit} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_bytes = 0
        self._enter(_HEADERS)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if self.parser.should_upgrade() and self._should_upgrade():
            self._phase = _IDLE  # a WebSocket: the connection passes to its own protocol
            return
        # A body follows unless on_message_complete comes right after (a GET).
        self._enter(_BODY)

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._since = self.loop.time()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._phase = _IDLE

    def _enter(self, phase: int) -> None:
        self._phase = phase
        self._since = self.loop.time()
        if self._watchdog is None:
            timeout = self._timeout()
            if timeout:
                self._watchdog = self.loop.call_later(timeout, self._check)

    def _timeout(self) -> float:
        if self._phase == _HEADERS:
            return self.bounds.header_timeout
        return self.bounds.body_timeout if self._phase == _BODY else 0.0

    def _check(self) -> None:
        self._watchdog = None
        timeout = self._timeout()
        if not timeout or self.transport.is_closing():
            return
        now = self.loop.time()
        if self._phase == _BODY and self.flow.read_paused:
            # Reading is paused because the app has not taken the body yet: the wait is ours.
            self._since = now
        left = self._since + timeout - now
        if left > 0:
            self._watchdog = self.loop.call_later(left, self._check)
        elif self._phase == _HEADERS:
            self._refuse(b"408 Request Timeout", f"headers not complete within {timeout:g} s")
        else:
            cast(dict[str, Any], self.cycle.scope)[BODY_TIMED_OUT] = True
            if not self.cycle.response_started:
                self._refuse(b"408 Request Timeout", f"no body bytes for {timeout:g} s")
            else:
                self.transport.close()

    def _refuse(self, status: bytes, reason: str) -> None:
        self._phase = _IDLE
        self.transport.write(_answer(status, reason))
        self.transport.close()


def bounded(bounds: Bounds) -> type[BoundedHttpToolsProtocol]:
    """The protocol class for uvicorn's ``http`` option, with ``bounds``."""
    return type("BoundedHttpTools", (BoundedHttpToolsProtocol,), {"bounds": bounds})

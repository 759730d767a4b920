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
    ``header_timeout`` 408 (a connection that sends nothing included), and a body with no new
    bytes for ``body_timeout``, while the app waits for them, cuts the call off: 408, recorded
    as a timeout.

    What the connection waits for is read from uvicorn's own state after each read, and one
    watchdog timer per connection is armed only while something is awaited: a small request
    that arrives whole costs one method override and a few attribute reads, about 0.5 us over
    uvicorn's 15 us of parsing and dispatch (in-process loop feeding a small POST to the
    protocol). Overriding the parser callbacks instead, a clock read at each, cost about 1.7 us.
    """

    bounds = Bounds()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watchdog: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._awaiting = _HEADERS  # a connection that never sends a byte is held no longer
        self._since = self.loop.time()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        super().connection_lost(exc)

    def _waiting_for(self) -> int:
        """What the connection waits for from the client now, from uvicorn's state: the scope
        is replaced when a request begins, the cycle when its headers are complete."""
        scope, cycle = self.scope, self.cycle
        if scope is None or cycle is None or cycle.scope is not scope:
            return _HEADERS
        if cycle.more_body and not cycle.response_complete:
            return _BODY
        return _IDLE

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        awaiting = self._waiting_for()
        if awaiting == _IDLE:
            self._awaiting = _IDLE
            return
        if self.transport.is_closing():
            return
        if awaiting != self._awaiting or awaiting == _BODY:
            # Headers began (their clock starts), or body bytes came (the body's restarts).
            self._since = self.loop.time()
            if awaiting != self._awaiting:
                self._header_bytes = 0
        self._awaiting = awaiting
        limit = self.bounds.max_header_bytes
        if awaiting == _HEADERS and limit:
            # Headers split over reads are refused within one read (at most 256 KiB) of it.
            self._header_bytes += len(data)
            if self._header_bytes > limit:
                self._refuse(b"431 Request Header Fields Too Large", f"headers over {limit} bytes")
                return
        if self._watchdog is None:
            self._arm()

    def _timeout(self) -> float:
        if self._awaiting == _HEADERS:
            return self.bounds.header_timeout
        return self.bounds.body_timeout if self._awaiting == _BODY else 0.0

    def _arm(self, delay: float | None = None) -> None:
        timeout = self._timeout()
        if timeout:
            self._watchdog = self.loop.call_later(delay or timeout, self._check)

    def _check(self) -> None:
        self._watchdog = None
        if self.transport.is_closing() or self.transport.get_protocol() is not self:
            return  # closed, or passed to a WebSocket protocol
        awaiting = self._waiting_for()
        now = self.loop.time()
        if awaiting != self._awaiting:  # e.g. answered without reading the body
            self._awaiting, self._since = awaiting, now
        if awaiting == _BODY and self.flow.read_paused:
            # Reading is paused because the app has not taken the body yet: the wait is ours.
            self._since = now
        timeout = self._timeout()
        if not timeout:
            return
        left = self._since + timeout - now
        if left > 0:
            self._arm(left)
        elif awaiting == _HEADERS:
            self._refuse(b"408 Request Timeout", f"headers not complete within {timeout:g} s")
        else:
            cast(dict[str, Any], self.cycle.scope)[BODY_TIMED_OUT] = True
            if self.cycle.response_started:
                self.transport.close()
            else:
                self._refuse(b"408 Request Timeout", f"no body bytes for {timeout:g} s")

    def _refuse(self, status: bytes, reason: str) -> None:
        self._awaiting = _IDLE
        self.transport.write(_answer(status, reason))
        self.transport.close()


def bounded(bounds: Bounds) -> type[BoundedHttpToolsProtocol]:
    """The protocol class for uvicorn's ``http`` option, with ``bounds``."""
    return type("BoundedHttpTools", (BoundedHttpToolsProtocol,), {"bounds": bounds})

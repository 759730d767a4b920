"""uvicorn's httptools protocol with the bounds it lacks: header size, header and body read time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import perf_counter
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from wirelab.contract import OTHER_KIND, http_outcome
from wirelab.metrics import ServerMetrics

# Set in the request's scope when the body read timed out, so the metrics middleware records the
# cut-off call as a timeout (408) rather than as a client that went away.
BODY_TIMED_OUT = "wirelab.body_timed_out"

_IDLE, _HEADERS, _BODY = 0, 1, 2
# How long a refused client's further bytes are read and dropped before the connection closes.
_LINGER_SECONDS = 1.0
_PHRASES = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


@dataclass(frozen=True)
class Bounds:
    """What a connection may take: header bytes, and seconds for headers and between body bytes
    (0 turns a bound off)."""

    max_header_bytes: int = 64 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0


def _answer(status: int, reason: str) -> bytes:
    body = reason.encode()
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
        % (status, _PHRASES[status])
        + b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(body)
        + body
    )


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn (0.54) reads request headers of any size for as long as they take, and waits for a
    body forever: a 128 MiB header was accepted after 23.6 s while other calls waited up to 8 s,
    3,000 connections with unfinished headers were all held, and a half-sent body was held
    forever. Here a request line and headers past ``max_header_bytes`` are answered 431,
    headers not complete within ``header_timeout`` 408 (a connection that sends nothing
    included), both counted under kind "other" once a request began, and a body with no new
    bytes for ``body_timeout``, while the app waits for them, cuts the call off: 408, recorded
    as a timeout by the metrics middleware.

    What the connection waits for is read from uvicorn's own state after each read, and one
    watchdog timer per connection is armed only while something is awaited: a small request
    that arrives whole costs one method override and a few attribute reads, about 0.5 us over
    uvicorn's 15 us of parsing and dispatch (in-process loop feeding a small POST to the
    protocol), and its header count, taken before parsing, about 0.25 us more (timeit of those
    lines on a 200-byte order, 28 Nov 2026). Overriding the parser callbacks instead, a clock
    read at each, cost about 1.7 us.
    """

    bounds = Bounds()
    metrics: ServerMetrics | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watchdog: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._tail = b""  # the last bytes of headers not yet ended
        self._refused = False
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

    def _in_body(self) -> bool:
        """Whether the parser is inside a request's body (read or, once answered, discarded)."""
        scope, cycle = self.scope, self.cycle
        return scope is not None and cycle is not None and cycle.scope is scope and cycle.more_body

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # the rest of a refused request, read only to be dropped (see _refuse)
        limit = self.bounds.max_header_bytes
        if limit and not self._in_body():
            # Counted before the parser sees them. Counted after it, headers that were complete
            # within the read went uncounted (70,000-120,000 bytes were served) and a request
            # line past 65,535 bytes got uvicorn's bare 400 (httptools.parse_url's offsets are
            # 16-bit), not 431. A pipelined request's headers after the first blank line of a
            # read are counted from its next read on.
            part, ended = self._header_part(data)
            self._header_bytes += part
            if self._header_bytes > limit:
                self._refuse(431, f"headers over {limit} bytes", counted=True, linger=True)
                return
            if ended:  # the next request's headers start from nothing
                self._header_bytes, self._tail = 0, b""
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
        self._awaiting = awaiting
        if self._watchdog is None:
            self._arm()

    def _header_part(self, data: bytes) -> tuple[int, bool]:
        """How many bytes of ``data`` belong to the headers being received, and whether they
        ended in it: up to the blank line that ends them (which may straddle two reads)."""
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            return end + 4, True
        if self._tail:
            head = data[:3]
            end = (self._tail + head).find(b"\r\n\r\n")
            if end >= 0:
                return end + 4 - len(self._tail), True
        self._tail = (self._tail + data)[-3:]
        return len(data), False

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
            # Counted once a request began: a connection that sent nothing made no call.
            began = self.scope is not None
            self._refuse(408, f"headers not complete within {timeout:g} s", began, linger=False)
        else:
            cast(dict[str, Any], self.cycle.scope)[BODY_TIMED_OUT] = True
            if self.cycle.response_started:
                self.transport.close()
            else:
                # Counted by the metrics middleware, as the call it cuts off.
                self._refuse(408, f"no body bytes for {timeout:g} s", counted=False, linger=False)

    def _refuse(self, status: int, reason: str, counted: bool, linger: bool) -> None:
        """Answer ``status`` and end the connection; with ``linger``, for a client that may still
        be sending, half-close and drop what it sends for a moment first: closed with unread
        bytes, the connection is reset, and a reset can destroy the answer before it is read."""
        self._awaiting = _IDLE
        self.transport.write(_answer(status, reason))
        if linger:
            self._refused = True
            self.transport.write_eof()
            self.loop.call_later(_LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()
        if counted and self.metrics is not None:
            # Before a route is known: counted as 404s are, under kind "other".
            started = perf_counter() - (self.loop.time() - self._since)
            self.metrics.start(OTHER_KIND, started).finish(http_outcome(status), str(status))


def bounded(bounds: Bounds, metrics: ServerMetrics | None = None) -> type[BoundedHttpToolsProtocol]:
    """The protocol class for uvicorn's ``http`` option, with ``bounds``, counting the refusals
    of requests whose headers never completed in ``metrics``."""
    attributes = {"bounds": bounds, "metrics": metrics}
    return type("BoundedHttpTools", (BoundedHttpToolsProtocol,), attributes)

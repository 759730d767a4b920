"""REST downstreams: POST /v1/orders over one pooled, keep-alive HTTP client per process, httpx's
or aiohttp's (WIRELAB_REST_CLIENT)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Protocol

import aiohttp
import httpx
from pydantic import ValidationError

from wirelab import core
from wirelab.contract import CLIENT_IDLE_SECONDS, address_of, http_outcome, peer_of
from wirelab.hops.outgoing import Families, Outgoing
from wirelab.hops.relay import DEADLINE_HEADER, DownstreamError, no_reply, unreachable
from wirelab.rest.models import OrderReply, OrderRequest
from wirelab.traces import Tracing

_HEADERS = {"content-type": "application/json", "user-agent": "wirelab-hop"}


class Unreachable(Exception):
    """No connection carried the call; the client library's own error is its cause."""


class Client(Protocol):
    """One process's pooled HTTP client: a POST answered (status, body, reason), TimeoutError
    past ``timeout`` seconds, or Unreachable."""

    name: str

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, bytes, str]: ...

    async def close(self) -> None: ...


class HttpxClient:
    name = "httpx"

    def __init__(self, idle: float = CLIENT_IDLE_SECONDS) -> None:
        # Enough keep-alive connections that a burst of concurrent orders does not close and
        # reopen them.
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=256, keepalive_expiry=idle
        )
        self._client = httpx.AsyncClient(limits=limits)

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, bytes, str]:
        try:
            r = await self._client.post(url, content=body, headers=headers, timeout=timeout)
        except httpx.TimeoutException:
            raise TimeoutError from None
        except httpx.TransportError as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        return r.status_code, r.content, r.reason_phrase

    async def close(self) -> None:
        await self._client.aclose()


class AiohttpClient:
    name = "aiohttp"

    def __init__(self, idle: float = CLIENT_IDLE_SECONDS) -> None:
        # A session belongs to the event loop it is made in: made by the first call.
        self._session: aiohttp.ClientSession | None = None
        self._idle = idle

    async def post(
        self, url: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> tuple[int, bytes, str]:
        if self._session is None:
            # No cap on connections (limit=0), as httpx's pool above; idle ones kept.
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=self._idle)
            self._session = aiohttp.ClientSession(connector=connector)
        try:
            async with self._session.post(
                url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as r:
                return r.status, await r.read(), r.reason or ""
        except TimeoutError:
            raise
        except aiohttp.ClientError as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


CLIENTS: dict[str, type[HttpxClient] | type[AiohttpClient]] = {
    "httpx": HttpxClient,
    "aiohttp": AiohttpClient,
}


class RestDownstream:
    """One REST service (``http://host:port``), reached through the process's shared client."""

    def __init__(self, url: str, client: Client, families: Families | None) -> None:
        self.peer = peer_of(url)
        self.url = address_of(url).rstrip("/") + "/v1/orders"
        self.client = client
        self.measured = Outgoing(families, "rest", self.peer)

    async def order(self, request: OrderRequest, timeout: float) -> OrderReply:
        body = request.model_dump_json().encode()
        # Whole milliseconds, rounded down: the downstream never waits past this hop's budget.
        headers = {**_HEADERS, DEADLINE_HEADER: str(int(timeout * 1000))}
        started = time.perf_counter()
        outcome, received = "failure", None
        try:
            status, content, reason = await self.client.post(self.url, body, headers, timeout)
            received = len(content)
            outcome = http_outcome(status)
            if status != 200:
                raise DownstreamError(self.peer, "failed", f"{status} {_detail(content, reason)}")
            try:
                reply = OrderReply.model_validate_json(content)
            except ValidationError as exc:
                outcome = "failure"
                raise DownstreamError(
                    self.peer, "failed", f"unreadable reply ({exc.error_count()} errors)"
                ) from None
        except TimeoutError:
            outcome = "timeout"
            raise no_reply(self.peer, timeout) from None
        except Unreachable as exc:
            outcome = "connection_error"
            raise unreachable(self.peer, exc.__cause__ or exc) from None
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.measured.record(outcome, time.perf_counter() - started, len(body), received)
        return reply

    def problem(self) -> None:
        """Always ready: connections open on demand, and their failures are the call's."""

    async def close(self) -> None:
        await self.client.close()


class RestSplitter:
    """Fanout split for REST orders: pydantic copies, each with a piece of the note."""

    def parts(self, request: OrderRequest, count: int) -> list[OrderRequest]:
        order = request.order
        return [
            request.model_copy(update={"order": order.model_copy(update={"note": piece})})
            for piece in core.split_note(order.note, count)
        ]

    def merge(self, own: OrderReply, replies: Sequence[OrderReply]) -> OrderReply:
        words = sum(r.word_count for r in replies)
        chars = sum(r.char_count for r in replies)
        return own.model_copy(update={"word_count": words, "char_count": chars})


def _detail(content: bytes, reason: str) -> str:
    try:
        detail = json.loads(content).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail else reason


def rest_downstreams(
    urls: Sequence[str],
    families: Families | None,
    client: str = "httpx",
    tracing: Tracing | None = None,
) -> list[RestDownstream]:
    """Every REST downstream of this process, sharing one connection pool of ``client``, its
    calls traced (``traceparent`` in each request's headers) when ``tracing`` is given."""
    shared: Client = CLIENTS[client]()
    if tracing is not None:
        shared = tracing.http_client(shared)
    return [RestDownstream(url, shared, families) for url in urls]

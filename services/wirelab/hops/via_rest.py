"""REST downstreams: POST /v1/orders over one pooled, keep-alive httpx client per process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import httpx
from pydantic import ValidationError

from wirelab import core
from wirelab.contract import address_of, http_outcome, peer_of
from wirelab.hops.outgoing import Families, Outgoing
from wirelab.hops.relay import DEADLINE_HEADER, DownstreamError, no_reply, unreachable
from wirelab.rest.models import OrderReply, OrderRequest

_JSON = {"content-type": "application/json"}


class RestDownstream:
    """One REST service (``http://host:port``), reached through the process's shared client."""

    def __init__(self, url: str, client: httpx.AsyncClient, families: Families | None) -> None:
        self.peer = peer_of(url)
        self.url = address_of(url).rstrip("/") + "/v1/orders"
        self.client = client
        self.measured = Outgoing(families, "rest", self.peer)

    async def order(self, request: OrderRequest, timeout: float) -> OrderReply:
        body = request.model_dump_json().encode()
        # Whole milliseconds, rounded down: the downstream never waits past this hop's budget.
        headers = {**_JSON, DEADLINE_HEADER: str(int(timeout * 1000))}
        started = time.perf_counter()
        outcome, received = "failure", None
        try:
            response = await self.client.post(
                self.url, content=body, headers=headers, timeout=timeout
            )
            received = len(response.content)
            outcome = http_outcome(response.status_code)
            if response.status_code != 200:
                raise DownstreamError(
                    self.peer, "failed", f"{response.status_code} {_detail(response)}"
                )
            try:
                reply = OrderReply.model_validate_json(response.content)
            except ValidationError as exc:
                outcome = "failure"
                raise DownstreamError(
                    self.peer, "failed", f"unreadable reply ({exc.error_count()} errors)"
                ) from None
        except httpx.TimeoutException:
            outcome = "timeout"
            raise no_reply(self.peer, timeout) from None
        except httpx.TransportError as exc:
            outcome = "connection_error"
            raise unreachable(self.peer, exc) from None
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.measured.record(outcome, time.perf_counter() - started, len(body), received)
        return reply

    def problem(self) -> None:
        """Always ready: connections open on demand, and their failures are the call's."""

    async def close(self) -> None:
        await self.client.aclose()


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


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    return str(detail) if detail else response.reason_phrase


def rest_downstreams(urls: Sequence[str], families: Families | None) -> list[RestDownstream]:
    """Every REST downstream of this process, sharing one connection pool."""
    # One pool for the process: keep-alive connections are reused call after call, and enough
    # are kept that a burst of concurrent orders does not close and reopen them.
    client = httpx.AsyncClient(
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
        headers={"user-agent": "wirelab-hop"},
    )
    return [RestDownstream(url, client, families) for url in urls]

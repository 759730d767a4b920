"""AMQP downstreams: orders published to a consumer's queue, replies awaited on our own queue."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractIncomingMessage,
    AbstractRobustConnection,
    DeliveryMode,
)
from aio_pika.exceptions import AMQPError, ChannelInvalidStateError, DeliveryError
from google.protobuf.message import DecodeError

from wirelab.amqp import wire
from wirelab.contract import grpc_outcome
from wirelab.hops.outgoing import Families, Outgoing
from wirelab.hops.relay import DownstreamError, no_reply, unreachable
from wirelab.traces.amqp import consuming, publishing
from wirelab.v1 import wirelab_pb2 as pb

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


class Broker:
    """One robust connection per process, its channel (publisher confirms on) and reply queue.

    It connects in the background and keeps reconnecting (every second) while the broker is
    away; until it is connected, every call fails at once as ``unavailable``. Replies come back
    on an exclusive queue of this process's own, matched to their call by correlation id; a call
    whose reply is lost with the connection fails as the connection goes, not at its deadline.
    """

    def __init__(
        self,
        connection: AbstractRobustConnection,
        queues: Sequence[str],
        tracer: Tracer | None = None,
    ) -> None:
        self.connection = connection
        self.tracer = tracer
        self.queues = queues
        # One queue per process: its name is fixed, so a reconnection declares the same queue.
        self.reply_to = f"wirelab.replies.{socket.gethostname()}.{uuid.uuid4().hex[:12]}"
        self.pending: dict[str, asyncio.Future[AbstractIncomingMessage]] = {}
        self.channel: AbstractChannel | None = None
        self.opened = asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        connection = self.connection
        await connection.connect()  # returns once connected
        connection.close_callbacks.add(self._lost)
        channel = await connection.channel()
        for queue in self.queues:  # so an order sent before its consumer started waits for it
            await wire.declare_orders(channel, queue)
        replies = await channel.declare_queue(self.reply_to, exclusive=True, auto_delete=True)
        await replies.consume(self._reply, no_ack=True)
        self.channel = channel

    def problem(self) -> str | None:
        """None when calls can be sent, else why not."""
        if self.channel is None:
            return "no connection to the broker yet"
        if not self.connection.connected.is_set() or self.channel.is_closed:
            return "the connection to the broker is lost; reconnecting"
        return None

    async def _reply(self, message: AbstractIncomingMessage) -> None:
        # Traced: the reply's leg back ends here, a span under the consumer's reply publish.
        with consuming(
            self.tracer, message.headers, self.reply_to, message.correlation_id, "receive"
        ):
            waiting = self.pending.get(message.correlation_id or "")
            if waiting is not None and not waiting.done():
                waiting.set_result(message)
            # else: a late reply to a call that gave up, or a second one to a redelivered order

    def _lost(self, *_: object) -> None:
        for waiting in self.pending.values():
            if not waiting.done():
                waiting.set_exception(ConnectionError("the connection to the broker was lost"))

    async def close(self) -> None:
        """Close the connection (each downstream sharing it asks; the first one closes it)."""
        self.opened.cancel()
        if not self.connection.is_closed:
            await self.connection.close()


class AmqpDownstream:
    """One consumer's queue (``amqp://broker:port/queue``), reached through the process's broker.

    Request/reply: the order (the gRPC arm's protobuf bytes) is published with publisher
    confirms, its correlation id and this process's reply queue, persistent or not (the knob),
    with the caller's remaining budget as its expiration: past it the broker dead-letters the
    order instead of delivering it to a consumer nobody waits for. The call is measured from the
    publish to the reply, as the ``peer`` the queue names.
    """

    def __init__(
        self, address: wire.Address, broker: Broker, persistent: bool, families: Families | None
    ) -> None:
        self.peer = address.queue
        self.queue = address.queue
        self.broker = broker
        self.mode = DeliveryMode.PERSISTENT if persistent else DeliveryMode.NOT_PERSISTENT
        self.measured = Outgoing(families, "amqp", self.peer)

    async def order(self, request: pb.OrderRequest, timeout: float) -> pb.OrderReply:
        """Request/reply: publish ``request``, then wait for its reply, within ``timeout``."""
        call = await self.send(request, timeout)
        return await call.reply()

    async def send(self, request: pb.OrderRequest, timeout: float) -> Pending:
        """Publish ``request``; return once the broker has confirmed it, with the call waiting
        for its reply. The call is measured from here to the reply (or to the failure: a publish
        the broker does not confirm raises DownstreamError here)."""
        call = Pending(self, request.SerializeToString(), timeout)
        broker = self.broker
        try:
            problem = broker.problem()
            if problem is not None or broker.channel is None:
                error = DownstreamError(self.peer, "unavailable", problem or "no channel")
                raise _Failed("connection_error", error)
            message = aio_pika.Message(
                call.body,
                content_type=wire.CONTENT_TYPE,
                correlation_id=call.correlation,
                reply_to=broker.reply_to,
                delivery_mode=self.mode,
                expiration=timeout,
            )
            # Traced: a producer span until the broker's confirm, its context in the headers.
            with publishing(broker.tracer, message.headers, self.queue, call.correlation):
                async with asyncio.timeout(timeout):
                    # Returns once the broker has confirmed it; mandatory: no queue, no drop.
                    exchange = broker.channel.default_exchange
                    await exchange.publish(message, self.queue, mandatory=True)
        except BaseException as exc:
            raise call.failed(exc) from None
        return call

    def problem(self) -> str | None:
        return self.broker.problem()

    async def close(self) -> None:
        await self.broker.close()


def amqp_downstreams(
    urls: Sequence[str],
    user: str,
    password: str,
    persistent: bool,
    families: Families | None,
    tracer: Tracer | None = None,
) -> list[AmqpDownstream]:
    """Every AMQP downstream of this process: queues of one broker, over one connection; with
    ``tracer``, each order's publish and its reply's receipt are spans of the order's trace."""
    addresses = [wire.Address.parse(url) for url in urls]
    brokers = {a.broker for a in addresses}
    if len(brokers) != 1:
        raise ValueError(
            f"AMQP downstreams must share one broker, got {', '.join(sorted(brokers))}"
        )
    connection = addresses[0].connection(user, password)
    broker = Broker(connection, [a.queue for a in addresses], tracer)
    return [AmqpDownstream(a, broker, persistent, families) for a in addresses]


class _Failed(Exception):
    """A call's failure as measured (``outcome``) and as the caller hears it (``error``)."""

    def __init__(self, outcome: str, error: DownstreamError) -> None:
        self.outcome = outcome
        self.error = error


class Pending:
    """One order's call to a queue, published: its reply's future, its deadline, and its one
    record (made when the reply comes, the call fails, or it is abandoned)."""

    def __init__(self, downstream: AmqpDownstream, body: bytes, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self.downstream = downstream
        self.body = body
        self.timeout = timeout
        self.started = time.perf_counter()
        self.deadline = loop.time() + timeout
        self.correlation = uuid.uuid4().hex
        self.waiting: asyncio.Future[AbstractIncomingMessage] = loop.create_future()
        downstream.broker.pending[self.correlation] = self.waiting
        self.ended = False

    async def reply(self) -> pb.OrderReply:
        """The reply, within the call's budget, or DownstreamError."""
        peer = self.downstream.peer
        received = None
        try:
            async with asyncio.timeout_at(self.deadline):
                answer = await self.waiting
            received = len(answer.body)
            status = str((answer.headers or {}).get(wire.STATUS_HEADER, "OK"))
            if status != "OK":
                said = (answer.headers or {}).get(wire.MESSAGE_HEADER) or ""
                said = said.decode(errors="replace") if isinstance(said, bytes) else str(said)
                error = DownstreamError(peer, "failed", f"{status} {said}")
                raise _Failed(grpc_outcome(status), error)
            try:
                reply = pb.OrderReply.FromString(answer.body)
            except DecodeError:
                error = DownstreamError(peer, "failed", "unreadable reply")
                raise _Failed("failure", error) from None
        except BaseException as exc:
            raise self.failed(exc, received) from None
        self.end("ok", received)
        return reply

    def abandon(self) -> None:
        """Stop waiting: counted cancelled, unless it has already ended."""
        self.end("cancelled")

    def end(self, outcome: str, received: int | None = None) -> None:
        if self.ended:
            return
        self.ended = True
        self.downstream.broker.pending.pop(self.correlation, None)
        elapsed = time.perf_counter() - self.started
        self.downstream.measured.record(outcome, elapsed, len(self.body), received)

    def failed(self, exc: BaseException, received: int | None = None) -> BaseException:
        """Record the call as failed by ``exc``; what to raise instead (the same, if it is not
        a downstream's fault: a cancellation or a bug)."""
        peer = self.downstream.peer
        outcome, error = "failure", exc
        if isinstance(exc, _Failed):
            outcome, error = exc.outcome, exc.error
        elif isinstance(exc, asyncio.CancelledError):
            outcome = "cancelled"
        elif isinstance(exc, TimeoutError):
            outcome, error = "timeout", no_reply(peer, self.timeout)
        elif isinstance(exc, DeliveryError):  # unroutable (no such queue) or refused
            error = DownstreamError(peer, "unavailable", f"the broker refused it: {exc}")
        elif isinstance(exc, AMQPError | ChannelInvalidStateError | ConnectionError):
            outcome, error = "connection_error", unreachable(peer, exc)
        self.end(outcome, received)
        return error

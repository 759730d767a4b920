"""AMQP downstreams: orders published to a consumer's queue, replies awaited on our own queue."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Sequence

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
from wirelab.v1 import wirelab_pb2 as pb


class Broker:
    """One robust connection per process, its channel (publisher confirms on) and reply queue.

    It connects in the background and keeps reconnecting (every second) while the broker is
    away; until it is connected, every call fails at once as ``unavailable``. Replies come back
    on an exclusive queue of this process's own, matched to their call by correlation id; a call
    whose reply is lost with the connection fails as the connection goes, not at its deadline.
    """

    def __init__(self, connection: AbstractRobustConnection, queues: Sequence[str]) -> None:
        self.connection = connection
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
        body = request.SerializeToString()
        started = time.perf_counter()
        outcome, received = "failure", None
        correlation = uuid.uuid4().hex
        broker = self.broker
        waiting = asyncio.get_running_loop().create_future()
        broker.pending[correlation] = waiting
        try:
            problem = broker.problem()
            if problem is not None or broker.channel is None:
                outcome = "connection_error"
                raise DownstreamError(self.peer, "unavailable", problem or "no channel")
            message = aio_pika.Message(
                body,
                content_type=wire.CONTENT_TYPE,
                correlation_id=correlation,
                reply_to=broker.reply_to,
                delivery_mode=self.mode,
                expiration=timeout,
            )
            async with asyncio.timeout(timeout):
                # Returns once the broker has confirmed it; mandatory: no queue, no silent drop.
                await broker.channel.default_exchange.publish(message, self.queue, mandatory=True)
                answer = await waiting
            received = len(answer.body)
            status = str((answer.headers or {}).get(wire.STATUS_HEADER, "OK"))
            if status != "OK":
                outcome = grpc_outcome(status)
                said = (answer.headers or {}).get(wire.MESSAGE_HEADER, "")
                raise DownstreamError(self.peer, "failed", f"{status} {said}")
            try:
                reply = pb.OrderReply.FromString(answer.body)
            except DecodeError:
                raise DownstreamError(self.peer, "failed", "unreadable reply") from None
            outcome = "ok"
        except TimeoutError:
            outcome = "timeout"
            raise no_reply(self.peer, timeout) from None
        except DeliveryError as exc:  # unroutable (no such queue) or refused by the broker
            raise DownstreamError(
                self.peer, "unavailable", f"the broker refused it: {exc}"
            ) from None
        except (AMQPError, ChannelInvalidStateError, ConnectionError) as exc:
            outcome = "connection_error"
            raise unreachable(self.peer, exc) from None
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            broker.pending.pop(correlation, None)
            self.measured.record(outcome, time.perf_counter() - started, len(body), received)
        return reply

    def problem(self) -> str | None:
        return self.broker.problem()

    async def close(self) -> None:
        await self.broker.close()


def amqp_downstreams(
    urls: Sequence[str], user: str, password: str, persistent: bool, families: Families | None
) -> list[AmqpDownstream]:
    """Every AMQP downstream of this process: queues of one broker, over one connection."""
    addresses = [wire.Address.parse(url) for url in urls]
    brokers = {a.broker for a in addresses}
    if len(brokers) != 1:
        raise ValueError(
            f"AMQP downstreams must share one broker, got {', '.join(sorted(brokers))}"
        )
    broker = Broker(addresses[0].connection(user, password), [a.queue for a in addresses])
    return [AmqpDownstream(a, broker, persistent, families) for a in addresses]

"""The AMQP arm's conventions, shared by the caller (wirelab.hops.via_amqp) and the consumer: where
orders go, how they and their replies are framed, what the broker does with a refused one."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import aio_pika
from aio_pika import RobustConnection
from aio_pika.abc import AbstractChannel, AbstractQueue, FieldValue
from yarl import URL

# Orders and replies are the gRPC service's protobuf messages, byte for byte: the AMQP arm differs
# from the gRPC arm in the transport between hops only, not in what crosses it.
CONTENT_TYPE = "application/x-protobuf"
# A reply's outcome, as a gRPC status name ("OK", "INVALID_ARGUMENT", "INTERNAL"), and its message.
STATUS_HEADER = "x-wirelab-status"
MESSAGE_HEADER = "x-wirelab-message"
# Orders the consumers refuse (undecodable, invalid, failed) and orders that expire in their queue
# (past the caller's deadline) end here, through the default exchange, kept up to a bound so a
# long run of refusals cannot fill the broker's memory: the oldest are dropped first.
DEAD_LETTER_QUEUE = "wirelab.dead-letter"
DEAD_LETTER_LIMIT = 10_000


@dataclass(frozen=True)
class Address:
    """``amqp://broker:port/queue``: a queue on a broker (the default virtual host, ``/``)."""

    host: str
    port: int
    queue: str

    @classmethod
    def parse(cls, url: str) -> Address:
        parts = urlsplit(url)
        queue = parts.path.lstrip("/")
        if parts.scheme != "amqp" or not parts.hostname or not queue or "/" in queue:
            raise ValueError(f"an AMQP address is amqp://broker:port/queue: {url!r}")
        return cls(parts.hostname, parts.port or 5672, queue)

    @property
    def broker(self) -> str:
        return f"{self.host}:{self.port}"

    def connection(self, user: str, password: str) -> RobustConnection:
        """A robust connection to the broker, not yet connected (``connect()`` returns once it
        is). Made here rather than by ``connect_robust`` so that whoever holds it can close it
        while it is still trying: aio-pika's reconnection task outlives a cancelled connect."""
        return RobustConnection(URL(self.connection_url(user, password)))

    def connection_url(self, user: str, password: str) -> str:
        """The broker's URL with credentials; aio-pika's robust connection retries it every
        second while the broker is away (``fail_fast=no``: a service starts before its broker)."""
        auth = f"{quote(user, safe='')}:{quote(password, safe='')}"
        return f"amqp://{auth}@{self.broker}/?fail_fast=no&reconnect_interval=1"


async def declare_orders(channel: AbstractChannel, queue: str) -> AbstractQueue:
    """The durable order queue ``queue``, dead-lettering to DEAD_LETTER_QUEUE (declared too).

    Both sides declare it, with the same arguments, so neither has to start first."""
    await channel.declare_queue(
        DEAD_LETTER_QUEUE,
        durable=True,
        arguments={"x-max-length": DEAD_LETTER_LIMIT, "x-overflow": "drop-head"},
    )
    return await channel.declare_queue(
        queue,
        durable=True,
        arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": DEAD_LETTER_QUEUE},
    )


def reply(body: bytes, correlation_id: str | None, status: str, message: str) -> aio_pika.Message:
    """A reply to an order: transient (its queue lives as long as the caller's connection)."""
    headers: dict[str, FieldValue] = {STATUS_HEADER: status}
    if message:
        headers[MESSAGE_HEADER] = message
    return aio_pika.Message(
        body, content_type=CONTENT_TYPE, correlation_id=correlation_id, headers=headers
    )

"""The AMQP arm's hop: orders taken from a queue, worked by the core, answered on their reply-to."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from aio_pika import Message
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from google.protobuf.message import DecodeError

from wirelab import core
from wirelab.amqp import wire
from wirelab.core import CoreError, Limits
from wirelab.metrics import ServerMetrics
from wirelab.rpc import replies
from wirelab.traces.amqp import consuming, publishing
from wirelab.v1 import wirelab_pb2 as pb

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

log = logging.getLogger("wirelab.amqp")
KIND = "unary"  # an order: ProcessOrder's request and reply


class OrderConsumer:
    """Handles each delivered order: a reply on its ``reply_to``, then the ack; or a refusal.

    A call lasts from the delivery to the ack (or the reject), and its code says what became of
    the message (the contract's amqp codes): ``ack``; ``dead_letter`` when the order is refused as
    bad input (undecodable protobuf, an order the core rejects, one over the order limit), with
    the status the gRPC service would answer (INVALID_ARGUMENT, or RESOURCE_EXHAUSTED past a
    limit) so the caller need not wait for its deadline; ``nack`` (also dead-lettered) when
    handling it failed, with INTERNAL; ``requeue`` when the consumer stopped or lost the broker
    before the ack, so the broker delivers it again.
    """

    def __init__(
        self,
        limits: Limits,
        metrics: ServerMetrics | None,
        queue: str = "",
        tracer: Tracer | None = None,
    ) -> None:
        self.limits = limits
        self.metrics = metrics
        # Traced: each delivery's handling a consumer span of its order's trace (the context
        # read from the message's headers), its reply's publish a producer span under it.
        self.queue = queue
        self.tracer = tracer
        self.channel: AbstractChannel | None = None  # replies go out on it, once it is open
        self.in_flight: set[asyncio.Task[None]] = set()

    async def handle(self, message: AbstractIncomingMessage) -> None:
        with consuming(self.tracer, message.headers, self.queue, message.correlation_id):
            await self._handle(message)

    async def _handle(self, message: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)
        call = None if self.metrics is None else self.metrics.start(KIND)
        if call is not None:
            call.received(len(message.body))
        outcome, code = "cancelled", "requeue"
        try:
            try:
                # The gRPC and REST services' order limit, before anything is decoded.
                core.check_order_size(len(message.body), self.limits)
                request = pb.OrderRequest.FromString(message.body)
                totals = await core.process_order_async(
                    request.order, request.work_ms, request.count_words, self.limits
                )
            except (DecodeError, CoreError) as exc:
                outcome, code = "client_error", "dead_letter"
                what = "not an OrderRequest" if isinstance(exc, DecodeError) else str(exc)
                over = isinstance(exc, CoreError) and exc.over_limit
                await self._refuse(
                    message, "RESOURCE_EXHAUSTED" if over else "INVALID_ARGUMENT", what
                )
                return
            except Exception as exc:  # a bug must not stop the consumer: dead-letter the order
                log.exception("order %s failed", message.correlation_id)
                outcome, code = "server_error", "nack"
                await self._refuse(message, "INTERNAL", f"{type(exc).__name__}: {exc}")
                return
            body = replies.order_reply(request, totals).SerializeToString()
            await self._answer(message, wire.reply(body, message.correlation_id, "OK", ""))
            await message.ack()
            if call is not None:
                call.sent(len(body))
            outcome, code = "ok", "ack"
        except asyncio.CancelledError:
            raise  # stopping: unacknowledged, the broker requeues it when the channel closes
        except Exception as exc:
            # The broker went away before the ack: it delivers the order again on reconnection.
            log.warning("order %s left unacknowledged: %s", message.correlation_id, exc)
        finally:
            if call is not None:
                call.finish(outcome, code)

    async def _refuse(self, message: AbstractIncomingMessage, status: str, why: str) -> None:
        await self._answer(message, wire.reply(b"", message.correlation_id, status, why))
        await message.reject(requeue=False)  # to the dead-letter queue

    async def _answer(self, message: AbstractIncomingMessage, answer: Message) -> None:
        if message.reply_to and self.channel is not None:
            # Not mandatory: a caller that has gone (its reply queue with it) is not an error here.
            # The channel's default exchange is looked up each time: a reconnection replaces it.
            exchange = self.channel.default_exchange
            with publishing(self.tracer, answer.headers, message.reply_to, answer.correlation_id):
                await exchange.publish(answer, message.reply_to, mandatory=False)

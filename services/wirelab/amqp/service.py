"""`python -m wirelab.amqp`: a queue's consumer, with /metrics and /healthz on its metrics port."""

from __future__ import annotations

import asyncio
import signal

from aio_pika.abc import AbstractRobustConnection

from wirelab import serving
from wirelab.amqp import wire
from wirelab.amqp.consumer import OrderConsumer
from wirelab.settings import Settings
from wirelab.traces import start as start_tracing

PROG = "python -m wirelab.amqp"


class Consuming:
    """The consumer's link to its broker: whether it can serve, and why not."""

    def __init__(self) -> None:
        self.connection: AbstractRobustConnection | None = None
        self.consuming = False

    def problem(self) -> str | None:
        """None when orders can be served, else why not (read by /healthz, another thread)."""
        if self.connection is None or not self.consuming:
            return "not connected to the broker yet"
        if not self.connection.connected.is_set():
            return "lost the broker; reconnecting"
        return None


async def serve(settings: Settings) -> None:
    try:
        address = wire.Address.parse(settings.amqp_consume)
    except ValueError as exc:
        serving.bad_configuration(PROG, ValueError(f"WIRELAB_AMQP_CONSUME: {exc}"))
    metrics = serving.instruments(settings, "amqp", "asyncio")
    # A consumer is named after its queue unless told otherwise: compose names each so.
    tracing = start_tracing(settings, "amqp", service=address.queue)
    tracer = None if tracing is None else tracing.tracer
    consumer = OrderConsumer(settings.limits, metrics, address.queue, tracer)
    link = Consuming()
    serving.serve_metrics(settings, PROG, metrics, link.problem)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"{PROG}: serving queue {address.queue} of {address.broker}", flush=True)
    start = asyncio.create_task(_consume(settings, address, consumer, link))
    await stop.wait()
    if not start.done():
        start.cancel()  # the broker never came: nothing to drain
    if link.connection is not None:
        await _drain(settings, consumer, link.connection)
    if tracing is not None:
        tracing.shutdown()


async def _consume(
    settings: Settings, address: wire.Address, consumer: OrderConsumer, link: Consuming
) -> None:
    # Returns once connected: while the broker is away it retries every second, not-ready.
    link.connection = connection = address.connection(settings.amqp_user, settings.amqp_password)
    await connection.connect()
    # Publisher confirms on (aio-pika's default): a reply is on the broker before the ack.
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=settings.amqp_prefetch)
    queue = await wire.declare_orders(channel, address.queue)
    consumer.channel = channel
    await queue.consume(consumer.handle)  # restored with the channel after a reconnection
    link.consuming = True
    print(f"{PROG}: consuming {address.queue}", flush=True)


async def _drain(
    settings: Settings, consumer: OrderConsumer, connection: AbstractRobustConnection
) -> None:
    """SIGTERM: finish the orders in hand (up to the grace period), then close; the broker
    requeues whatever was not acknowledged by then."""
    if consumer.in_flight:
        await asyncio.wait(set(consumer.in_flight), timeout=settings.grace_seconds)
    await connection.close()

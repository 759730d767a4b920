"""AMQP's part of a trace: the W3C context carried in each message's headers, a producer span
around each publish and a consumer span around each delivery's handling (docs/traces.md)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


@contextmanager
def publishing(
    tracer: Tracer | None, headers: MutableMapping[str, Any], queue: str, correlation: str | None
) -> Iterator[None]:
    """Around an AMQP publish to ``queue`` (the default exchange routes by queue name): a
    producer span, its context written into the message's ``headers`` as ``traceparent``.
    Nothing at all without a tracer."""
    if tracer is None:
        yield
        return
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    attributes = _messaging(queue, correlation, "send", "publish")
    with tracer.start_as_current_span(f"publish {queue}", kind=SpanKind.PRODUCER) as span:
        span.set_attributes(attributes)
        propagate.inject(headers)
        yield


@contextmanager
def consuming(
    tracer: Tracer | None,
    headers: Mapping[str, Any] | None,
    queue: str,
    correlation: str | None,
    operation: str = "process",
) -> Iterator[None]:
    """Around the handling of a delivered AMQP message: a consumer span whose parent is the
    publisher's, read from the message's ``traceparent`` header. Nothing without a tracer."""
    if tracer is None:
        yield
        return
    from opentelemetry import propagate
    from opentelemetry.trace import SpanKind

    # pamqp hands a header back as bytes when it is not UTF-8: W3C's propagator reads text.
    carrier = {
        k: v.decode() if isinstance(v, bytes) else str(v) for k, v in (headers or {}).items()
    }
    parent = propagate.extract(carrier)
    attributes = _messaging(queue, correlation, operation, operation)
    with tracer.start_as_current_span(
        f"{operation} {queue}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
    ):
        yield


def _messaging(queue: str, correlation: str | None, kind: str, name: str) -> dict[str, str]:
    """OpenTelemetry's messaging attributes of a RabbitMQ message sent through the default
    exchange, plus the lab's kind: every AMQP message is an order or its reply (unary)."""
    attributes = {
        "messaging.system": "rabbitmq",
        "messaging.operation.type": kind,
        "messaging.operation.name": name,
        "messaging.destination.name": queue,
        "messaging.rabbitmq.destination.routing_key": queue,
        "wirelab.kind": "unary",
    }
    if correlation:
        attributes["messaging.message.conversation_id"] = correlation
    return attributes

"""Before a servicer method runs: its request decoded here rather than by grpc, and admitted.

grpc decodes a request with the handler's ``request_deserializer`` before any Python of ours
runs, and answers bytes that do not parse with ``UNKNOWN: Unexpected DecodeError`` (aio) or
``INTERNAL`` (thread-pool server), uncounted for one-request methods. So every method is
registered taking raw messages, and this layer, on both servers and with metrics on or off,
parses each one (a message of a request stream too), answering ``INVALID_ARGUMENT`` when it is
not the method's message; for the one-request methods it also:

- refuses what it can from the raw size before parsing anything: an order over
  ``max_order_bytes`` (``RESOURCE_EXHAUSTED``, as the core says), a one-message ``Upload`` the
  payload budget cannot hold (``RESOURCE_EXHAUSTED`` with ``grpc-retry-pushback-ms``);
- admits a one-message ``Download`` of ``size`` bytes into the budget;
- releases what it admitted once the RPC is over (reply serialized and sent, or failed).

The message has been received whole by then: grpc gives a handler no earlier hook, so the budget
bounds what admitted calls hold, and rpc/receipts.py how many Upload messages are received at
once (docs/services.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from wirelab import core
from wirelab.core import CoreError, Limits, Overloaded, PayloadBudget
from wirelab.rpc.errors import status_of
from wirelab.rpc.measure import Handler

# Peak memory of a one-message call per payload byte, what it is charged in the budget
# (`wirelab perf grpc-memory`, 64 MiB, both server modes): an Upload 3.3-4.1 times
# its message (grpc's buffer, the bytes handed to Python, the parsed Blob), a Download 3.0 times
# its size (the payload, the Blob's copy, its serialization).
UPLOAD_HOLDS = 4
DOWNLOAD_HOLDS = 3
# Trailing metadata of a refusal for load. Such a refusal counts client_error/RESOURCE_EXHAUSTED
# (REST's 503 counts client_error too); its details and this tell it from an input over a limit.
PUSHBACK = "grpc-retry-pushback-ms"
# What a call's request goes through: (raw message, context) -> the parsed request, raising
# DecodeError, CoreError or Overloaded. Bytes it admits are released when the RPC is done.
Intake = Callable[[bytes, Any], Any]
Refusal = tuple[grpc.StatusCode, str, tuple[tuple[str, str], ...]]
REFUSED = (DecodeError, CoreError, Overloaded)


def pushback(exc: Overloaded) -> tuple[tuple[str, str], ...]:
    """Trailing metadata of an overload refusal: grpc's own retry pushback (a client retry
    policy waits that long before retrying), gRPC's counterpart of REST's ``Retry-After``."""
    return ((PUSHBACK, str(exc.retry_after_seconds * 1000)),)


def refusal(exc: Exception, parse: Any) -> Refusal:
    """The status, details and trailing metadata that answer what ``intake`` raised."""
    if isinstance(exc, Overloaded):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, exc.message, pushback(exc)
    if isinstance(exc, CoreError):
        return status_of(exc), exc.message, ()
    what = parse.__self__.DESCRIPTOR.full_name
    return grpc.StatusCode.INVALID_ARGUMENT, f"request is not a valid {what}: {exc}", ()


class Admission:
    """The one-request methods' intake on one server (see the module doc)."""

    def __init__(self, limits: Limits, budget: PayloadBudget, aio: bool) -> None:
        self.limits = limits
        self.budget = budget
        self.aio = aio

    def handlers(self, handlers: dict[str, Handler]) -> dict[str, Handler]:
        """``handlers`` by method name, taking raw messages."""
        return {name: self._raw(name, handler) for name, handler in handlers.items()}

    def _hold(self, nbytes: int, context: Any) -> None:
        """Take ``nbytes`` of the budget (or raise Overloaded) until the RPC is done."""
        budget = self.budget
        budget.acquire(nbytes)

        def release(*_: object) -> None:
            budget.release(nbytes)

        if self.aio:
            context.add_done_callback(release)
        elif not context.add_callback(release):  # the RPC is already over
            release()

    def intake(self, name: str, parse: Callable[[bytes], Any]) -> Intake:
        """What ``name``'s raw request goes through, with as few calls as each method needs:
        ProcessOrder, the call the observer-effect benchmark saturates, adds one length test.
        Small ProcessOrder calls per server CPU-second against the code before this layer (ghz
        loading both at once on one core, the overhead benchmark's method, run from outside
        the repo): 0.998 and 1.008 (medians of 7 and 9 rounds; metrics off 1.009); a first
        version with a generic checks object and a list per call read 0.985."""
        limits, hold = self.limits, self._hold
        if name == "ProcessOrder":
            most = limits.max_order_bytes

            def order(raw: bytes, context: Any) -> Any:
                if len(raw) > most:
                    raise core.order_too_large(limits)
                return parse(raw)

            return order
        if name == "Upload":

            def upload(raw: bytes, context: Any) -> Any:
                hold(
                    len(raw) * UPLOAD_HOLDS, context
                )  # before parsing: a refused upload is never parsed
                return parse(raw)

            return upload
        if name == "Download":

            def download(raw: bytes, context: Any) -> Any:
                request = parse(raw)
                # An over-limit size is the servicer's to refuse, with the core's message.
                if 0 < request.size <= limits.max_payload_bytes:
                    hold(request.size * DOWNLOAD_HOLDS, context)
                return request

            return download

        def parsed(raw: bytes, context: Any) -> Any:
            return parse(raw)

        return parsed

    def _raw(self, name: str, handler: Handler) -> Handler:
        parse = handler.request_deserializer
        assert parse is not None  # generated handlers always name their message's parser
        serialize = handler.response_serializer
        if handler.request_streaming:
            if handler.stream_unary is not None:
                one = _aio_stream_in if self.aio else _sync_stream_in
                behavior = one(handler.stream_unary, parse)
                return grpc.stream_unary_rpc_method_handler(behavior, response_serializer=serialize)
            each = _aio_streams if self.aio else _sync_streams
            behavior = each(handler.stream_stream, parse)
            return grpc.stream_stream_rpc_method_handler(behavior, response_serializer=serialize)
        intake = self.intake(name, parse)
        if handler.unary_unary is not None:
            make = _aio_unary if self.aio else _sync_unary
            behavior = make(handler.unary_unary, intake, parse)
            return grpc.unary_unary_rpc_method_handler(behavior, response_serializer=serialize)
        make = _aio_stream if self.aio else _sync_stream
        behavior = make(handler.unary_stream, intake, parse)
        return grpc.unary_stream_rpc_method_handler(behavior, response_serializer=serialize)


def _aio_unary(behavior: Any, intake: Intake, parse: Any) -> Any:
    async def decoded(raw: bytes, context: Any) -> Any:
        try:
            request = intake(raw, context)
        except REFUSED as exc:
            await context.abort(*refusal(exc, parse))
        return await behavior(request, context)

    return decoded


def _aio_stream(behavior: Any, intake: Intake, parse: Any) -> Any:
    async def decoded(raw: bytes, context: Any) -> AsyncIterator[Any]:
        try:
            request = intake(raw, context)
        except REFUSED as exc:
            await context.abort(*refusal(exc, parse))
        async for reply in behavior(request, context):
            yield reply

    return decoded


def _sync_unary(behavior: Any, intake: Intake, parse: Any) -> Any:
    def decoded(raw: bytes, context: Any) -> Any:
        try:
            request = intake(raw, context)
        except REFUSED as exc:
            _sync_abort(context, refusal(exc, parse))
        return behavior(request, context)

    return decoded


def _sync_stream(behavior: Any, intake: Intake, parse: Any) -> Any:
    def decoded(raw: bytes, context: Any) -> Iterator[Any]:
        try:
            request = intake(raw, context)
        except REFUSED as exc:
            _sync_abort(context, refusal(exc, parse))
        yield from behavior(request, context)

    return decoded


async def _aio_parsed(raws: AsyncIterator[bytes], context: Any, parse: Any) -> AsyncIterator[Any]:
    async for raw in raws:
        try:
            message = parse(raw)
        except DecodeError as exc:
            await context.abort(*refusal(exc, parse))
        yield message


def _aio_stream_in(behavior: Any, parse: Any) -> Any:
    async def decoded(raws: AsyncIterator[bytes], context: Any) -> Any:
        return await behavior(_aio_parsed(raws, context, parse), context)

    return decoded


def _aio_streams(behavior: Any, parse: Any) -> Any:
    async def decoded(raws: AsyncIterator[bytes], context: Any) -> AsyncIterator[Any]:
        async for reply in behavior(_aio_parsed(raws, context, parse), context):
            yield reply

    return decoded


def _sync_parsed(raws: Iterator[bytes], context: Any, parse: Any) -> Iterator[Any]:
    for raw in raws:
        try:
            message = parse(raw)
        except DecodeError as exc:
            _sync_abort(context, refusal(exc, parse))
        yield message


def _sync_stream_in(behavior: Any, parse: Any) -> Any:
    def decoded(raws: Iterator[bytes], context: Any) -> Any:
        return behavior(_sync_parsed(raws, context, parse), context)

    return decoded


def _sync_streams(behavior: Any, parse: Any) -> Any:
    def decoded(raws: Iterator[bytes], context: Any) -> Iterator[Any]:
        yield from behavior(_sync_parsed(raws, context, parse), context)

    return decoded


def _sync_abort(context: Any, refused: Refusal) -> None:
    code, details, trailing = refused
    if trailing:  # the thread-pool server's abort takes no trailing metadata
        context.set_trailing_metadata(trailing)
    context.abort(code, details)

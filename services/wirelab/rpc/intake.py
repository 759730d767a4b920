"""Before a servicer method runs: its request decoded here rather than by grpc, and admitted.

grpc decodes a request with the handler's ``request_deserializer`` before any Python of ours
runs, and answers bytes that do not parse with ``UNKNOWN: Unexpected DecodeError`` (aio) or
``INTERNAL`` (thread-pool server), uncounted. So the one-request methods are registered taking
the raw message, and this layer, on both servers and with metrics on or off:

- refuses what it can from the raw size before parsing anything: an order over
  ``max_order_bytes`` (``RESOURCE_EXHAUSTED``, as the core says), a one-message ``Upload`` the
  payload budget cannot hold (``RESOURCE_EXHAUSTED`` with ``grpc-retry-pushback-ms``);
- parses the message, answering ``INVALID_ARGUMENT`` when it is not one;
- admits a one-message ``Download`` of ``size`` bytes into the budget;
- releases what it admitted once the RPC is over (reply serialized and sent, or failed).

The message has been received whole by then: grpc gives a handler no earlier hook, so the budget
bounds what admitted calls hold, not the receipt of a refused one (docs/services.md).
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

Parse = Callable[[bytes], Any]
# How many payload bytes a call holds, from its raw message (before parsing) or its request.
Holds = Callable[[bytes], int]


# Trailing metadata of a refusal for load. Such a refusal counts client_error/RESOURCE_EXHAUSTED
# (REST's 503 counts client_error too); its details and this tell it from an input over a limit.
PUSHBACK = "grpc-retry-pushback-ms"


def pushback(exc: Overloaded) -> tuple[tuple[str, str], ...]:
    """Trailing metadata of an overload refusal: grpc's own retry pushback (a client retry
    policy waits that long before retrying), gRPC's counterpart of REST's ``Retry-After``."""
    return ((PUSHBACK, str(exc.retry_after_seconds * 1000)),)


class _Checks:
    """What one method checks, and the trouble each check reports as (status, details,
    trailing metadata)."""

    __slots__ = ("after", "before", "budget", "parse", "what")

    def __init__(
        self, parse: Parse, budget: PayloadBudget, before: Holds | None, after: Holds | None
    ) -> None:
        self.parse = parse
        self.what = parse.__self__.DESCRIPTOR.full_name  # type: ignore[attr-defined]
        self.budget = budget
        self.before = before
        self.after = after

    def run(self, raw: bytes, held: list[int]) -> tuple[Any, tuple[Any, ...] | None]:
        """The request, or why the call is refused; bytes admitted are appended to ``held``."""
        try:
            if self.before is not None:
                self._admit(self.before(raw), held)
            try:
                request = self.parse(raw)
            except DecodeError as exc:
                return None, (
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"request is not a valid {self.what}: {exc}",
                    (),
                )
            if self.after is not None:
                self._admit(self.after(request), held)
        except CoreError as exc:
            return None, (status_of(exc), exc.message, ())
        except Overloaded as exc:
            return None, (grpc.StatusCode.RESOURCE_EXHAUSTED, exc.message, pushback(exc))
        return request, None

    def _admit(self, nbytes: int, held: list[int]) -> None:
        self.budget.acquire(nbytes)
        held.append(nbytes)


def _method_checks(name: str, parse: Parse, limits: Limits, budget: PayloadBudget) -> _Checks:
    def order(raw: bytes) -> int:
        core.check_order_size(len(raw), limits)
        return 0

    def blob_size(request: Any) -> int:
        # An over-limit size is the servicer's to refuse, with the core's message.
        size: int = request.size
        return size if 0 <= size <= limits.max_payload_bytes else 0

    before = {"ProcessOrder": order, "Upload": len}.get(name)
    after = blob_size if name == "Download" else None
    return _Checks(parse, budget, before, after)


class Intake:
    """Rebuilds a servicer's one-request handlers to take raw bytes (see the module doc)."""

    def __init__(self, limits: Limits, budget: PayloadBudget, aio: bool) -> None:
        self.limits = limits
        self.budget = budget
        self.aio = aio

    def handlers(self, handlers: dict[str, Handler]) -> dict[str, Handler]:
        """``handlers`` by method name, the one-request ones taking raw bytes."""
        return {name: self._raw(name, handler) for name, handler in handlers.items()}

    def _raw(self, name: str, handler: Handler) -> Handler:
        if handler.request_streaming:
            return handler
        parse = handler.request_deserializer
        assert parse is not None  # generated handlers always name their message's parser
        checks = _method_checks(name, parse, self.limits, self.budget)
        serialize = handler.response_serializer
        if handler.unary_unary is not None:
            make = self._aio_unary if self.aio else self._sync_unary
            behavior = make(handler.unary_unary, checks)
            return grpc.unary_unary_rpc_method_handler(behavior, response_serializer=serialize)
        make = self._aio_stream if self.aio else self._sync_stream
        behavior = make(handler.unary_stream, checks)
        return grpc.unary_stream_rpc_method_handler(behavior, response_serializer=serialize)

    def _release_after(self, context: Any, held: list[int]) -> None:
        if not held:
            return
        release = self.budget.release

        def released(*_: object) -> None:
            for nbytes in held:
                release(nbytes)

        if self.aio:
            context.add_done_callback(released)
        elif not context.add_callback(released):  # the RPC is already over
            released()

    def _aio_unary(self, behavior: Any, checks: _Checks) -> Any:
        release_after = self._release_after

        async def decoded(raw: bytes, context: Any) -> Any:
            held: list[int] = []
            request, refused = checks.run(raw, held)
            release_after(context, held)
            if refused is not None:
                await _aio_refuse(context, refused)
            return await behavior(request, context)

        return decoded

    def _aio_stream(self, behavior: Any, checks: _Checks) -> Any:
        release_after = self._release_after

        async def decoded(raw: bytes, context: Any) -> AsyncIterator[Any]:
            held: list[int] = []
            request, refused = checks.run(raw, held)
            release_after(context, held)
            if refused is not None:
                await _aio_refuse(context, refused)
            async for reply in behavior(request, context):
                yield reply

        return decoded

    def _sync_unary(self, behavior: Any, checks: _Checks) -> Any:
        release_after = self._release_after

        def decoded(raw: bytes, context: Any) -> Any:
            held: list[int] = []
            request, refused = checks.run(raw, held)
            release_after(context, held)
            if refused is not None:
                _sync_refuse(context, refused)
            return behavior(request, context)

        return decoded

    def _sync_stream(self, behavior: Any, checks: _Checks) -> Any:
        release_after = self._release_after

        def decoded(raw: bytes, context: Any) -> Iterator[Any]:
            held: list[int] = []
            request, refused = checks.run(raw, held)
            release_after(context, held)
            if refused is not None:
                _sync_refuse(context, refused)
            yield from behavior(request, context)

        return decoded


async def _aio_refuse(context: Any, refused: tuple[Any, ...]) -> None:
    code, details, trailing = refused
    await context.abort(code, details, trailing)


def _sync_refuse(context: Any, refused: tuple[Any, ...]) -> None:
    code, details, trailing = refused
    if trailing:
        context.set_trailing_metadata(trailing)
    context.abort(code, details)

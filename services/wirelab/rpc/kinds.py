"""Which metric kind each gRPC method is, and how a finished call's status becomes an outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from wirelab.contract import DEADLINE_SLACK_S, grpc_outcome
from wirelab.metrics import Call

SERVICE = "wirelab.v1.WireLab"
METHOD_KINDS = {
    f"/{SERVICE}/ProcessOrder": "unary",
    f"/{SERVICE}/StreamMessages": "server_stream",
    f"/{SERVICE}/Upload": "upload",
    f"/{SERVICE}/UploadStream": "upload_chunked",
    f"/{SERVICE}/Download": "download",
    f"/{SERVICE}/DownloadStream": "download_chunked",
    f"/{SERVICE}/PingPong": "bidi",
}
# Unknown methods are counted under the contract's OTHER_KIND so UNIMPLEMENTED shows up in the
# request counter; health and reflection are operational and not measured.
UNMEASURED_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")


class Recorded:
    """``with Recorded(call, context):`` around a handler's work decides the call's outcome: OK
    (or the code the handler set) if the block completes, else by what it raised. The call is
    recorded by :meth:`done`, which the measured handler registers as the RPC's done callback,
    so the duration ends after grpc has sent the reply and the status, not when the handler
    returns. A call that ends before the block has exited was abandoned (:func:`abandoned`):
    grpc.aio closes a suspended response generator only later, and the thread-pool server
    lets a behaviour run on after the client has gone."""

    __slots__ = ("call", "code", "context", "deferred", "outcome")

    def __init__(self, call: Call, context: Any) -> None:
        self.call = call
        self.context = context
        self.outcome: str | None = None
        self.code = ""
        # False when grpc refused the callback (the RPC had already ended): record at exit.
        self.deferred = True

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.outcome, self.code = ok_outcome(self.context)
        else:
            self.outcome, self.code = error_outcome(self.context, exc)
        if not self.deferred:
            self.done()

    def done(self, *_: object) -> None:
        """The RPC's done callback (aio passes the context, the thread-pool server nothing)."""
        if self.outcome is None or (self.outcome == "ok" and _sync_cancelled(self.context)):
            self.outcome, self.code = abandoned(self.context)
        self.call.finish(self.outcome, self.code)


def abandoned(context: Any) -> tuple[str, str]:
    """The outcome of a call that ended while its behaviour was still at work: its deadline
    passed (``timeout``, DEADLINE_EXCEEDED, as the client sees it) or the client cancelled. A
    cancel within the contract's slack of the deadline is the client's deadline: it runs from
    the call's start, the server's copy from the headers' arrival, so it fires first."""
    remaining = context.time_remaining()
    if remaining is not None and remaining <= DEADLINE_SLACK_S:
        return "timeout", "DEADLINE_EXCEEDED"
    return "cancelled", "CANCELLED"


def ok_outcome(context: Any) -> tuple[str, str]:
    """The outcome of a call whose handler returned; it may still have set a non-OK code."""
    code = context.code()
    if code is None:
        return "ok", "OK"
    name = code.name if isinstance(code, grpc.StatusCode) else str(code)
    return grpc_outcome(name), name


def error_outcome(context: Any, exc: BaseException) -> tuple[str, str]:
    """The outcome of a call whose handler raised: an abort carries its code; a cancelled task,
    a closed generator or a request stream that failed (thread-pool server: grpc.RpcError)
    mean the call was abandoned; anything else is a server error (UNKNOWN)."""
    if isinstance(exc, asyncio.CancelledError | GeneratorExit | grpc.RpcError):
        return abandoned(context)
    code = context.code()
    if isinstance(code, grpc.StatusCode) and code is not grpc.StatusCode.OK:
        return grpc_outcome(code.name), code.name
    return "server_error", "UNKNOWN"


def _sync_cancelled(context: Any) -> bool:
    """Whether the thread-pool server saw the client cancel this call, read once the RPC is over.
    A cancel fails a pending read, which that server takes for the end of the request stream,
    so an upload's behaviour can return its digest for a call already cancelled (counted ok
    before, in 1 of 8 runs of the test). Only the RPC's state tells the two apart, and grpc has
    no public accessor for it (``is_active()`` is False either way once the call is over); an
    aio context has no ``_state`` (the aio path confirms its calls in measure_aio.py)."""
    state = getattr(context, "_state", None)
    return getattr(state, "client", None) == "cancelled"

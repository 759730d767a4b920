"""Which metric kind each gRPC method is, and how a finished call's status becomes an outcome."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from wirelab.metrics import Call, grpc_outcome

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
# Unknown methods are counted under this kind so UNIMPLEMENTED shows up in the request counter;
# health and reflection are operational and not measured.
OTHER_KIND = "other"
UNMEASURED_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")


class Recorded:
    """``with Recorded(call, context):`` around a handler's work decides the call's outcome: OK
    (or the code the handler set) if the block completes, else by what it raised. The call is
    recorded by :meth:`done`, which the measured handler registers as the RPC's done callback,
    so the duration ends after grpc has sent the reply and the status, not when the handler
    returns. Until the block has exited the outcome reads "cancelled": a call that ends first
    was abandoned by the client (grpc.aio closes a suspended response generator only later)."""

    __slots__ = ("call", "code", "context", "deferred", "outcome")

    def __init__(self, call: Call, context: Any) -> None:
        self.call = call
        self.context = context
        self.outcome = "cancelled"
        self.code = "CANCELLED"
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
        self.call.finish(self.outcome, self.code)


def ok_outcome(context: Any) -> tuple[str, str]:
    """The outcome of a call whose handler returned; it may still have set a non-OK code."""
    code = context.code()
    if code is None:
        return "ok", "OK"
    name = code.name if isinstance(code, grpc.StatusCode) else str(code)
    return grpc_outcome(name), name


def error_outcome(context: Any, exc: BaseException) -> tuple[str, str]:
    """The outcome of a call whose handler raised: an abort carries its code; a cancelled task
    or a closed generator means the client went away; anything else is a server error
    (UNKNOWN)."""
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return "cancelled", "CANCELLED"
    code = context.code()
    if isinstance(code, grpc.StatusCode) and code is not grpc.StatusCode.OK:
        return grpc_outcome(code.name), code.name
    return "server_error", "UNKNOWN"

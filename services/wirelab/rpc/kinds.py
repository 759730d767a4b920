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
    """``with Recorded(call, context):`` around a handler's work records the call once it ends:
    as OK (or the code the handler set) if the block completes, else by what it raised."""

    __slots__ = ("call", "context")

    def __init__(self, call: Call, context: Any) -> None:
        self.call = call
        self.context = context

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            finish_ok(self.call, self.context)
        else:
            finish_error(self.call, self.context, exc)


def finish_ok(call: Call, context: Any) -> None:
    """Record a call whose handler returned; it may still have set a non-OK code."""
    code = context.code()
    if code is None:
        call.finish("ok", "OK")
    else:
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        call.finish(grpc_outcome(name), name)


def finish_error(call: Call, context: Any, exc: BaseException) -> None:
    """Record a call whose handler raised: an abort carries its code; a cancelled task or a
    closed generator means the client went away; anything else is a server error (UNKNOWN)."""
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        call.finish("cancelled", "CANCELLED")
        return
    code = context.code()
    if isinstance(code, grpc.StatusCode) and code is not grpc.StatusCode.OK:
        call.finish(grpc_outcome(code.name), code.name)
    else:
        call.finish("server_error", "UNKNOWN")

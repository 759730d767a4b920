"""The REST routes: thin adapters from HTTP to the shared core, one per contract method."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, ParamSpec, TypeVar

from fastapi import APIRouter, Depends, Request, Response, WebSocket
from fastapi.responses import StreamingResponse
from starlette.requests import ClientDisconnect
from starlette.websockets import WebSocketDisconnect

from wirelab import core
from wirelab.core import CoreError, Limits, OrderTotals, PayloadBudget, StreamPlan
from wirelab.hops import DEADLINE_HEADER, Relay
from wirelab.rest import codec
from wirelab.rest.bodies import (
    JSON_UPLOAD_HOLDS,
    DrainedResponse,
    body_reader,
    check_declared_length,
)
from wirelab.rest.departure import until_gone, watched_from_thread
from wirelab.rest.models import Blob, BlobDigest, BlobUpload, OrderReply, OrderRequest
from wirelab.rest.protobuf import protobuf_orders
from wirelab.rest.streaming import StreamedResponse

P = ParamSpec("P")
R = TypeVar("R")
OCTETS = "application/octet-stream"
NDJSON = "application/x-ndjson"
_BINARY_BODY: dict[str, Any] = {
    "requestBody": {
        "required": False,  # no body is the empty blob
        "content": {OCTETS: {"schema": {"type": "string", "format": "binary"}}},
    }
}
_JSON_BLOB_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": BlobUpload.model_json_schema()}},
    }
}


def on_loop(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """Run a CPU-only handler on the event loop (async mode) instead of FastAPI's thread pool."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        return fn(*args, **kwargs)

    return run


def _reply(request: OrderRequest, totals: OrderTotals) -> OrderReply:
    order = request.order
    return OrderReply(
        order_id=order.order_id,
        item_count=totals.item_count,
        total_cents=totals.total_cents,
        word_count=totals.word_count,
        char_count=totals.char_count,
        order=order,
    )


def _blob_headers(size: int) -> dict[str, str]:
    return {"x-wirelab-size": str(size), "x-wirelab-sha256": core.digest(size)}


def _deadline(request: Request) -> float | None:
    """The caller's remaining budget in seconds, when it sent one (a relay hop does)."""
    text = request.headers.get(DEADLINE_HEADER)
    if text is None:
        return None
    if not text.isdigit():
        raise CoreError(f"{DEADLINE_HEADER} must be a whole number of milliseconds (got {text!r})")
    return int(text) / 1000


def build_router(
    limits: Limits, sync: bool, budget: PayloadBudget, relay: Relay[Any, Any] | None = None
) -> APIRouter:
    """All contract routes. ``sync`` picks plain ``def`` handlers, run in FastAPI's thread pool;
    one-message uploads and downloads hold their body's bytes in ``budget`` (bodies.py); with
    ``relay``, orders are also sent on to downstream services (wirelab.hops)."""
    router = APIRouter(prefix="/v1")
    cpu = (lambda fn: fn) if sync else on_loop
    # base64 makes a JSON body 4/3 of the blob; allow that plus the JSON around it.
    json_limit = (limits.max_payload_bytes + 2) // 3 * 4 + 1024

    async def orders_async(request: OrderRequest, http: Request) -> OrderReply:
        work = core.process_order_async(request.order, request.work_ms, request.count_words, limits)
        # Only an order with work to do watches for its client's departure (a task each).
        return _reply(request, await (until_gone(http, work) if request.work_ms else work))

    async def orders_relayed(request: OrderRequest, http: Request) -> OrderReply:
        assert relay is not None
        o = request.order
        # Splitting, the downstreams count the words: this hop only adds their counts up.
        counts = request.count_words and relay.splitter is None
        own = _reply(request, core.check_order(o, request.work_ms, counts, limits))
        # A departed client's calls downstream are cancelled too, as gRPC's are.
        work = relay.order(request, own, request.work_ms, _deadline(http))
        reply: OrderReply = await until_gone(http, work)
        return reply

    def orders_sync(request: OrderRequest, http: Request) -> OrderReply:
        o = request.order
        # Only an order with work to do watches for its client's departure (a hop to the loop).
        gone = watched_from_thread(http) if request.work_ms else None
        totals = core.process_order(o, request.work_ms, request.count_words, limits, gone)
        if gone is not None and gone.is_set():
            raise ClientDisconnect
        return _reply(request, totals)

    async def ndjson_async(plan: StreamPlan, encoded: bytes) -> AsyncIterator[bytes]:
        async for seq, _ in plan.messages_async():
            yield codec.ndjson_line(seq, encoded)

    def ndjson_sync(plan: StreamPlan, encoded: bytes) -> Iterator[bytes]:
        for seq, _ in plan.messages():
            yield codec.ndjson_line(seq, encoded)

    def stream(count: int = 0, size: int = 0, interval_ms: int = 0) -> StreamingResponse:
        plan = StreamPlan.build(count, size, interval_ms, limits)
        encoded = codec.b64(plan.data)
        lines = ndjson_sync(plan, encoded) if sync else ndjson_async(plan, encoded)
        return StreamedResponse(lines, media_type=NDJSON)

    def upload(body: bytes = Depends(body_reader(limits.max_payload_bytes, budget))) -> BlobDigest:
        size, sha = core.hash_blob(body, limits)
        return BlobDigest(size=size, sha256=sha)

    def upload_json(
        body: bytes = Depends(body_reader(json_limit, budget, JSON_UPLOAD_HOLDS)),
    ) -> BlobDigest:
        text = BlobUpload.model_validate_json(body).data
        size, sha = core.hash_blob(codec.decode_b64(text, "data"), limits)
        return BlobDigest(size=size, sha256=sha)

    async def upload_stream(request: Request) -> BlobDigest:
        # Async in both modes: Starlette exposes the body as a stream to async code only.
        check_declared_length(request, limits.max_payload_bytes)
        hasher = core.Hasher(limits)
        async for part in request.stream():
            hasher.update(part)
        return BlobDigest(size=hasher.size, sha256=hasher.hexdigest())

    def download(size: int = 0) -> Response:
        core.check_blob_size(size, limits)
        budget.acquire(size)  # released by the response once its body has left the process
        try:
            body = core.payload(size)
            headers = _blob_headers(size)
        except BaseException:
            budget.release(size)
            raise
        return DrainedResponse([body], budget, size, OCTETS, headers)

    def download_json(size: int = 0) -> Response:
        core.check_blob_size(size, limits)
        # The blob and its base64 exist together while it is encoded.
        held = size + (size + 2) // 3 * 4
        budget.acquire(held)
        try:
            # Blob's JSON in three parts around the base64, sent in turn: through pydantic the
            # text was held as bytes, str, the model's JSON and its encoding (4x the blob).
            data = codec.b64(core.payload(size))
            tail = b'","size":%d,"sha256":"%s"}' % (size, core.digest(size).encode())
        except BaseException:
            budget.release(held)
            raise
        return DrainedResponse([b'{"data":"', data, tail], budget, held, "application/json")

    async def chunks_async(size: int, chunk_size: int) -> AsyncIterator[bytes]:
        for chunk in core.chunks(size, chunk_size):
            yield chunk

    def download_stream(size: int = 0, chunk_size: int = 0) -> StreamingResponse:
        core.check_blob_size(size, limits)
        step = core.check_chunk_size(chunk_size, limits)
        body = core.chunks(size, step) if sync else chunks_async(size, step)
        return StreamedResponse(body, media_type=OCTETS, headers=_blob_headers(size))

    async def pingpong(websocket: WebSocket) -> None:
        await websocket.accept()
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") is None:
                    raise CoreError("ping frames must be JSON text frames")
                try:
                    answer = codec.answer_ping(message["text"], limits)
                except RecursionError:
                    # json.loads recurses once per nesting level: a frame of 100,000 brackets
                    # ran out of stack and went uncaught (no close frame, counted 500).
                    raise CoreError("ping frame is nested too deeply") from None
                await websocket.send_text(answer)
        except WebSocketDisconnect:
            return
        except CoreError as exc:
            # 1009 = message too big, 1007 = invalid payload data (RFC 6455 section 7.4.1).
            await websocket.close(code=1009 if exc.over_limit else 1007, reason=exc.message[:120])

    # One name in both modes, so the OpenAPI document (operationId, summary) does not change.
    orders = orders_relayed if relay is not None else orders_sync if sync else orders_async
    router.add_api_route(
        "/orders", orders, methods=["POST"], response_model=OrderReply, name="process_order",
        route_class_override=None if relay is not None else protobuf_orders(limits, sync),
    )  # fmt: skip
    router.get("/stream", response_class=StreamingResponse)(cpu(stream))
    router.post("/blobs", response_model=BlobDigest, openapi_extra=_BINARY_BODY)(cpu(upload))
    router.post("/blobs/json", response_model=BlobDigest, openapi_extra=_JSON_BLOB_BODY)(
        cpu(upload_json)
    )
    router.post("/blobs/stream", response_model=BlobDigest, openapi_extra=_BINARY_BODY)(
        upload_stream
    )
    router.get("/blobs", response_class=Response)(cpu(download))
    router.get("/blobs/json", response_model=Blob)(cpu(download_json))
    router.get("/blobs/stream", response_class=StreamingResponse)(cpu(download_stream))
    router.websocket("/pingpong")(pingpong)
    return router

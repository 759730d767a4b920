"""The grpc.aio servicer: thin async adapters from the contract to the shared core."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from wirelab import core
from wirelab.core import Limits, StreamPlan
from wirelab.hops import DownstreamError, Relay
from wirelab.rpc import replies
from wirelab.rpc.errors import aborts_on_core_error
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

Context = grpc.aio.ServicerContext[object, object]


class AsyncWireLab(pb_grpc.WireLabServicer):
    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    @aborts_on_core_error
    async def ProcessOrder(self, request: pb.OrderRequest, context: Context) -> pb.OrderReply:
        r = request
        totals = await core.process_order_async(r.order, r.work_ms, r.count_words, self.limits)
        return replies.order_reply(request, totals)

    @aborts_on_core_error
    async def StreamMessages(
        self, request: pb.StreamRequest, context: Context
    ) -> AsyncIterator[pb.StreamMessage]:
        plan = StreamPlan.build(request.count, request.size, request.interval_ms, self.limits)
        async for seq, data in plan.messages_async():
            yield pb.StreamMessage(seq=seq, payload=data)

    @aborts_on_core_error
    async def Upload(self, request: pb.Blob, context: Context) -> pb.BlobDigest:
        return replies.upload_digest(request, self.limits)

    @aborts_on_core_error
    async def UploadStream(
        self, request_iterator: AsyncIterator[pb.Chunk], context: Context
    ) -> pb.BlobDigest:
        hasher = core.Hasher(self.limits)
        async for chunk in request_iterator:
            hasher.update(chunk.data)
        return replies.hasher_digest(hasher)

    @aborts_on_core_error
    async def Download(self, request: pb.BlobRequest, context: Context) -> pb.Blob:
        return replies.download_blob(request, self.limits)

    @aborts_on_core_error
    async def DownloadStream(
        self, request: pb.BlobRequest, context: Context
    ) -> AsyncIterator[pb.Chunk]:
        metadata, step = replies.chunk_plan(request, self.limits)
        await context.send_initial_metadata(metadata)
        for data in core.chunks(request.size, step):
            yield pb.Chunk(data=data)

    @aborts_on_core_error
    async def PingPong(
        self, request_iterator: AsyncIterator[pb.Ping], context: Context
    ) -> AsyncIterator[pb.Pong]:
        async for ping in request_iterator:
            yield replies.pong(ping, self.limits)


class RelayingWireLab(AsyncWireLab):
    """The aio servicer of a hop with downstreams: each order is also sent on (wirelab.hops)."""

    def __init__(self, limits: Limits, relay: Relay[pb.OrderRequest, pb.OrderReply]) -> None:
        super().__init__(limits)
        self.relay = relay

    @aborts_on_core_error
    async def ProcessOrder(self, request: pb.OrderRequest, context: Context) -> pb.OrderReply:
        r = request
        # Splitting, the downstreams count the words: this hop only adds their counts up.
        counts = r.count_words and self.relay.splitter is None
        own = replies.order_reply(r, core.check_order(r.order, r.work_ms, counts, self.limits))
        try:
            # The caller's deadline (grpc-timeout) bounds the downstream calls: it propagates.
            return await self.relay.order(r, own, r.work_ms, context.time_remaining())
        except DownstreamError as exc:
            # UNAVAILABLE for a downstream with no connection or an error (gRPC's mapping of
            # HTTP 502/503), DEADLINE_EXCEEDED when it ran out of time; the message names it.
            code = _DOWNSTREAM_CODES.get(exc.reason, grpc.StatusCode.UNAVAILABLE)
            await context.abort(code, exc.message)


_DOWNSTREAM_CODES = {"timeout": grpc.StatusCode.DEADLINE_EXCEEDED}

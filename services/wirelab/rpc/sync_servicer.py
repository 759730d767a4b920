"""The thread-pool servicer (WIRELAB_GRPC_SERVER=sync): blocking adapters to the same core."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from wirelab import core
from wirelab.core import Limits, StreamPlan
from wirelab.rpc import replies
from wirelab.rpc.errors import aborts_on_core_error
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc


class SyncWireLab(pb_grpc.WireLabServicer):
    def __init__(self, limits: Limits) -> None:
        self.limits = limits

    @aborts_on_core_error
    def ProcessOrder(
        self, request: pb.OrderRequest, context: grpc.ServicerContext
    ) -> pb.OrderReply:
        r = request
        return replies.order_reply(
            r, core.process_order(r.order, r.work_ms, r.count_words, self.limits)
        )

    @aborts_on_core_error
    def StreamMessages(
        self, request: pb.StreamRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.StreamMessage]:
        plan = StreamPlan.build(request.count, request.size, request.interval_ms, self.limits)
        for seq, data in plan.messages():
            yield pb.StreamMessage(seq=seq, payload=data)

    @aborts_on_core_error
    def Upload(self, request: pb.Blob, context: grpc.ServicerContext) -> pb.BlobDigest:
        return replies.upload_digest(request, self.limits)

    @aborts_on_core_error
    def UploadStream(
        self, request_iterator: Iterator[pb.Chunk], context: grpc.ServicerContext
    ) -> pb.BlobDigest:
        hasher = core.Hasher(self.limits)
        for chunk in request_iterator:
            hasher.update(chunk.data)
        return replies.hasher_digest(hasher)

    @aborts_on_core_error
    def Download(self, request: pb.BlobRequest, context: grpc.ServicerContext) -> pb.Blob:
        return replies.download_blob(request, self.limits)

    @aborts_on_core_error
    def DownloadStream(
        self, request: pb.BlobRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.Chunk]:
        metadata, step = replies.chunk_plan(request, self.limits)
        context.send_initial_metadata(metadata)
        yield from (pb.Chunk(data=data) for data in core.chunks(request.size, step))

    @aborts_on_core_error
    def PingPong(
        self, request_iterator: Iterator[pb.Ping], context: grpc.ServicerContext
    ) -> Iterator[pb.Pong]:
        # A generator, so a bad ping raised mid-stream reaches the CoreError mapping.
        for ping in request_iterator:
            yield replies.pong(ping, self.limits)

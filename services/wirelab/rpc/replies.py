"""Protobuf replies built from core results; shared by the aio and the sync servicer."""

from __future__ import annotations

from wirelab import core
from wirelab.core import Hasher, Limits, OrderTotals
from wirelab.v1 import wirelab_pb2 as pb

OCTET_METADATA = ("x-wirelab-size", "x-wirelab-sha256")


def order_reply(request: pb.OrderRequest, totals: OrderTotals) -> pb.OrderReply:
    return pb.OrderReply(
        order_id=request.order.order_id,
        item_count=totals.item_count,
        total_cents=totals.total_cents,
        word_count=totals.word_count,
        char_count=totals.char_count,
        order=request.order,
    )


def upload_digest(blob: pb.Blob, limits: Limits) -> pb.BlobDigest:
    size, sha = core.hash_blob(blob.data, limits)
    return pb.BlobDigest(size=size, sha256=sha)


def hasher_digest(hasher: Hasher) -> pb.BlobDigest:
    return pb.BlobDigest(size=hasher.size, sha256=hasher.hexdigest())


def download_blob(request: pb.BlobRequest, limits: Limits) -> pb.Blob:
    size = core.check_blob_size(request.size, limits)
    return pb.Blob(data=core.payload(size), size=size, sha256=core.digest(size))


def chunk_plan(request: pb.BlobRequest, limits: Limits) -> tuple[tuple[tuple[str, str], ...], int]:
    """Initial metadata (size and SHA-256 travel first) and the validated chunk size."""
    size = core.check_blob_size(request.size, limits)
    step = core.check_chunk_size(request.chunk_size, limits)
    metadata = tuple(zip(OCTET_METADATA, (str(size), core.digest(size)), strict=True))
    return metadata, step


def pong(ping: pb.Ping, limits: Limits) -> pb.Pong:
    seq, data = core.pong(ping.seq, ping.payload, limits)
    return pb.Pong(seq=seq, payload=data)

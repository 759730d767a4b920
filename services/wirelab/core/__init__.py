"""The shared business core: what a request does, independent of the transport carrying it."""

from wirelab.core.admission import Overloaded, PayloadBudget
from wirelab.core.blobs import (
    Hasher,
    check_blob_size,
    check_chunk_size,
    chunks,
    digest,
    hash_blob,
    payload,
    payload_slice,
)
from wirelab.core.limits import (
    CoreError,
    Limits,
    check_order_size,
    check_range,
    order_too_large,
)
from wirelab.core.orders import (
    OrderTotals,
    check_order,
    order_totals,
    process_order,
    process_order_async,
    split_note,
    work_async,
)
from wirelab.core.streams import StreamPlan, pong

__all__ = [
    "CoreError",
    "Hasher",
    "Limits",
    "OrderTotals",
    "Overloaded",
    "PayloadBudget",
    "StreamPlan",
    "check_blob_size",
    "check_chunk_size",
    "check_order",
    "check_order_size",
    "check_range",
    "chunks",
    "digest",
    "hash_blob",
    "order_too_large",
    "order_totals",
    "payload",
    "payload_slice",
    "pong",
    "process_order",
    "process_order_async",
    "split_note",
    "work_async",
]

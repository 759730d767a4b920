"""What the users send and expect back, built once per size so both protocols carry equal data."""

from __future__ import annotations

import base64
import functools
from typing import Any

from wirelab.core import chunks, digest, payload

from wirelab_locust.timing import WrongAnswer

__all__ = [
    "check_blob", "chunks", "expected_totals", "order", "order_request", "payload", "payload_b64",
]  # fmt: skip

_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


@functools.lru_cache(maxsize=8)
def payload_b64(size: int) -> str:
    """The deterministic payload as base64 text, for the JSON kinds and WebSocket frames."""
    return base64.b64encode(payload(size)).decode("ascii")


def order(user_id: int, note_words: int) -> dict[str, Any]:
    """A small order (three items, two attributes, a note): JSON body and protobuf input."""
    return {
        "order_id": f"order-{user_id}",
        "customer_id": f"customer-{user_id % 97}",
        "items": [
            {"sku": "sku-1", "quantity": 2, "unit_price_cents": 1250},
            {"sku": "sku-2", "quantity": 1, "unit_price_cents": 899},
            {"sku": "sku-3", "quantity": 5, "unit_price_cents": 120},
        ],
        "attributes": {"channel": "locust", "region": "lab"},
        "note": " ".join(_WORDS[i % len(_WORDS)] for i in range(note_words)),
    }


def order_request(work_ms: int = 0, note_words: int = 16) -> dict[str, Any]:
    """The small order call's request as JSON (the REST body; proto JSON names for gRPC), as
    the benchmarks' other generators send it: one order, ``work_ms`` of server work."""
    return {"order": order(0, note_words), "work_ms": work_ms, "count_words": False}


def expected_totals(body: dict[str, Any]) -> tuple[int, int]:
    """(item_count, total_cents) the server must answer for ``body``."""
    items = body["items"]
    return len(items), sum(i["quantity"] * i["unit_price_cents"] for i in items)


def check_blob(want: int, size: int, sha256: str) -> None:
    """A blob answer is right only if both its size and its SHA-256 match the payload asked for."""
    if size != want:
        raise WrongAnswer(f"size {size}, want {want}")
    if sha256 != digest(want):
        raise WrongAnswer(f"sha256 {sha256[:16]} is not the sha256 of payload({want})")

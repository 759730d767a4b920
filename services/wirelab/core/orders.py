"""Request-response work: order totals, the optional word count and the simulated delay."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from wirelab.core.limits import INT64_MAX, INT64_MIN, UINT32_MAX, CoreError, Limits, check_range


class LineItemLike(Protocol):
    """What the core reads from a line item: a protobuf LineItem or the REST model."""

    @property
    def quantity(self) -> int: ...
    @property
    def unit_price_cents(self) -> int: ...


class OrderLike(Protocol):
    """What the core reads from an order: a protobuf Order or the REST model."""

    @property
    def items(self) -> Iterable[LineItemLike]: ...
    @property
    def note(self) -> str: ...


@dataclass(frozen=True, slots=True)
class OrderTotals:
    item_count: int
    total_cents: int
    word_count: int
    char_count: int


def order_totals(order: OrderLike, count_words: bool) -> OrderTotals:
    """Sum the order; count words and characters of its note when asked (the CPU-bound option)."""
    item_count = 0
    total = 0
    for item in order.items:
        quantity, price = item.quantity, item.unit_price_cents
        # REST models are plain ints; the proto's uint32/int64 ranges are enforced here so both
        # transports reject the same inputs.
        if not 0 <= quantity <= UINT32_MAX:
            raise CoreError(f"quantity must be between 0 and {UINT32_MAX} (got {quantity})")
        if not INT64_MIN <= price <= INT64_MAX:
            raise CoreError(f"unit_price_cents is outside the int64 range (got {price})")
        item_count += 1
        total += quantity * price
    if not INT64_MIN <= total <= INT64_MAX:
        raise CoreError("total_cents overflows int64")
    words = chars = 0
    if count_words:
        words, chars = len(order.note.split()), len(order.note)
    return OrderTotals(item_count, total, words, chars)


def split_note(note: str, parts: int) -> list[str]:
    """``note`` in ``parts`` pieces of about equal length, cut only at whitespace, so no word
    straddles two: the pieces' word and character counts add up to the note's (the primary/
    replica study's split of a word-count job). Pieces may be empty when words are few."""
    cuts = [0]
    for i in range(1, parts):
        at = max(cuts[-1], len(note) * i // parts)
        while at < len(note) and not note[at].isspace():
            at += 1
        cuts.append(at)
    cuts.append(len(note))
    return [note[a:b] for a, b in itertools.pairwise(cuts)]


def check_order(order: OrderLike, work_ms: int, count_words: bool, limits: Limits) -> OrderTotals:
    """Validate an order and compute its totals, without the simulated work (a relay hop checks
    an order this way before sending it on)."""
    check_range("work_ms", work_ms, limits.max_work_ms)
    return order_totals(order, count_words)


def process_order(
    order: OrderLike,
    work_ms: int,
    count_words: bool,
    limits: Limits,
    stop: threading.Event | None = None,
) -> OrderTotals:
    """Thread-pool servers: validate, block for ``work_ms`` (less once ``stop`` is set: the
    caller has gone and then checks it), then compute."""
    totals = check_order(order, work_ms, count_words, limits)
    if work_ms:
        if stop is None:
            time.sleep(work_ms / 1000)
        else:
            stop.wait(work_ms / 1000)
    return totals


async def work_async(work_ms: int) -> None:
    """The simulated business delay, awaited without blocking the event loop."""
    if work_ms:
        await asyncio.sleep(work_ms / 1000)


async def process_order_async(
    order: OrderLike, work_ms: int, count_words: bool, limits: Limits
) -> OrderTotals:
    """Event-loop servers: validate, await ``work_ms`` without blocking the loop, then compute."""
    totals = check_order(order, work_ms, count_words, limits)
    await work_async(work_ms)
    return totals

"""Server-stream message generation and the ping-pong echo, paced for both server models."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

from wirelab.core.blobs import payload
from wirelab.core.limits import UINT64_MAX, CoreError, Limits, check_range


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """A validated stream request. Built eagerly so bad input fails before the stream starts."""

    count: int
    data: bytes
    interval_s: float

    @classmethod
    def build(cls, count: int, size: int, interval_ms: int, limits: Limits) -> StreamPlan:
        check_range("count", count, limits.max_stream_count)
        check_range("size", size, limits.max_message_bytes)
        check_range("interval_ms", interval_ms, limits.max_interval_ms)
        return cls(count, payload(size), interval_ms / 1000)

    def messages(self) -> Iterator[tuple[int, bytes]]:
        """(seq, payload) pairs for thread-pool servers; sleeps between messages."""
        for seq in range(self.count):
            if seq and self.interval_s:
                time.sleep(self.interval_s)
            yield seq, self.data

    async def messages_async(self) -> AsyncIterator[tuple[int, bytes]]:
        """(seq, payload) pairs for event-loop servers; awaits between messages."""
        for seq in range(self.count):
            if seq and self.interval_s:
                await asyncio.sleep(self.interval_s)
            yield seq, self.data


def pong(seq: int, data: bytes, limits: Limits) -> tuple[int, bytes]:
    """Answer one ping: the same seq and payload, after the same checks on both transports."""
    if not 0 <= seq <= UINT64_MAX:
        raise CoreError(f"seq must be a non-negative 64-bit integer (got {seq})")
    check_range("payload size", len(data), limits.max_message_bytes)
    return seq, data

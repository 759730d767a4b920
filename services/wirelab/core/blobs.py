"""Deterministic payloads, their cached digests, chunking and incremental hashing of uploads."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator

from wirelab.core.limits import CoreError, Limits, check_range

# 1 MiB pattern that every payload repeats. SHAKE-256 output: incompressible (no transport gets a
# compression bonus) yet the same bytes in every process and language, built once in a few ms.
_BLOCK = hashlib.shake_256(b"wirelab").digest(1024 * 1024)


def payload_slice(offset: int, length: int) -> bytes:
    """Bytes ``offset:offset+length`` of the infinite payload stream."""
    start = offset % len(_BLOCK)
    if start + length <= len(_BLOCK):
        return _BLOCK[start : start + length]
    rotated = _BLOCK[start:] + _BLOCK[:start]
    whole, rest = divmod(length, len(rotated))
    return rotated * whole + rotated[:rest]


def payload(size: int) -> bytes:
    """The deterministic payload of ``size`` bytes: the same bytes every time for a size."""
    return payload_slice(0, size)


def chunks(size: int, chunk_size: int) -> Iterator[bytes]:
    """``payload(size)`` cut into ``chunk_size`` pieces, without building the whole payload."""
    for offset in range(0, size, chunk_size):
        yield payload_slice(offset, min(chunk_size, size - offset))


@functools.lru_cache(maxsize=256)
def digest(size: int) -> str:
    """SHA-256 (lowercase hex) of ``payload(size)``, cached per size."""
    h = hashlib.sha256()
    for piece in chunks(size, len(_BLOCK)):
        h.update(piece)
    return h.hexdigest()


def check_blob_size(size: int, limits: Limits) -> int:
    return check_range("size", size, limits.max_payload_bytes)


def check_chunk_size(chunk_size: int, limits: Limits) -> int:
    """Validate a requested chunk size; 0 means the server default."""
    if chunk_size == 0:
        return limits.chunk_bytes
    if chunk_size < 0:
        raise CoreError(f"chunk_size must not be negative (got {chunk_size})")
    return check_range("chunk_size", chunk_size, limits.max_message_bytes)


class Hasher:
    """Hashes an upload piece by piece and refuses it once it grows past the payload limit."""

    __slots__ = ("_h", "limit", "size")

    def __init__(self, limits: Limits) -> None:
        self._h = hashlib.sha256()
        self.limit = limits.max_payload_bytes
        self.size = 0

    def update(self, data: bytes | memoryview) -> None:
        self.size += len(data)
        if self.size > self.limit:
            raise CoreError(f"upload is over the limit of {self.limit} bytes", over_limit=True)
        self._h.update(data)

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def hash_blob(data: bytes | memoryview, limits: Limits) -> tuple[int, str]:
    """Size and SHA-256 of one whole upload."""
    hasher = Hasher(limits)
    hasher.update(data)
    return hasher.size, hasher.hexdigest()

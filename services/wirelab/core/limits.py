"""Input limits shared by both transports, and the one error type the core raises."""

from __future__ import annotations

# Limits, the largest values the services accept, are fields generated from the knob table
# (contract/knobs.json, its "limits" knobs, each default's reason with it).
from wirelab.knobfields import Limits as Limits

MIB = 1024 * 1024
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class CoreError(ValueError):
    """Bad input. ``over_limit`` distinguishes "too large" (413 / RESOURCE_EXHAUSTED) from
    "malformed" (400 / INVALID_ARGUMENT); each transport maps it in one place."""

    def __init__(self, message: str, *, over_limit: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.over_limit = over_limit


def order_too_large(limits: Limits) -> CoreError:
    """The refusal of an encoded order (REST JSON body, gRPC message) over ``max_order_bytes``.
    It leaves the size out: REST refuses a body sent without a length as soon as the bytes read so
    far pass the limit, before it knows the whole size."""
    return CoreError(f"order is over the limit of {limits.max_order_bytes} bytes", over_limit=True)


def check_order_size(nbytes: int, limits: Limits) -> None:
    """Raise :func:`order_too_large` if an order encoded in ``nbytes`` is over the limit."""
    if nbytes > limits.max_order_bytes:
        raise order_too_large(limits)


def check_range(name: str, value: int, maximum: int) -> int:
    """Return ``value`` if 0 <= value <= maximum, else raise a CoreError naming the field."""
    if value < 0:
        raise CoreError(f"{name} must not be negative (got {value})")
    if value > maximum:
        raise CoreError(f"{name}={value} is over the limit of {maximum}", over_limit=True)
    return value

"""Input limits shared by both transports, and the one error type the core raises."""

from __future__ import annotations

from dataclasses import dataclass

from wirelab.contract.knobs import DEFAULTS as _D

MIB = 1024 * 1024
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Limits:
    """Largest values the services accept; the defaults are the knob table's
    (contract/knobs.json, which the Node.js services read too)."""

    max_payload_bytes: int = _D["max_payload_bytes"]
    chunk_bytes: int = _D["chunk_bytes"]
    max_stream_count: int = _D["max_stream_count"]
    max_message_bytes: int = _D["max_message_bytes"]
    max_interval_ms: int = _D["max_interval_ms"]
    max_work_ms: int = _D["max_work_ms"]
    # An order is small JSON or protobuf; without a cap a 300 MiB order was accepted (1.25 GB
    # RSS) and counting the words of a 50 MiB note blocked the event loop for about 4 s.
    max_order_bytes: int = _D["max_order_bytes"]
    # Memory all one-message payload calls in flight may hold at once (0: no admission control):
    # each call is charged its measured peak, not its payload (a gRPC upload holds its message 4
    # times). 1.25 GiB admits the full scenario's four concurrent 64 MiB uploads (4 x 4 x 64 MiB
    # plus framing) and leaves the lab's 2 GiB container room for the interpreter and the rest.
    payload_budget_bytes: int = _D["payload_budget_bytes"]


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

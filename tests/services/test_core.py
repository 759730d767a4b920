"""The shared core: deterministic payloads, digests, chunking, hashing, orders, limits, knobs."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest
from wirelab import core, settings
from wirelab.core import CoreError, Limits, StreamPlan

LIMITS = Limits(max_payload_bytes=10_000, max_message_bytes=100, max_stream_count=5)


@pytest.mark.parametrize("size", [0, 1, 31, 1024 * 1024, 1024 * 1024 + 7, 3 * 1024 * 1024 + 5])
def test_payload_is_deterministic_and_digest_matches(size: int) -> None:
    data = core.payload(size)
    assert len(data) == size
    assert data == core.payload(size)
    assert hashlib.sha256(data).hexdigest() == core.digest(size)


@pytest.mark.parametrize("chunk", [1, 1000, 1024 * 1024, 5 * 1024 * 1024])
def test_chunks_concatenate_to_the_payload(chunk: int) -> None:
    size = 2 * 1024 * 1024 + 3
    pieces = list(core.chunks(size, chunk))
    assert b"".join(pieces) == core.payload(size)
    assert all(len(p) == chunk for p in pieces[:-1])


def test_payload_is_not_trivially_compressible() -> None:
    data = core.payload(4096)
    assert len(set(data)) > 200
    assert data[:2048] != data[2048:]


def test_hasher_counts_hashes_and_refuses_oversize() -> None:
    hasher = core.Hasher(LIMITS)
    hasher.update(b"abc")
    hasher.update(memoryview(b"def"))
    assert (hasher.size, hasher.hexdigest()) == (6, hashlib.sha256(b"abcdef").hexdigest())
    with pytest.raises(CoreError) as raised:
        hasher.update(b"x" * 10_000)
    assert raised.value.over_limit


def test_hash_blob_whole_upload() -> None:
    assert core.hash_blob(b"abc", LIMITS) == (3, hashlib.sha256(b"abc").hexdigest())


@pytest.mark.parametrize(
    ("count", "size", "interval", "over_limit"),
    [(-1, 0, 0, False), (0, -5, 0, False), (6, 0, 0, True), (1, 101, 0, True), (1, 1, 10**9, True)],
)
def test_stream_plan_rejects_bad_requests(
    count: int, size: int, interval: int, over_limit: bool
) -> None:
    with pytest.raises(CoreError) as raised:
        StreamPlan.build(count, size, interval, LIMITS)
    assert raised.value.over_limit is over_limit


def test_stream_plan_messages_and_pacing() -> None:
    plan = StreamPlan.build(3, 10, 1, LIMITS)
    assert [(seq, len(data)) for seq, data in plan.messages()] == [(0, 10), (1, 10), (2, 10)]


async def test_stream_plan_async_messages() -> None:
    plan = StreamPlan.build(2, 4, 0, LIMITS)
    assert [seq async for seq, _ in plan.messages_async()] == [0, 1]


def _order(items: list[tuple[int, int]], note: str = "") -> SimpleNamespace:
    lines = [SimpleNamespace(quantity=q, unit_price_cents=p) for q, p in items]
    return SimpleNamespace(items=lines, note=note)


def test_order_totals_and_word_count() -> None:
    totals = core.order_totals(_order([(2, 150), (1, -50)], "two  words\n"), count_words=True)
    assert (totals.item_count, totals.total_cents, totals.word_count, totals.char_count) == (
        2,
        250,
        2,
        11,
    )
    assert core.order_totals(_order([], "x y"), count_words=False).word_count == 0


@pytest.mark.parametrize("items", [[(-1, 1)], [(2**32, 1)], [(1, 2**63)], [(2**32 - 1, 2**62)]])
def test_order_rejects_out_of_range_values(items: list[tuple[int, int]]) -> None:
    with pytest.raises(CoreError):
        core.order_totals(_order(items), count_words=False)


def test_process_order_sleeps_and_checks_work_ms() -> None:
    with pytest.raises(CoreError) as raised:
        core.process_order(_order([]), 10**6, False, LIMITS)
    assert raised.value.over_limit
    assert core.process_order(_order([(1, 5)]), 1, False, LIMITS).total_cents == 5


async def test_process_order_async() -> None:
    totals = await core.process_order_async(_order([(3, 5)]), 1, False, LIMITS)
    assert totals.total_cents == 15


def test_pong_checks_seq_and_size() -> None:
    assert core.pong(7, b"x", LIMITS) == (7, b"x")
    with pytest.raises(CoreError):
        core.pong(-1, b"", LIMITS)
    with pytest.raises(CoreError):
        core.pong(1, b"x" * 101, LIMITS)


def test_chunk_size_zero_means_default() -> None:
    assert core.check_chunk_size(0, Limits(chunk_bytes=123)) == 123
    with pytest.raises(CoreError):
        core.check_chunk_size(-1, LIMITS)


def test_order_size_limit() -> None:
    limits = Limits(max_order_bytes=100)
    core.check_order_size(100, limits)
    with pytest.raises(CoreError, match="order is over the limit of 100 bytes") as refused:
        core.check_order_size(101, limits)
    assert refused.value.over_limit
    assert settings.load([], environ={}).limits.max_order_bytes == 1024 * 1024
    loaded = settings.load(["--max-order-bytes", "5"], environ={})
    assert loaded.limits.max_order_bytes == 5


def test_settings_from_env_and_flags() -> None:
    env = {"WIRELAB_REST_PORT": "9000", "WIRELAB_METRICS": "off", "WIRELAB_MAX_WORK_MS": "5"}
    loaded = settings.load(["--grpc-server", "sync"], environ=env)
    assert (loaded.rest_port, loaded.metrics, loaded.grpc_server) == (9000, False, "sync")
    assert loaded.limits.max_work_ms == 5
    assert loaded.grpc_max_message_bytes == 256 * 1024 * 1024 + 1024 * 1024
    assert settings.load([], environ={}) == settings.Settings()


@pytest.mark.parametrize(
    "env", [{"WIRELAB_REST_PORT": "x"}, {"WIRELAB_METRICS": "maybe"}, {"WIRELAB_GRPC_PORT": "-1"}]
)
def test_settings_reject_bad_knobs(env: dict[str, str]) -> None:
    with pytest.raises(SystemExit):
        settings.load([], environ=env)

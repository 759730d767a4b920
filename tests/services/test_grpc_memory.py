"""The payload budget on a real gRPC process: concurrent large calls past it are refused at
once, counted, and the process's peak RSS stays bounded, one-message uploads' receipt included."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from wirelab import core
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.services.proxy import Proxy
from tests.services.test_integration import Service, start

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
SIZE = 32 * MIB
# Room for one call of SIZE at a time: a call is charged its peak, up to 4x its payload.
BUDGET = 4 * SIZE + MIB
# How long the proxy holds the large upload mid-message, and the small one's deadline meanwhile:
# served in milliseconds when it need not wait.
HOLD_S = 6.0
WAIT_S = 2.0
OPTIONS = [
    ("grpc.max_receive_message_length", 2 * SIZE),
    ("grpc.max_send_message_length", 2 * SIZE),
]


def peak_rss(service: Service) -> int:
    """The kernel's high-water mark of the process's resident set (VmHWM), in bytes."""
    status = Path(f"/proc/{service.proc.pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kib) * 1024


@pytest.fixture(params=["aio", "sync"])
def budgeted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    env = {
        "WIRELAB_GRPC_SERVER": request.param,
        "WIRELAB_PAYLOAD_BUDGET_BYTES": str(BUDGET),
        "WIRELAB_MAX_PAYLOAD_BYTES": str(SIZE),
    }
    service = start("wirelab.rpc", tmp_path, env)
    yield service
    assert service.stop() == 0


def _at_once(
    service: Service, calls: int, call: Callable[[pb_grpc.WireLabStub], object]
) -> list[str]:
    """Run ``calls`` copies of ``call`` at once, each on a channel of its own; their codes."""
    channels = [
        grpc.insecure_channel(f"127.0.0.1:{service.port}", options=OPTIONS) for _ in range(calls)
    ]
    stubs = [pb_grpc.WireLabStub(channel) for channel in channels]
    for stub in stubs:  # connected and warm before the burst
        stub.Download(pb.BlobRequest(size=1), timeout=10)
    codes: list[str] = []
    start_together = threading.Barrier(calls)

    def one(stub: pb_grpc.WireLabStub) -> None:
        start_together.wait()
        try:
            call(stub)
            codes.append("OK")
        except grpc.RpcError as exc:
            codes.append(exc.code().name)

    threads = [threading.Thread(target=one, args=(stub,)) for stub in stubs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for channel in channels:
        channel.close()
    return codes


def test_concurrent_downloads_past_the_budget(budgeted: Service) -> None:
    before = peak_rss(budgeted)
    codes = _at_once(
        budgeted, 12, lambda stub: stub.Download(pb.BlobRequest(size=SIZE), timeout=60)
    )
    grown = peak_rss(budgeted) - before
    assert len(codes) == 12 and set(codes) == {"OK", "RESOURCE_EXHAUSTED"}, codes
    # A one-message download needs about 3x its payload at its peak (wirelab perf grpc-memory)
    # and is charged that; the budget admits one at a time here.
    # Without it the twelve took the peak up by 160 MiB (aio) and 448 MiB (thread pool).
    assert grown <= 1.25 * BUDGET, grown / MIB
    refused = codes.count("RESOURCE_EXHAUSTED")
    counted = budgeted.wait_for(
        'wirelab_server_requests_total{code="RESOURCE_EXHAUSTED",kind="download",'
        'outcome="client_error",protocol="grpc"}',
        refused,
    )
    assert counted == refused


@pytest.fixture(params=[("aio", "on"), ("sync", "on"), ("aio", "off")], ids="-metrics-".join)
def receiving(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Service]:
    """A budgeted service, measured or not: unmeasured, Upload's message is read by rpc/receipts
    rather than by the measured behaviour."""
    mode, metrics = request.param
    env = {
        "WIRELAB_GRPC_SERVER": mode,
        "WIRELAB_METRICS": metrics,
        "WIRELAB_PAYLOAD_BUDGET_BYTES": str(BUDGET),
        "WIRELAB_MAX_PAYLOAD_BYTES": str(SIZE),
    }
    service = start("wirelab.rpc", tmp_path, env)
    yield service
    assert service.stop() == 0


def test_a_burst_of_uploads_is_received_a_few_at_a_time(receiving: Service) -> None:
    """However many one-message uploads arrive at once, grpc receives as many as the budget
    holds of the largest message (here one) while the rest wait, holding only their window."""
    blob = pb.Blob(data=core.payload(SIZE))
    before = peak_rss(receiving)
    codes = _at_once(receiving, 12, lambda stub: stub.Upload(blob, timeout=60))
    grown = peak_rss(receiving) - before
    assert len(codes) == 12 and "OK" in codes, codes
    assert set(codes) <= {"OK", "RESOURCE_EXHAUSTED"}, codes
    # The budget, one message in receipt (twice its limit: grpc's buffer and the bytes it hands
    # over) and as much again for the allocator and what the 4x charge misses. Measured (28 Nov,
    # one run each): +166-217 MiB; before the receipts were taken in turn +554-579 MiB, every
    # message received at once, and that grows with the burst.
    limit = SIZE + MIB
    assert grown <= BUDGET + 2 * (2 * limit), grown / MIB


def test_uploads_refused_past_the_budget_are_counted(budgeted: Service) -> None:
    blob = pb.Blob(data=core.payload(SIZE))
    codes = _at_once(budgeted, 8, lambda stub: stub.Upload(blob, timeout=60))
    # Whether any upload is refused depends on how the eight overlap at the server: received in
    # turn, each may fit the budget once the one before it is done. The downloads above hold the
    # refusal itself; here every refusal must be counted as one.
    assert len(codes) == 8 and "OK" in codes, codes
    assert set(codes) <= {"OK", "RESOURCE_EXHAUSTED"}, codes
    refused = codes.count("RESOURCE_EXHAUSTED")
    counted = budgeted.wait_for(
        'wirelab_server_requests_total{code="RESOURCE_EXHAUSTED",kind="upload",'
        'outcome="client_error",protocol="grpc"}',
        refused,
    )
    assert counted == refused


def test_an_upload_waits_its_turn_while_another_is_received(budgeted: Service) -> None:
    """With room for one message in receipt, a small upload arriving while a large one is read
    waits: held mid-message by a proxy, the large one keeps the turn, the small one's deadline
    passes while it waits (counted as a timeout), and the large one is then served."""
    proxy = Proxy(budgeted.port, "up", hold=HOLD_S)
    large: list[str] = []

    def send_large() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{proxy.port}", options=OPTIONS) as channel:
            reply = pb_grpc.WireLabStub(channel).Upload(
                pb.Blob(data=core.payload(SIZE)), timeout=60
            )
            large.append(str(reply.size))

    sender = threading.Thread(target=send_large)
    sender.start()
    # The proxy passes a MiB of the message only once the service reads it: grpc's window
    # (bandwidth-delay probing off) is smaller, so the large upload has the turn from now on.
    assert proxy.interrupted.wait(timeout=30)
    with (
        grpc.insecure_channel(f"127.0.0.1:{budgeted.port}", options=OPTIONS) as channel,
        pytest.raises(grpc.RpcError) as waited,
    ):
        pb_grpc.WireLabStub(channel).Upload(pb.Blob(data=b"small"), timeout=WAIT_S)
    assert waited.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    sender.join(timeout=60)
    assert large == [str(SIZE)]
    counted = budgeted.wait_for(
        'wirelab_server_requests_total{code="DEADLINE_EXCEEDED",kind="upload",'
        'outcome="timeout",protocol="grpc"}',
        1,
    )
    assert counted == 1

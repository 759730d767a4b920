"""gRPC calls refused before their request message reached a handler: counted, on both servers.

grpc runs a one-message method's handler only once the message has arrived, so a call it
refused before that (a message over its receive limit, metadata over its limit) or whose client
went mid-message ran none of the service's code and went uncounted. Upload's behaviour reads its
message itself (rpc/measure.py, rebuild with streamed), so each of these is counted once: as a
cancel, since grpc tells the service no more than that the call ended before its message
arrived."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from tests.services.conftest import SMALL, serve_grpc, settings, settled
from tests.services.proxy import MIB, Proxy

MODES = ["aio", "sync"]


def _uploads(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    """The server's counted uploads by (outcome, code)."""
    found = {}
    for family in registry.collect():
        for sample in family.samples:
            labels = sample.labels
            name, value = sample.name, sample.value
            if name == "wirelab_server_requests_total" and labels["kind"] == "upload" and value:
                found[(labels["outcome"], labels["code"])] = value
    return found


async def _upload(port: int, size: int, metadata: Sequence[tuple[str, str]] = ()) -> str:
    """The status of an Upload of ``size`` bytes from a client that sends any size."""
    options = [("grpc.max_send_message_length", -1)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        stub = pb_grpc.WireLabStub(channel)
        try:
            await stub.Upload(pb.Blob(data=b"x" * size), metadata=tuple(metadata), timeout=20)
        except grpc.aio.AioRpcError as exc:
            return str(exc.code().name)
    return "OK"


async def _counted(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    await settled(lambda: sum(_uploads(registry).values()), 1)
    return _uploads(registry)


@pytest.mark.parametrize("mode", MODES)
async def test_an_upload_over_the_receive_limit_is_counted(
    mode: str, registry: CollectorRegistry
) -> None:
    async for target in serve_grpc(mode, registry):
        status = await _upload(target.port, SMALL.max_payload_bytes + 2 * MIB)
        counted = await _counted(registry)
    assert status == "RESOURCE_EXHAUSTED"
    # The service is handed no message, as when the client goes mid-message: the two are one
    # to it, so the refusal counts as a cancel (docs/services.md).
    assert counted == {("cancelled", "CANCELLED"): 1}


@pytest.mark.parametrize("mode", MODES)
async def test_an_upload_whose_client_goes_mid_message_is_counted(
    mode: str, registry: CollectorRegistry
) -> None:
    # The connection closes after the message's first MiB of four.
    limits = dataclasses.replace(SMALL, max_payload_bytes=8 * MIB)
    async for target in serve_grpc(mode, registry, settings(limits=limits)):
        proxy = Proxy(target.port, "up", after=MIB, cut=True)
        status = await _upload(proxy.port, 4 * MIB)
        counted = await _counted(registry)
    assert proxy.interrupted.is_set()
    assert status == "UNAVAILABLE"
    assert counted == {("cancelled", "CANCELLED"): 1}


@pytest.mark.parametrize("mode", MODES)
async def test_an_upload_refused_for_its_metadata_is_counted(
    mode: str, registry: CollectorRegistry
) -> None:
    async for target in serve_grpc(mode, registry):
        status = await _upload(target.port, 10, [("x-big", "a" * 20_000)])
        counted = await _counted(registry)
    assert status == "RESOURCE_EXHAUSTED"
    # grpc drops metadata over its hard limit (16 KiB) before Python sees the call, and fails
    # the call as a client's cancel fails it: counted, but as a cancel (docs/services.md).
    assert counted == {("cancelled", "CANCELLED"): 1}

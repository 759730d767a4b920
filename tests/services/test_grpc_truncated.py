"""A request stream whose last message is cut short: grpcio drops it and ends the stream as if
the client had closed it cleanly, so no handler can tell (docs/services.md, reproduction).

The client is a bare HTTP/2 one (h2): a "hello" chunk, then a gRPC frame that declares 1,000
bytes but carries 10, then END_STREAM. If grpcio starts failing such a stream, these tests fail,
and the service should then count the call as grpc ends it."""

from __future__ import annotations

import asyncio
import hashlib
import socket
import struct
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import grpc.aio
import h2.config
import h2.connection
import h2.events
import pytest
from prometheus_client import CollectorRegistry
from wirelab.v1 import wirelab_pb2 as pb

from tests.services.conftest import requests, serve_grpc, settled

HELLO = pb.Chunk(data=b"hello").SerializeToString()
PATH = "/wirelab.v1.WireLab/UploadStream"


def _frame(message: bytes, declared: int | None = None) -> bytes:
    """A gRPC length-prefixed message, its stated length ``declared`` when given."""
    return b"\x00" + struct.pack(">I", len(message) if declared is None else declared) + message


TRUNCATED = _frame(HELLO) + _frame(b"\x0a" + b"x" * 9, declared=1000)


def _send(port: int, body: bytes) -> tuple[dict[bytes, bytes], bytes]:
    """``body`` as the whole request stream of an UploadStream call; the trailers it ends with
    and the reply's bytes."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    stream = conn.get_next_available_stream_id()
    headers = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", PATH),
        (":authority", "x"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    conn.send_headers(stream, headers)
    conn.send_data(stream, body, end_stream=True)
    reply = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(conn.data_to_send())
        while data := sock.recv(65536):
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    reply += event.data
                if isinstance(event, h2.events.TrailersReceived):
                    return dict(event.headers), reply
                if isinstance(event, h2.events.StreamReset):
                    return {b"reset": str(event.error_code).encode()}, reply
            sock.sendall(conn.data_to_send())
    return {}, reply


class _Recording(grpc.GenericRpcHandler):
    """A bare server's every method: reads the request stream, noting its messages and end."""

    def __init__(self, aio: bool) -> None:
        self.aio = aio
        self.seen: list[Any] = []

    def service(self, details: grpc.HandlerCallDetails) -> Any:
        return grpc.stream_unary_rpc_method_handler(self.read_aio if self.aio else self.read)

    async def read_aio(self, requests: AsyncIterator[bytes], context: Any) -> bytes:
        self.seen = [r async for r in requests] + ["ended"]
        return b""

    def read(self, requests: Iterator[bytes], context: Any) -> bytes:
        self.seen = [*requests, "ended"]
        return b""


@pytest.mark.parametrize("mode", ["aio", "sync"])
async def test_grpcio_ends_a_stream_cut_short_as_a_clean_one(mode: str) -> None:
    recording = _Recording(mode == "aio")
    server: Any = grpc.aio.server() if mode == "aio" else grpc.server(ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((recording,))
    port = server.add_insecure_port("127.0.0.1:0")
    if mode == "aio":
        await server.start()
    else:
        server.start()
    try:
        loop = asyncio.get_running_loop()
        trailers, _ = await loop.run_in_executor(None, _send, port, TRUNCATED)
    finally:
        stopped = server.stop(0)
        if mode == "aio":
            await stopped
    # The handler had "hello" and then the stream's end, nothing to tell the cut message by.
    assert recording.seen == [HELLO, "ended"]
    assert trailers[b"grpc-status"] == b"0"


@pytest.mark.parametrize("mode", ["aio", "sync"])
async def test_the_service_answers_a_stream_cut_short_ok(
    mode: str, registry: CollectorRegistry
) -> None:
    async for target in serve_grpc(mode, registry):
        loop = asyncio.get_running_loop()
        trailers, reply = await loop.run_in_executor(None, _send, target.port, TRUNCATED)
        ok = await settled(lambda: requests(registry, "grpc", "upload_chunked", "ok", "OK"), 1)
    # The digest of "hello" alone: the cut message never reached the service.
    assert trailers[b"grpc-status"] == b"0"
    digest = pb.BlobDigest.FromString(reply[5:])
    assert (digest.size, digest.sha256) == (5, hashlib.sha256(b"hello").hexdigest())
    assert ok == 1

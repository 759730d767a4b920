"""Large-payload throughput: one-message and chunked paths on both protocols, and the ceiling.

Both services run as real processes (metrics on, as in the lab) pinned to one core; this
process is the client on the other core. Each path moves the deterministic payload of each
size, checks size and SHA-256 after the clock stops, and reports the median of the repeats
in MB/s (10^6 bytes per second of payload). The ceiling, measured by the same command, is a raw
TCP transfer between two Python processes on the same two cores: what any transport here could
reach at best.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import multiprocessing
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack

import grpc
import httpx
from wirelab import core
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc
from wirelab_bench.knobs import parser

from wirelab_perf.svcprocs import CLIENT_CPU, SERVER_CPU, pin, service

MIB = 1024 * 1024
# A transfer returns what it got back: the bytes (downloads, hashed after the clock stops) or
# the size and digest the server computed (uploads).
Transfer = Callable[[int], bytes | memoryview | tuple[int, str]]


def _loopback_sender(listener: socket.socket) -> None:
    pin(SERVER_CPU)
    ready: dict[int, bytes] = {}  # built once per size: the ceiling sends, it does not compute
    while True:
        conn, _ = listener.accept()
        with conn:
            (size,) = struct.unpack("!Q", conn.recv(8, socket.MSG_WAITALL))
            if size == 0:
                return
            if size not in ready:
                ready[size] = core.payload(size)
            conn.sendall(ready[size])


def loopback(port: int) -> Transfer:
    """Receive ``size`` bytes over raw TCP into a reused buffer: the ceiling for this machine."""
    buffers: dict[int, bytearray] = {}

    def transfer(size: int) -> memoryview:
        if size not in buffers:
            buffers[size] = bytearray(size)
        view = memoryview(buffers[size])
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(struct.pack("!Q", size))
            got = 0
            while got < size:
                n = conn.recv_into(view[got:])
                if not n:
                    break
                got += n
        return view[:got]

    return transfer


# Upload bodies built once per size, outside the timed transfers (core.payload copies the bytes).
_body = functools.cache(core.payload)


def rest_paths(client: httpx.Client, step: int) -> dict[str, Transfer]:
    def download(size: int) -> bytes:
        return client.get("/v1/blobs", params={"size": size}).content

    def download_chunked(size: int) -> bytes:
        params = {"size": size, "chunk_size": step}
        with client.stream("GET", "/v1/blobs/stream", params=params) as response:
            return b"".join(response.iter_raw())

    def download_json(size: int) -> bytes:
        return base64.b64decode(client.get("/v1/blobs/json", params={"size": size}).json()["data"])

    def digest(response: httpx.Response) -> tuple[int, str]:
        body = response.raise_for_status().json()
        return int(body["size"]), str(body["sha256"])

    return {
        "rest download (one body)": download,
        "rest download chunked": download_chunked,
        "rest download JSON+base64": download_json,
        "rest upload (one body)": lambda size: digest(
            client.post("/v1/blobs", content=_body(size))
        ),
        "rest upload chunked": lambda size: digest(
            client.post("/v1/blobs/stream", content=core.chunks(size, step))
        ),
        "rest upload JSON+base64": lambda size: digest(
            client.post("/v1/blobs/json", json={"data": base64.b64encode(_body(size)).decode()})
        ),
    }


def grpc_paths(stub: pb_grpc.WireLabStub, step: int) -> dict[str, Transfer]:
    # Downloads return the bytes: measure() hashes them once the clock has stopped, as for REST.
    def download(size: int) -> bytes:
        return stub.Download(pb.BlobRequest(size=size)).data

    def download_chunked(size: int) -> bytes:
        chunks = stub.DownloadStream(pb.BlobRequest(size=size, chunk_size=step))
        return b"".join(c.data for c in chunks)

    def upload(size: int) -> tuple[int, str]:
        reply = stub.Upload(pb.Blob(data=_body(size)))
        return reply.size, reply.sha256

    def upload_chunked(size: int) -> tuple[int, str]:
        reply = stub.UploadStream(pb.Chunk(data=piece) for piece in core.chunks(size, step))
        return reply.size, reply.sha256

    return {
        "grpc download (one message)": download,
        "grpc download chunked": download_chunked,
        "grpc upload (one message)": upload,
        "grpc upload chunked": upload_chunked,
    }


def measure(transfer: Transfer, size: int, repeats: int) -> float:
    """Median MB/s of ``repeats`` transfers, each checked for size and digest once timed."""
    transfer(size)  # warm-up (connections, caches), discarded
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = transfer(size)
        seconds.append(time.perf_counter() - started)
        if isinstance(result, bytes | memoryview):
            result = len(result), hashlib.sha256(result).hexdigest()
        if result != (size, core.digest(size)):
            raise RuntimeError(f"wrong answer: {result}")
    return size / statistics.median(seconds) / 1e6


def main(argv: list[str] | None = None) -> int:
    args = parser("wirelab perf payloads", __doc__, "WIRELAB_PAYLOADS").parse_args(argv)
    sizes = [int(s) * MIB for s in args.sizes.split(",") if s]
    step = args.chunk_bytes
    pin(CLIENT_CPU)
    limit = max(sizes) + 2 * MIB
    options = [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    sender = multiprocessing.get_context("fork").Process(target=_loopback_sender, args=(listener,))
    sender.start()
    with ExitStack() as stack:
        rest = stack.enter_context(service("rest", SERVER_CPU))
        rpc = stack.enter_context(service("grpc", SERVER_CPU))
        client = stack.enter_context(httpx.Client(base_url=rest.address, timeout=300))
        channel = stack.enter_context(grpc.insecure_channel(rpc.address, options=options))
        paths = {"loopback TCP ceiling": loopback(port)}
        paths |= rest_paths(client, step) | grpc_paths(pb_grpc.WireLabStub(channel), step)
        header = "".join(f"{s // MIB:>9} MiB" for s in sizes)
        print(f"MB/s, median of {args.repeats}; chunks {step} B; server CPU {SERVER_CPU}, "
              f"client CPU {CLIENT_CPU}\n{'path':30}{header}", flush=True)  # fmt: skip
        for name, transfer in paths.items():
            row = "".join(f"{measure(transfer, size, args.repeats):13.0f}" for size in sizes)
            print(f"{name:30}{row}", flush=True)
    loopback_stop = socket.create_connection(("127.0.0.1", port))
    loopback_stop.sendall(struct.pack("!Q", 0))
    loopback_stop.close()
    sender.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The lab's payload bursts: N concurrent calls of one payload path, on either runtime and
protocol, and the peak RSS of the service process they took it to.

Each cell is a fresh service on its lab defaults (metrics on, the default payload budget), pinned
to the server core; every call has a connection of its own and all start together. The figure
is the process's high-water mark (VmHWM) after the burst, the whole process as the container's
memory limit sees it, not what the burst added. Calls are told by status: served, refused for
load (REST 503, gRPC RESOURCE_EXHAUSTED), or any other ending, named.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager

import grpc
import httpx
from wirelab import core
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from wirelab_perf.node import SERVICES, node_process
from wirelab_perf.svcprocs import SERVER_CPU, Service, service

MIB = 1024 * 1024
CHUNK = MIB
RUNTIMES = ("python", "node")
PROTOCOLS = ("rest", "grpc")
# Every payload path by its kind, and how each protocol names it.
PATHS = {
    "upload": {"rest": "POST /v1/blobs", "grpc": "Upload"},
    "upload_chunked": {"rest": "POST /v1/blobs/stream", "grpc": "UploadStream"},
    "download": {"rest": "GET /v1/blobs", "grpc": "Download"},
    "download_chunked": {"rest": "GET /v1/blobs/stream", "grpc": "DownloadStream"},
}
# One call of ``size`` bytes to a service's address; raises what ended it otherwise.
Call = Callable[[str, int], None]
TIMEOUT = 300.0


class Refused(Exception):
    """The service refused the call for load."""


def _rest(kind: str) -> Call:
    def call(url: str, size: int) -> None:
        with httpx.Client(base_url=url, timeout=TIMEOUT) as client:
            if kind.startswith("upload"):
                body = _shared(size, raw=True) if kind == "upload" else core.chunks(size, CHUNK)
                path = "/v1/blobs" if kind == "upload" else "/v1/blobs/stream"
                reply = client.post(path, content=body)
            else:
                path = "/v1/blobs" if kind == "download" else "/v1/blobs/stream"
                with client.stream("GET", path, params={"size": size}) as reply:
                    for _ in reply.iter_raw(CHUNK):
                        pass
        if reply.status_code == 503:
            raise Refused
        reply.raise_for_status()

    return call


def _grpc_options(size: int) -> list[tuple[str, int]]:
    limit = size + 2 * MIB
    return [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]


def _grpc(kind: str) -> Call:
    def raw(data: bytes) -> bytes:
        return data

    def call(target: str, size: int) -> None:
        with grpc.insecure_channel(target, options=_grpc_options(size)) as channel:
            method = f"/wirelab.v1.WireLab/{PATHS[kind]['grpc']}"
            try:
                if kind == "upload":
                    send = channel.unary_unary(method, raw, raw)
                    send(_shared(size), timeout=TIMEOUT)
                elif kind == "upload_chunked":
                    stub = pb_grpc.WireLabStub(channel)
                    pieces = (pb.Chunk(data=p) for p in core.chunks(size, CHUNK))
                    stub.UploadStream(pieces, timeout=TIMEOUT)
                elif kind == "download":
                    fetch = channel.unary_unary(method, pb.BlobRequest.SerializeToString, raw)
                    fetch(pb.BlobRequest(size=size), timeout=TIMEOUT)
                else:
                    stream = channel.unary_stream(method, pb.BlobRequest.SerializeToString, raw)
                    request = pb.BlobRequest(size=size, chunk_size=CHUNK)
                    for _ in stream(request, timeout=TIMEOUT):
                        pass
            except grpc.RpcError as exc:
                # A refusal for load says so (a message over the size limit does not).
                if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "retry later" in str(
                    exc.details()
                ):
                    raise Refused from exc
                raise

    return call


_SHARED: dict[tuple[int, bool], bytes] = {}


def _shared(size: int, raw: bool = False) -> bytes:
    """One upload body of ``size`` (the payload, or ``raw=False`` its serialized Blob) shared by
    every call: the client's memory is the machine's too, and twelve copies of 256 MiB would be
    3 GiB of it."""
    if (size, raw) not in _SHARED:
        data = core.payload(size)
        _SHARED[size, raw] = data if raw else pb.Blob(data=data).SerializeToString()
    return _SHARED[size, raw]


def starter(
    runtime: str, protocol: str, node: str, python_args: Sequence[str]
) -> Callable[[], AbstractContextManager[Service]]:
    """How to start a fresh service of ``runtime`` and ``protocol`` on its lab defaults."""
    if runtime == "node":
        return lambda: node_process(node, protocol, SERVICES[protocol], "on")
    return lambda: service(protocol, SERVER_CPU, python_args)


def burst(
    start: Callable[[], AbstractContextManager[Service]],
    protocol: str,
    kind: str,
    calls: int,
    size: int,
) -> tuple[int, Counter[str]]:
    """Peak RSS of a fresh service after ``calls`` concurrent ``kind`` calls of ``size`` bytes,
    and how they ended (served, refused, or the name of what else ended them)."""
    call = _rest(kind) if protocol == "rest" else _grpc(kind)
    if kind == "upload":
        _shared(size, raw=protocol == "rest")  # built before the service starts
    ended: Counter[str] = Counter()
    with start() as svc:
        call(svc.address, 4096)  # warm-up: code paths and buffers
        together = threading.Barrier(calls)
        lock = threading.Lock()

        def one() -> None:
            together.wait()
            try:
                call(svc.address, size)
                outcome = "served"
            except Refused:
                outcome = "refused"
            except grpc.RpcError as exc:
                outcome = exc.code().name
            except httpx.HTTPError as exc:
                outcome = type(exc).__name__
            with lock:
                ended[outcome] += 1

        threads = [threading.Thread(target=one) for _ in range(calls)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert svc.alive(), f"{protocol} {kind}: the service died in the burst"
        return svc.peak_rss(), ended


def cells(
    runtimes: Sequence[str], protocols: Sequence[str], kinds: Sequence[str]
) -> Iterator[tuple[str, str, str]]:
    for runtime in runtimes:
        for protocol in protocols:
            for kind in kinds:
                yield runtime, protocol, kind


def ended_text(ended: Counter[str]) -> str:
    """``served / refused`` and any other ending by name and count."""
    others = sorted((name, n) for name, n in ended.items() if name not in ("served", "refused"))
    text = f"{ended['served']} / {ended['refused']}"
    return text + "".join(f", {n} {name}" for name, n in others)

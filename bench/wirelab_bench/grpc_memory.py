"""Memory one gRPC call needs, per path and server mode: the peak RSS one large transfer adds.

Each path gets a fresh `python -m wirelab.rpc` (metrics on, as in the lab) pinned to one core;
after one small warm-up call of the same path, its high-water mark (VmHWM) is read, then one
transfer of the payload runs and the mark is read again. The difference is what that call
needed at its peak, with every copy grpc, protobuf and the service made; printed in MiB and as
a multiple of the payload, which is what the payload budget (WIRELAB_PAYLOAD_BUDGET_BYTES)
should be read against.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

import grpc
from wirelab import core
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from wirelab_bench.benchknobs import parser
from wirelab_bench.svcprocs import CLIENT_CPU, SERVER_CPU, pin, service

MIB = 1024 * 1024
KNOBS = (
    ("size-mib", int, 64, "payload of the one transfer per path, MiB"),
    ("chunk-bytes", int, MIB, "chunk size of the chunked paths"),
    ("modes", str, "aio,sync", "gRPC server modes, comma-separated"),
)
Transfer = Callable[[pb_grpc.WireLabStub, int, int], int]


def _chunks(size: int, step: int) -> Iterator[pb.Chunk]:
    return (pb.Chunk(data=piece) for piece in core.chunks(size, step))


def _upload(stub: pb_grpc.WireLabStub, size: int, step: int) -> int:
    return int(stub.Upload(pb.Blob(data=core.payload(size))).size)


def _upload_chunked(stub: pb_grpc.WireLabStub, size: int, step: int) -> int:
    return int(stub.UploadStream(_chunks(size, step)).size)


def _download(stub: pb_grpc.WireLabStub, size: int, step: int) -> int:
    return len(stub.Download(pb.BlobRequest(size=size)).data)


def _download_chunked(stub: pb_grpc.WireLabStub, size: int, step: int) -> int:
    request = pb.BlobRequest(size=size, chunk_size=step)
    return sum(len(c.data) for c in stub.DownloadStream(request))


PATHS: dict[str, Transfer] = {
    "upload, one message": _upload,
    "upload, chunked": _upload_chunked,
    "download, one message": _download,
    "download, chunked": _download_chunked,
}


def measure(mode: str, transfer: Transfer, size: int, step: int) -> int:
    """Bytes the peak RSS of a fresh server grew by during one ``transfer`` of ``size``."""
    limit = size + 2 * MIB
    options = [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]
    extra = ["--grpc-server", mode, "--max-payload-bytes", str(size)]
    with (
        service("grpc", SERVER_CPU, extra) as svc,
        grpc.insecure_channel(svc.address, options=options) as channel,
    ):
        stub = pb_grpc.WireLabStub(channel)
        transfer(stub, 4096, 4096)  # warm-up: code paths, buffers, the payload pattern
        before = svc.peak_rss()
        assert transfer(stub, size, step) == size
        return svc.peak_rss() - before


def main(argv: list[str] | None = None) -> int:
    prog = "python -m wirelab_bench.grpc_memory"
    args = parser(prog, __doc__, "WIRELAB_GRPC_MEMORY", KNOBS).parse_args(argv)
    pin(CLIENT_CPU)
    size = args.size_mib * MIB
    print(f"peak RSS added by one {args.size_mib} MiB call (fresh server per cell)")
    print(f"{'path':<24}" + "".join(f"{mode:>22}" for mode in args.modes.split(",")))
    for name, transfer in PATHS.items():
        cells = []
        for mode in args.modes.split(","):
            grown = measure(mode, transfer, size, args.chunk_bytes)
            cells.append(f"{grown / MIB:8.0f} MiB ({grown / size:4.1f}x)")
        print(f"{name:<24}" + "".join(f"{cell:>22}" for cell in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

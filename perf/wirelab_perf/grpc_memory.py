"""Memory payload calls need: the peak RSS large transfers add, per path and server mode.

Each cell gets a fresh `python -m wirelab.rpc` (metrics on, as in the lab) pinned to one core;
after a small warm-up call, its high-water mark (VmHWM) is read, the transfers run and the mark
is read again. First one transfer per path: what that call needed at its peak, with every copy
grpc, protobuf and the service made, in MiB and as a multiple of the payload (what the payload
budget, WIRELAB_PAYLOAD_BUDGET_BYTES, should be read against). Then a burst: concurrent
one-message transfers, each on a channel of its own, with the budget (room for one) and
without, and how many were refused. Last, with ``--bursts``, the lab's bursts (perf/bursts.py):
N concurrent calls of every payload path on both runtimes and both protocols, each service
fresh on its lab defaults, the peak RSS of the service process against the container's limit.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import grpc
from wirelab import core
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc
from wirelab_bench.knobs import listed, parser

from wirelab_perf import bursts
from wirelab_perf.svcprocs import CLIENT_CPU, SERVER_CPU, pin, service

MIB = 1024 * 1024
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


def _options(size: int) -> list[tuple[str, int]]:
    limit = size + 2 * MIB
    return [("grpc.max_receive_message_length", limit), ("grpc.max_send_message_length", limit)]


def measure(mode: str, transfer: Transfer, size: int, step: int) -> int:
    """Bytes the peak RSS of a fresh server grew by during one ``transfer`` of ``size``."""
    extra = ["--grpc-server", mode, "--max-payload-bytes", str(size)]
    with (
        service("grpc", SERVER_CPU, extra) as svc,
        grpc.insecure_channel(svc.address, options=_options(size)) as channel,
    ):
        stub = pb_grpc.WireLabStub(channel)
        transfer(stub, 4096, 4096)  # warm-up: code paths, buffers, the payload pattern
        before = svc.peak_rss()
        assert transfer(stub, size, step) == size
        return svc.peak_rss() - before


def burst(mode: str, transfer: Transfer, size: int, calls: int, budget: int) -> tuple[int, int]:
    """Peak RSS growth of a fresh server during ``calls`` concurrent ``transfer``s of ``size``
    at ``budget`` (0: admission off), and how many were refused."""
    extra = ["--grpc-server", mode, "--max-payload-bytes", str(size)]
    extra += ["--payload-budget-bytes", str(budget)]
    with service("grpc", SERVER_CPU, extra) as svc:
        channels = [
            grpc.insecure_channel(svc.address, options=_options(size)) for _ in range(calls)
        ]
        stubs = [pb_grpc.WireLabStub(channel) for channel in channels]
        for stub in stubs:
            transfer(stub, 4096, 4096)
        before = svc.peak_rss()
        together = threading.Barrier(calls)
        refused = []

        def one(stub: pb_grpc.WireLabStub) -> None:
            together.wait()
            try:
                transfer(stub, size, size)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                refused.append(1)

        threads = [threading.Thread(target=one, args=(stub,)) for stub in stubs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for channel in channels:
            channel.close()
        return svc.peak_rss() - before, len(refused)


def main(argv: list[str] | None = None) -> int:
    prog = "wirelab perf grpc-memory"
    args = parser(prog, __doc__, "WIRELAB_GRPC_MEMORY").parse_args(argv)
    pin(CLIENT_CPU)
    if args.size_mib:
        size = args.size_mib * MIB
        print(f"peak RSS added by one {args.size_mib} MiB call (fresh server per cell)")
        print(f"{'path':<24}" + "".join(f"{mode:>22}" for mode in args.modes.split(",")))
        for name, transfer in PATHS.items():
            cells = []
            for mode in args.modes.split(","):
                grown = measure(mode, transfer, size, args.chunk_bytes)
                cells.append(f"{grown / MIB:8.0f} MiB ({grown / size:4.1f}x)")
            print(f"{name:<24}" + "".join(f"{cell:>22}" for cell in cells), flush=True)
    if args.burst:
        size = args.burst_mib * MIB
        budget = 4 * size + size // 4  # room for one call at a time, charged at its peak
        print(f"\n{args.burst} concurrent {args.burst_mib} MiB calls: peak RSS added, refused")
        print(f"{'path, budget':<30}" + "".join(f"{mode:>18}" for mode in args.modes.split(",")))
        for name in ("upload, one message", "download, one message"):
            for room in (budget, 0):
                cells = []
                for mode in args.modes.split(","):
                    grown, refused = burst(mode, PATHS[name], size, args.burst, room)
                    cells.append(f"{grown / MIB:6.0f} MiB, {refused:2d}")
                path = name.split(",")[0]
                label = f"{path}, {room // MIB} MiB" if room else f"{path}, off"
                print(f"{label:<30}" + "".join(f"{cell:>18}" for cell in cells), flush=True)
    if args.bursts:
        cli = parser(prog, __doc__, "WIRELAB_GRPC_MEMORY")
        _lab_bursts(
            [int(n) for n in args.bursts.split(",")],
            args.bursts_mib * MIB,
            listed(cli, args.runtimes, bursts.RUNTIMES, "runtimes"),
            listed(cli, args.protocols, bursts.PROTOCOLS, "protocols"),
            listed(cli, args.kinds, bursts.PATHS, "kinds"),
            args.node,
            args.python_args.split(),
        )
    return 0


def _lab_bursts(
    counts: list[int],
    size: int,
    runtimes: list[str],
    protocols: list[str],
    kinds: list[str],
    node: str,
    python_args: list[str],
) -> None:
    """The lab's bursts (perf/bursts.py): one row per runtime, protocol and path."""
    print(f"\n{size // MIB} MiB calls at once: peak RSS of the service, served / refused")
    print(f"{'runtime, path':<36}" + "".join(f"{f'{n} at once':>26}" for n in counts))
    for runtime, protocol, kind in bursts.cells(runtimes, protocols, kinds):
        start = bursts.starter(runtime, protocol, node, python_args)
        row = []
        for n in counts:
            peak, ended = bursts.burst(start, protocol, kind, n, size)
            row.append(f"{peak / MIB:6.0f} MiB, {bursts.ended_text(ended)}")
        label = f"{runtime} {protocol} {bursts.PATHS[kind][protocol]}"
        print(f"{label:<36}" + "".join(f"{cell:>26}" for cell in row), flush=True)


if __name__ == "__main__":
    sys.exit(main())

"""gRPC downstreams: ProcessOrder over one grpc.aio channel per downstream."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence

import grpc
import grpc.aio

from wirelab import core
from wirelab.contract import address_of, grpc_outcome, peer_of
from wirelab.hops.outgoing import Families, Outgoing
from wirelab.hops.relay import DownstreamError, Reason
from wirelab.traces import Tracing
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

_REASONS: dict[grpc.StatusCode, Reason] = {
    grpc.StatusCode.UNAVAILABLE: "unavailable",
    grpc.StatusCode.DEADLINE_EXCEEDED: "timeout",
}


def addresses(url: str) -> str:
    """The channel target of ``grpc://host:port+host:port...#peer``: one service behind several
    addresses (the cluster's replicas, each through its own Toxiproxy proxy under netem;
    docs/network.md), each host resolved once, here, to its IPv4 address: ``ipv4:`` targets
    take addresses only. A ValueError says which address does not resolve or lacks its port."""
    found = []
    for address in address_of(url).removeprefix("grpc://").split("+"):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{url}: {address!r} is not host:port")
        try:
            first = socket.getaddrinfo(host, int(port), socket.AF_INET)[0]
        except socket.gaierror as exc:
            raise ValueError(f"{url}: {host} does not resolve: {exc}") from None
        found.append(f"{first[4][0]}:{port}")
    return "ipv4:" + ",".join(found)


class GrpcDownstream:
    """One gRPC service (``grpc://host:port``, or several addresses of one service joined by
    ``+`` and named by ``#peer``) on a channel of its own, opened once."""

    def __init__(
        self,
        url: str,
        balancing: str,
        max_message: int,
        families: Families | None,
        tracing: Tracing | None = None,
    ) -> None:
        self.peer = peer_of(url)
        address = address_of(url).removeprefix("grpc://")
        options: list[tuple[str, str | int]] = [
            ("grpc.max_send_message_length", max_message),
            ("grpc.max_receive_message_length", max_message),
        ]
        if "+" in address:
            if "#" not in url:
                raise ValueError(f"{url}: several addresses name their service with #peer")
            address = addresses(url)
        elif balancing == "round_robin":
            # The dns resolver returns every address of the name (each replica compose runs).
            address = f"dns:///{address}"
        if balancing == "round_robin":
            # round_robin keeps a connection to each address and spreads calls over them.
            options.append(("grpc.lb_policy_name", "round_robin"))
        # Traced: a client span per call, its context sent as ``traceparent`` metadata.
        interceptors = None if tracing is None else tracing.client_interceptors()
        self.channel = grpc.aio.insecure_channel(
            address, options=options, interceptors=interceptors
        )
        self.stub = pb_grpc.WireLabStub(self.channel)
        self.measured = Outgoing(families, "grpc", self.peer)

    async def order(self, request: pb.OrderRequest, timeout: float) -> pb.OrderReply:
        sent = request.ByteSize()
        started = time.perf_counter()
        outcome, received = "failure", None
        try:
            # The timeout travels as grpc-timeout: the downstream's deadline is this hop's.
            reply: pb.OrderReply = await self.stub.ProcessOrder(request, timeout=timeout)
            received = reply.ByteSize()
            outcome = "ok"
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            # UNAVAILABLE on the client means no connection, as Locust's gRPC users count it.
            outcome = (
                "connection_error"
                if code == grpc.StatusCode.UNAVAILABLE
                else grpc_outcome(code.name)
            )
            reason = _REASONS.get(code, "failed")
            raise DownstreamError(self.peer, reason, f"{code.name} {exc.details()}") from None
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.measured.record(outcome, time.perf_counter() - started, sent, received)
        return reply

    def problem(self) -> None:
        """Always ready: the channel connects on demand, and its failures are the call's."""

    async def close(self) -> None:
        await self.channel.close(grace=None)


class GrpcSplitter:
    """Fanout split for gRPC orders: message copies, each with a piece of the note."""

    def parts(self, request: pb.OrderRequest, count: int) -> list[pb.OrderRequest]:
        out = []
        for piece in core.split_note(request.order.note, count):
            part = pb.OrderRequest()
            part.CopyFrom(request)
            part.order.note = piece
            out.append(part)
        return out

    def merge(self, own: pb.OrderReply, replies: Sequence[pb.OrderReply]) -> pb.OrderReply:
        own.word_count = sum(r.word_count for r in replies)
        own.char_count = sum(r.char_count for r in replies)
        return own


def grpc_downstreams(
    urls: Sequence[str],
    balancing: str,
    max_message: int,
    families: Families | None,
    tracing: Tracing | None = None,
) -> list[GrpcDownstream]:
    return [GrpcDownstream(url, balancing, max_message, families, tracing) for url in urls]

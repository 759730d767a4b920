"""Several Bs on one port of as many loopback addresses, and a DNS server naming them all."""

from __future__ import annotations

import socketserver
import struct
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from wirelab_bench.scrape import scrape

from wirelab_perf.svcprocs import Service, free_port, service

# grpc-go (ghz) balances only over what a resolver returns, and its one resolver of several
# addresses is DNS, whose answers carry no port: so the replicas share one port, each on its own
# address of 127.0.0.0/8 (all of it is loopback on Linux).
NAME = "replicas.wirelab.test"
# The service config the name publishes (gRPC's DNS service config, a TXT record at
# _grpc_config.<name>): round_robin. So ghz, run exactly as on every other arm (loadtools.ghz
# passes no --lb-strategy), balances over the replicas; without it grpc-go picks the first
# address only (seen: 200, 0, 0 calls). The hop benchmark checks the spread on every run.
ROUND_ROBIN_CONFIG = b'grpc_config=[{"serviceConfig":{"loadBalancingConfig":[{"round_robin":{}}]}}]'
A, TXT = 1, 16


def reply(query: bytes, addresses: tuple[str, ...]) -> bytes:
    """The answer to a DNS query for any name: every address to A, the service config to TXT,
    nothing to other types (AAAA); authoritative, or Go's resolver takes an empty answer for a
    lame referral."""
    end = query.index(b"\0", 12) + 5  # the question: its name's labels, then type and class
    qtype = struct.unpack("!H", query[end - 4 : end - 2])[0]
    rdata = {A: [bytes(map(int, ip.split("."))) for ip in addresses], TXT: [ROUND_ROBIN_CONFIG]}
    records = [
        b if qtype == A else bytes([len(b)]) + b  # a TXT record is length-prefixed strings
        for b in rdata.get(qtype, [])
    ]
    flags = 0x8480 | (struct.unpack("!H", query[2:4])[0] & 0x0100)  # answer, AA, RA; RD as asked
    header = struct.pack("!HHHHHH", struct.unpack("!H", query[:2])[0], flags, 1, len(records), 0, 0)
    answers = b"".join(
        struct.pack("!HHHIH", 0xC00C, qtype, 1, 60, len(r)) + r  # 0xC00C: the question's name
        for r in records
    )
    return header + query[12:end] + answers


@contextmanager
def dns_server(addresses: tuple[str, ...]) -> Iterator[str]:
    """A DNS server on a free loopback port, in a thread, answering as ``reply`` does; yields
    the gRPC target that resolves ``NAME`` through it (the port to add)."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            query, sock = self.request
            sock.sendto(reply(query, addresses), self.client_address)

    with socketserver.ThreadingUDPServer(("127.0.0.1", free_port()), Handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"dns://127.0.0.1:{server.server_address[1]}/{NAME}"
        finally:
            server.shutdown()
            thread.join()


@contextmanager
def replicas(protocol: str, cpu: int, count: int, metrics: str) -> Iterator[tuple[Service, ...]]:
    """``count`` Bs, on 127.0.0.1, 127.0.0.2, ... and one port (DNS answers carry no port), all
    pinned to ``cpu``."""
    port = free_port()
    extra = ("--metrics", metrics)
    with ExitStack() as stack:
        yield tuple(
            stack.enter_context(service(protocol, cpu, extra, host=f"127.0.0.{k + 1}", port=port))
            for k in range(count)
        )


def served(b: Service) -> int:
    """The orders ``b`` has answered so far, by its own counter."""
    return round(
        sum(
            value
            for name, labels, value in scrape(b.metrics_url, b.protocol)
            if name == "wirelab_server_requests_total" and labels.get("kind") == "unary"
        )
    )

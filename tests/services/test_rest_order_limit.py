"""A real REST process refuses a huge order at once, without reading it into memory."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import pytest

from tests.services.test_integration import Service, start
from tests.services.test_rest_runtime import _peak_rss

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
ORDER = 300 * MIB  # a probe's order: answered 200 at 1.25 GB RSS before the limit


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    service = start("wirelab.rest", tmp_path_factory.mktemp("rest-order-limit"))
    yield service
    assert service.stop() == 0


def _send_until_answered(port: int, chunked: bool) -> tuple[bytes, int]:
    """POST a 300 MiB order a MiB at a time until the server answers; (reply, MiB sent)."""
    head = b"POST /v1/orders HTTP/1.1\r\nhost: lab\r\ncontent-type: application/json\r\n"
    length = b"content-length: %d" % ORDER
    head += (b"transfer-encoding: chunked" if chunked else length) + b"\r\n\r\n"
    # Spaces, not an order: the limit is on bytes and is checked before any parsing.
    piece = b"%x\r\n%s\r\n" % (MIB, b" " * MIB) if chunked else b" " * MIB
    reply = b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        sent = 0
        while b"\r\n\r\n" not in reply and sent < ORDER // MIB:
            try:
                sock.sendall(piece)
                sent += 1
            except OSError:  # the server answered and closed: the reply is waiting
                break
            sock.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                reply += sock.recv(65536)
            sock.settimeout(10)
        if chunked and sent == ORDER // MIB:
            sock.sendall(b"0\r\n\r\n")  # all of it sent unanswered: end the body
        while b"}" not in reply and (more := sock.recv(65536)):
            reply += more
    return reply, sent


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_300_mib_order_is_refused_at_once(rest: Service, chunked: bool) -> None:
    before = _peak_rss(rest)
    started = time.perf_counter()
    reply, sent = _send_until_answered(rest.port, chunked)
    took = time.perf_counter() - started
    assert reply.startswith(b"HTTP/1.1 413 ")
    assert reply.endswith(b'{"detail":"order is over the limit of 1048576 bytes"}')
    grew = (_peak_rss(rest) - before) / MIB
    print(
        f"\n300 MiB order, {'chunked' if chunked else 'with length'}: 413 after {sent} MiB sent, "
        f"{took * 1000:.0f} ms, peak RSS +{grew:.1f} MiB"
    )
    assert sent <= 8 and grew < 16

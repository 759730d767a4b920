"""What the REST user sets on geventhttpclient's connection pool (FastHttpUser's).

Kept apart from the users so that tests import it without Locust (whose import patches the
process with gevent).
"""

from __future__ import annotations

import socket
import time
from typing import Any

from wirelab.contract import CLIENT_IDLE_SECONDS


def no_delay(sock: socket.socket) -> None:
    """The pool's ``after_connect``: TCP_NODELAY on each new connection. geventhttpclient leaves
    Nagle on and sends a chunked body as head, chunks and "0\\r\\n\\r\\n" in separate writes: a
    chunk under one segment then waits for the head's ACK, which the server delays 40 ms because
    it has nothing to send yet. That timer, not HTTP, made a 16 KiB upload_chunked take ~44 ms
    instead of ~0.4 ms. curl, CPython's http.client and gRPC set TCP_NODELAY."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def expire_idle(pool: Any, idle: float = CLIENT_IDLE_SECONDS) -> None:
    """``pool`` reuses no connection idle ``idle`` seconds or more: it closes it and connects
    anew, as the lab's relays do (wirelab.contract.CLIENT_IDLE_SECONDS says why: the services
    close a connection idle 5 s, and a POST sent as they do fails unretried). geventhttpclient
    drops an idle connection only once the server's close has arrived (its pool's liveness check,
    ``_is_socket_alive``, which this extends with the connection's idle time); a user paced at
    0.2 tasks/s sends just as it may be on its way. geventhttpclient 2.6.1, the pinned one."""
    returned: dict[int, float] = {}  # id of a pooled socket -> when it went back to the pool
    give_back, alive = pool.return_socket, pool._is_socket_alive

    def return_socket(sock: socket.socket) -> None:
        returned[id(sock)] = time.monotonic()
        give_back(sock)

    def is_socket_alive(sock: socket.socket | None) -> bool:
        since = returned.pop(id(sock), None)
        fresh = since is None or time.monotonic() - since < idle
        return fresh and bool(alive(sock))

    pool.return_socket = return_socket
    pool._is_socket_alive = is_socket_alive

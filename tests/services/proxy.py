"""A TCP proxy for one connection that interrupts one direction midway: held, or cut off."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

MIB = 1024 * 1024


class Proxy:
    """Carries one connection to ``target`` until ``direction`` ("up": client to server,
    "down": server to client) has carried ``after`` bytes; then holds that direction ``hold``
    seconds (a transfer in flight takes at least that long, whatever the machine's load), or
    with ``cut`` closes the connection both ways (a client gone mid-message)."""

    def __init__(
        self, target: int, direction: str, after: int = MIB, hold: float = 0.0, cut: bool = False
    ) -> None:
        self.target = target
        self.direction = direction
        self.after = after
        self.hold = hold
        self.cut = cut
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.interrupted = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        client, _ = self.listener.accept()
        server = socket.create_connection(("127.0.0.1", self.target))
        self.sockets = (client, server)
        for source, sink, direction in ((client, server, "up"), (server, client, "down")):
            watched = direction == self.direction
            threading.Thread(target=self._pump, args=(source, sink, watched), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, watched: bool) -> None:
        carried = 0
        forwarding = True
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                carried += len(data)
                if watched and carried >= self.after and not self.interrupted.is_set():
                    self.interrupted.set()
                    if self.cut:
                        self._cut()
                        return
                    time.sleep(self.hold)
                if forwarding:
                    try:
                        sink.sendall(data)
                    except OSError:  # the other side was cut: read on to the end, dropping
                        forwarding = False
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
        source.close()

    def _cut(self) -> None:
        # The client goes. The server's side ends with a FIN after what was carried: a reset
        # could make its kernel drop bytes it had not read yet, the call's headers included.
        client, server = self.sockets
        server.shutdown(socket.SHUT_WR)
        client.close()

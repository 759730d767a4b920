"""The REST user's WebSocket: Locust stops the user even while it waits for the peer's Close,
and a text frame that is not UTF-8 still fails the call.

The users run under gevent, so each case runs in its own interpreter: monkey-patching stays out
of pytest's process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A peer that completes the opening handshake, then reads and never answers: the client's closing
# handshake waits for a Close that does not come, and the greenlet is killed during that wait.
SCRIPT = textwrap.dedent(
    """
    from gevent import monkey
    monkey.patch_all()

    import base64, hashlib, sys, time
    import gevent, websocket
    from gevent.server import StreamServer
    from wirelab_locust.rest_user import close_websocket, open_websocket

    GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def silent_peer(sock, _address):
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            head += sock.recv(4096)
        key = next(
            line.split(b":", 1)[1].strip()
            for line in head.split(b"\\r\\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        sock.sendall(
            b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\n"
            b"Connection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + b"\\r\\n\\r\\n"
        )
        if sys.argv[1] == "bad-utf8":
            sock.sendall(b"\\x81\\x02\\xff\\xfe")  # FIN, text, 2 bytes that are not UTF-8
        while sock.recv(4096):
            pass

    server = StreamServer(("127.0.0.1", 0), silent_peer)
    server.start()
    ws = open_websocket(f"ws://127.0.0.1:{server.server_port}/", 30)
    if sys.argv[1] == "bad-utf8":
        try:
            ws.recv()
        except Exception as error:
            print(type(error).__name__, True, 0)
        sys.exit(0)
    close = {"ours": close_websocket, "library": lambda ws: ws.close(timeout=30)}[sys.argv[1]]
    user = gevent.spawn(close, ws)
    gevent.sleep(0.3)
    started = time.monotonic()
    user.kill(timeout=5)
    print(type(user.value).__name__, user.dead, round(time.monotonic() - started, 2))
    """
)


def stop_while_closing(close: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, close], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_user_killed_while_closing_its_websocket_stops() -> None:
    value, dead, seconds = stop_while_closing("ours")
    assert (value, dead) == ("GreenletExit", "True")
    assert float(seconds) < 5


def test_the_library_close_swallows_the_kill() -> None:
    # Why close_websocket exists: should websocket-client stop swallowing GreenletExit, this
    # fails and close_websocket can go back to ws.close().
    value, dead, _ = stop_while_closing("library")
    assert (value, dead) == ("NoneType", "True")


def test_a_text_frame_that_is_not_utf8_still_fails_the_call() -> None:
    # open_websocket skips websocket-client's own (slow) check; str's strict decode remains.
    value, _, _ = stop_while_closing("bad-utf8")
    assert value == "UnicodeDecodeError"

"""REST users: FastHttpUser connections (or HTTP/2 over httpx) read incrementally, WebSocket
ping-pong, timed like gRPC."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import websocket
from geventhttpclient._parser import HTTPParseError
from geventhttpclient.url import URL
from wirelab.contract import http_outcome

from locust import FastHttpUser
from wirelab_locust import content
from wirelab_locust.h2 import H2Response, h2c_client
from wirelab_locust.lab import LabUserMixin
from wirelab_locust.pooling import expire_idle, no_delay
from wirelab_locust.timing import Call, CallError, WrongAnswer

_JSON = {"Content-Type": "application/json", "Accept": "application/json"}
_OCTETS = {"Content-Type": "application/octet-stream"}
_READ = 256 * 1024


def open_websocket(url: str, timeout: float) -> websocket.WebSocket:
    """A WebSocket to ``url`` whose text frames are checked by str's strict UTF-8 decode only.

    websocket-client checks a text frame's UTF-8 byte by byte in Python (wsaccel, its C helper,
    is unmaintained): 26 of the 27 ms a 64 KiB ping-pong took. ``recv()`` still decodes each text
    frame strictly, which refuses the same frames at C speed.
    """
    return websocket.create_connection(url, timeout=timeout, skip_utf8_validation=True)


def close_websocket(ws: websocket.WebSocket) -> None:
    """The closing handshake (send Close, wait for the peer's) that lets every exception through.

    ``WebSocket.close()`` waits for the peer's Close inside a bare ``except: pass``, which also
    swallows the GreenletExit with which Locust stops a user: a user stopped during that wait ran
    on, and the web UI's Stop hung on it (websocket-client 1.9.2; 1 stop in 12 with three busy
    loops beside it). A timeout here is the call's, as gRPC's end-of-stream wait is.
    """
    try:
        ws.send_close()
        while ws.recv_frame().opcode != websocket.ABNF.OPCODE_CLOSE:  # type: ignore[no-untyped-call]
            pass
    except websocket.WebSocketConnectionClosedException:
        pass  # the peer closed first: the exchange is over either way
    finally:
        ws.shutdown()  # type: ignore[no-untyped-call]


class RestLabUser(LabUserMixin, FastHttpUser):
    """A FastHttpUser whose calls report like the gRPC user's: type `rest`, name `kind/Call`."""

    abstract = True
    protocol = "rest"

    def __init__(self, environment: Any) -> None:
        # FastHttpUser builds its connection pool from these class-level timeouts in __init__.
        options = environment.parsed_options
        if options is not None:
            self.network_timeout = self.connection_timeout = float(options.call_timeout)
        super().__init__(environment)

    def on_start(self) -> None:
        self.setup_lab()
        url = URL(self.knobs.rest_host)
        # Locust's session fires its own request events named after HTTP verbs; the raw pooled
        # connection (same geventhttpclient, same keep-alive) lets us time and name calls ourselves.
        self.http = self.client.client.clientpool.get_client(url)
        # TCP_NODELAY on each connection, and none reused idle past the services' keep-alive
        # (pooling.py says why of each).
        pool = self.http._connection_pool
        pool.after_connect = no_delay  # type: ignore[method-assign]
        expire_idle(pool)
        self.prefix = url.path.rstrip("/")
        self.h2: httpx.Client | None = None
        self.h2_open: list[H2Response] = []
        if self.knobs.rest_http == "h2c":
            self.h2 = h2c_client(self.knobs.rest_host, self.knobs.call_timeout)
        self.ws_url = "ws" + self.knobs.rest_host.removeprefix("http") + "/v1/pingpong"
        order = content.order(id(self), self.knobs.note_words)
        self.order_items = content.expected_totals(order)
        self.order_id = order["order_id"]
        # The JSON mirror of OrderRequest, field for field.
        self.order_body = {
            "order": order,
            "work_ms": self.knobs.work_ms,
            "count_words": self.knobs.count_words,
        }

    @contextmanager
    def timed(self, kind: str) -> Iterator[Call]:
        call = Call(self.environment, self.protocol, kind, self.knobs.fail_over_ms, self.peer)
        try:
            yield call
        except websocket.WebSocketBadStatusException as error:
            status = int(error.status_code)
            call.finish(CallError(http_outcome(status), str(status), str(error)))
        except (websocket.WebSocketTimeoutException, httpx.TimeoutException) as error:
            call.finish(CallError("timeout", "timeout", str(error)))
        except (HTTPParseError, websocket.WebSocketException, httpx.TransportError) as error:
            call.finish(CallError("connection_error", "closed", str(error) or repr(error)))
        except Exception as error:
            call.finish(error)
        else:
            call.finish()
        finally:
            # An HTTP/2 stream the call left unread (an error, a wrong answer) is reset, so
            # the connection's next call does not queue behind it.
            while self.h2_open:
                self.h2_open.pop().response.close()

    def on_stop(self) -> None:
        if self.h2 is not None:
            self.h2.close()

    def _request(
        self, call: Call, method: str, path: str, body: Any, headers: dict[str, str]
    ) -> Any:
        if isinstance(body, bytes):
            call.sent(len(body))
        if self.h2 is not None:
            request = self.h2.build_request(method, path, content=body or None, headers=headers)
            response: Any = H2Response(self.h2.send(request, stream=True))
            self.h2_open.append(response)
        else:
            response = self.http.request(method, self.prefix + path, body=body, headers=headers)
        status = response.status_code
        if status >= 400:
            raise CallError(
                http_outcome(status), str(status), response.read(1024).decode("utf-8", "replace")
            )
        return response

    def _read_all(self, call: Call, response: Any, chunk: int = _READ) -> Iterator[bytes]:
        while piece := response.read(chunk):
            call.received(len(piece))
            yield piece

    def _json(self, call: Call, response: Any) -> Any:
        return json.loads(b"".join(self._read_all(call, response)))

    def unary(self) -> None:
        with self.timed("unary") as call:
            body = json.dumps(self.order_body).encode()
            reply = self._json(call, self._request(call, "POST", "/v1/orders", body, _JSON))
            call.check(
                (reply["item_count"], reply["total_cents"]) == self.order_items
                and reply["order_id"] == self.order_id,
                "order totals differ from what was sent",
            )

    def server_stream(self) -> None:
        k = self.knobs
        query = (
            f"/v1/stream?count={k.stream_count}&size={k.stream_size}"
            f"&interval_ms={k.stream_interval_ms}"
        )
        with self.timed("server_stream") as call:
            response = self._request(call, "GET", query, b"", {})
            # NDJSON read line by line as it arrives: the first line is the first message.
            while line := response.readline(b"\n"):
                call.received(len(line))
                message = json.loads(line)
                seq = call.messages_in - 1
                data = base64.b64decode(message["payload"])
                call.check(message["seq"] == seq and len(data) == k.stream_size, "message")
            call.check(call.messages_in == k.stream_count, "wrong message count")

    def upload(self) -> None:
        k = self.knobs
        with self.timed("upload") as call:
            data = content.payload(k.payload_bytes)
            reply = self._json(call, self._request(call, "POST", "/v1/blobs", data, _OCTETS))
            content.check_blob(k.payload_bytes, reply["size"], reply["sha256"])

    def upload_json(self) -> None:
        k = self.knobs
        with self.timed("upload_json") as call:
            # Encoded per call, as a JSON client must: the base64 cost is what this kind shows.
            data = base64.b64encode(content.payload(k.payload_bytes)).decode("ascii")
            body = json.dumps({"data": data}).encode()
            reply = self._json(call, self._request(call, "POST", "/v1/blobs/json", body, _JSON))
            content.check_blob(k.payload_bytes, reply["size"], reply["sha256"])

    def upload_chunked(self) -> None:
        k = self.knobs

        def pieces() -> Iterator[bytes]:
            for piece in content.chunks(k.payload_bytes, k.chunk_bytes):
                call.sent(len(piece))
                yield piece

        with self.timed("upload_chunked") as call:
            # An iterable body goes out with Transfer-Encoding: chunked, one HTTP chunk per piece.
            response = self._request(call, "POST", "/v1/blobs/stream", pieces(), _OCTETS)
            reply = self._json(call, response)
            content.check_blob(k.payload_bytes, reply["size"], reply["sha256"])

    def download(self) -> None:
        self._download("download", f"/v1/blobs?size={self.knobs.payload_bytes}", _READ)

    def download_chunked(self) -> None:
        k = self.knobs
        path = f"/v1/blobs/stream?size={k.payload_bytes}&chunk_size={k.chunk_bytes}"
        # Reading one chunk_size at a time makes "messages" match the server's chunks.
        self._download("download_chunked", path, k.chunk_bytes)

    def _download(self, kind: str, path: str, piece: int) -> None:
        k = self.knobs
        with self.timed(kind) as call:
            response = self._request(call, "GET", path, b"", {})
            hasher, size = hashlib.sha256(), 0
            for data in self._read_all(call, response, piece):
                hasher.update(data)
                size += len(data)
            header_size = int(response.get("x-wirelab-size", -1))
            content.check_blob(k.payload_bytes, header_size, response.get("x-wirelab-sha256", ""))
            content.check_blob(k.payload_bytes, size, hasher.hexdigest())

    def download_json(self) -> None:
        k = self.knobs
        with self.timed("download_json") as call:
            response = self._request(
                call, "GET", f"/v1/blobs/json?size={k.payload_bytes}", b"", _JSON
            )
            blob = self._json(call, response)
            data = base64.b64decode(blob["data"])
            content.check_blob(k.payload_bytes, blob["size"], blob["sha256"])
            content.check_blob(k.payload_bytes, len(data), hashlib.sha256(data).hexdigest())

    def bidi(self) -> None:
        k = self.knobs
        payload = content.payload_b64(k.ping_bytes)
        with self.timed("bidi") as call:
            # One WebSocket per call, as one gRPC stream per call: the upgrade is part of the call.
            ws = open_websocket(self.ws_url, k.call_timeout)
            try:
                for seq in range(k.ping_count):
                    frame = json.dumps({"seq": seq, "payload": payload})
                    call.sent(len(frame))
                    ws.send(frame)
                    answer = ws.recv()
                    if not answer:
                        raise WrongAnswer(f"socket closed after {seq} pongs")
                    call.received(len(answer))
                    pong = json.loads(answer)
                    call.check(
                        pong["seq"] == seq and pong["payload"] == payload, "pong is not the ping"
                    )
            except BaseException:
                ws.shutdown()  # type: ignore[no-untyped-call]
                raise
            close_websocket(ws)

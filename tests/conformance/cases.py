"""The conformance and bad-input cases every runtime must pass, as data: each names a request, the
status it must get and the increments it must make to wirelab_server_requests_total. test_suite.py
sends every case to every runtime of its protocol. To add a case, append a Case to CASES."""

from __future__ import annotations

from dataclasses import dataclass, field

from wirelab.contract import grpc_outcome, http_outcome
from wirelab.v1 import wirelab_pb2 as pb

RUNTIMES = ("python", "node")
# Knobs every service of the suite starts with, whatever its runtime: small enough that a case
# over a limit sends little.
ENV = {
    "WIRELAB_MAX_PAYLOAD_BYTES": str(1024 * 1024),
    "WIRELAB_REST_BODY_TIMEOUT_SECONDS": "2",
}


@dataclass(frozen=True)
class Rest:
    """``data`` sent as is on a fresh connection, then the answer read until the server closes
    it (``http()`` asks it to) or ``timeout`` passes; with ``leave`` (a kind), the client
    instead closes the connection once a call of that kind is in flight, reading nothing."""

    data: bytes
    timeout: float = 10
    leave: str = ""


@dataclass(frozen=True)
class Grpc:
    """A call of ``method`` (of wirelab.v1.WireLab, or a whole path: ``/pkg.Service/Method``)
    with ``messages`` (encoded; several for a client stream) and
    ``metadata``; with ``cancel`` a client stream is cancelled once the server has received
    its messages, instead of being ended."""

    method: str
    messages: tuple[bytes, ...] = (b"",)
    metadata: tuple[tuple[str, str], ...] = ()
    cancel: bool = False
    timeout: float = 10


# (kind, outcome, code) -> how much that series of wirelab_server_requests_total must move.
Counts = dict[tuple[str, str, str], int]


@dataclass(frozen=True)
class Case:
    """``request`` must be answered ``status`` (an HTTP status or a gRPC code's name; None: the
    connection closed with no answer) and move exactly ``counts``, on every runtime in
    ``runtimes``; one left out says why in ``why``."""

    name: str
    request: Rest | Grpc
    status: int | str | None
    counts: Counts
    runtimes: tuple[str, ...] = RUNTIMES
    why: str = field(default="", compare=False)

    @property
    def protocol(self) -> str:
        return "rest" if isinstance(self.request, Rest) else "grpc"


def http(
    method: str, target: str, body: bytes | None = None, headers: tuple[tuple[str, str], ...] = ()
) -> bytes:
    """An HTTP/1.1 request asking the server to close after answering; ``body`` with its
    Content-Length unless ``headers`` state the length themselves."""
    lines = [f"{method} {target} HTTP/1.1", "Host: x", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers]
    stated = any(name.lower() in ("content-length", "transfer-encoding") for name, _ in headers)
    if body is not None and not stated:
        lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b"")


def post_json(target: str, body: bytes, *headers: tuple[str, str]) -> Rest:
    return Rest(http("POST", target, body, (("Content-Type", "application/json"), *headers)))


def get(target: str, *headers: tuple[str, str]) -> Rest:
    return Rest(http("GET", target, None, headers))


def counted(kind: str, code: int | str, n: int = 1) -> Counts:
    """One call of ``kind`` answered ``code``, with the outcome the metric contract gives it."""
    outcome = http_outcome(code) if isinstance(code, int) else grpc_outcome(code)
    return {(kind, outcome, str(code)): n}


def order(**fields: object) -> bytes:
    return pb.OrderRequest(**fields).SerializeToString()  # type: ignore[arg-type]


WEBSOCKET = (
    ("Connection", "Upgrade"),
    ("Upgrade", "websocket"),
    ("Sec-WebSocket-Version", "13"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
)

CASES: list[Case] = [
    # ------------------------------------------------------------------------------- REST
    Case("order-empty", post_json("/v1/orders", b"{}"), 200, counted("unary", 200)),
    Case(
        "order-negative-work",
        post_json("/v1/orders", b'{"work_ms":-1}'),
        400,
        counted("unary", 400),
    ),
    Case(
        "order-work-over-limit",
        post_json("/v1/orders", b'{"work_ms":1000000000}'),
        413,
        counted("unary", 413),
    ),
    Case(
        "order-bool-as-string",
        post_json("/v1/orders", b'{"count_words":"yes"}'),
        422,
        counted("unary", 422),
    ),
    Case(
        "order-quantity-past-2^64",
        post_json(
            "/v1/orders",
            b'{"order":{"items":[{"quantity":90071992547409930001,"unit_price_cents":1}]}}',
        ),
        400,
        counted("unary", 400),
    ),
    Case("unknown-path", get("/nope"), 404, counted("other", 404)),
    # Limits: refused from the stated length, before a body byte is read.
    Case(
        "order-stated-over-limit",
        Rest(
            http(
                "POST",
                "/v1/orders",
                b"",
                (("Content-Type", "application/json"), ("Content-Length", "10000000")),
            )
        ),
        413,
        counted("unary", 413),
    ),
    Case(
        "blob-stated-over-limit",
        Rest(http("POST", "/v1/blobs", b"", (("Content-Length", str(2 * 1024 * 1024)),))),
        413,
        counted("upload", 413),
    ),
    Case("download-over-limit", get("/v1/blobs?size=1048577"), 413, counted("download", 413)),
    # One rule for both runtimes on methods, trailing slashes and query integers.
    Case("head-on-get-route", Rest(http("HEAD", "/v1/blobs?size=1")), 405, counted("other", 405)),
    Case("order-trailing-slash", post_json("/v1/orders/", b"{}"), 307, counted("other", 307)),
    Case("stream-trailing-slashes", get("/v1/stream//?count=1"), 307, counted("other", 307)),
    Case("health-trailing-slash", get("/healthz/"), 307, counted("other", 307)),
    Case("root", get("/"), 404, counted("other", 404)),
    # What HTTP/1.1 itself leaves to a server, as uvicorn answers it.
    Case(
        "no-host-header",
        Rest(b"GET /v1/blobs?size=3 HTTP/1.1\r\nConnection: close\r\n\r\n"),
        200,
        counted("download", 200),
    ),
    Case(
        "expect-unknown",
        Rest(http("POST", "/v1/blobs", b"abc", (("Expect", "foo"),))),
        200,
        counted("upload", 200),
    ),
    Case(
        "content-length-shorter-than-body",
        Rest(http("POST", "/v1/blobs", b"abcdef", (("Content-Length", "3"),))),
        200,
        counted("upload", 200),
    ),
    Case(
        "garbage-pipelined-behind-a-request",
        Rest(b"GET /v1/blobs?size=3 HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n"),
        200,
        counted("download", 200),
        runtimes=("node",),
        why="uvicorn answers the garbage 400 in place of the request's answer, which it counts 200",
    ),
    Case("health-not-get", post_json("/healthz", b"{}"), 405, {}),
    Case("order-absolute-form", post_json("http://x/v1/orders", b"{}"), 200, counted("unary", 200)),
    Case(
        "stream-fragment-dropped",
        get("/v1/stream?count=1000000000#x"),
        413,
        counted("server_stream", 413),
    ),
    Case("query-int-bom", get("/v1/stream?count=%EF%BB%BF1"), 422, counted("server_stream", 422)),
    Case(
        "query-int-nel-trimmed", get("/v1/stream?count=%C2%851"), 200, counted("server_stream", 200)
    ),
    # A refused WebSocket handshake is no call (websockets refuses it before Python's app).
    Case(
        "websocket-version-8",
        get("/v1/pingpong", *WEBSOCKET[:2], ("Sec-WebSocket-Version", "8"), WEBSOCKET[3]),
        400,
        {},
    ),
    Case("websocket-no-key", get("/v1/pingpong", *WEBSOCKET[:3]), 400, {}),
    Case(
        "header-line-malformed",
        Rest(b"GET / HTTP/1.1\r\nHost x\r\n\r\n"),
        400,
        counted("other", 400),
        runtimes=("node",),
        why="uvicorn answers HTTP it cannot parse before the lab's code sees it, uncounted",
    ),
    Case(
        "query-int-zero-fraction", get("/v1/stream?count=1.0"), 200, counted("server_stream", 200)
    ),
    Case("query-int-underscore", get("/v1/stream?count=1_0"), 200, counted("server_stream", 200)),
    Case(
        "query-int-repeated-last-wins",
        get("/v1/stream?count=0&count=1000000000"),
        413,
        counted("server_stream", 413),
    ),
    Case("query-int-fraction", get("/v1/stream?count=1.5"), 422, counted("server_stream", 422)),
    Case("query-int-empty", get("/v1/stream?count="), 422, counted("server_stream", 422)),
    Case(
        "query-int-past-2^53",
        get("/v1/blobs?size=9007199254740993"),
        413,
        counted("download", 413),
    ),
    # An authority-like path is a path (Node read //x as a host and served the order).
    Case(
        "order-under-empty-segment",
        post_json("//x/v1/orders", b'{"order":{}}'),
        404,
        counted("other", 404),
    ),
    Case(
        "order-path-percent-encoded", post_json("/v1/%6Frders", b"{}"), 200, counted("unary", 200)
    ),
    # Bytes that are not UTF-8 are refused, not read as U+FFFD.
    Case(
        "order-note-not-utf8",
        post_json("/v1/orders", b'{"order":{"note":"\xff\xfe"}}'),
        400,
        counted("unary", 400),
    ),
    Case(
        "blob-json-not-utf8",
        post_json("/v1/blobs/json", b'{"data":"","x":"\xff"}'),
        422,
        counted("upload_json", 422),
    ),
    # What an order's Content-Type makes of its body, as FastAPI reads it.
    Case(
        "order-protobuf",
        Rest(http("POST", "/v1/orders", b"", (("Content-Type", "application/x-protobuf"),))),
        200,
        counted("unary", 200),
    ),
    Case(
        "order-protobuf-not-utf8",
        Rest(
            http(
                "POST",
                "/v1/orders",
                bytes.fromhex("0a040a02fffe"),
                (("Content-Type", "application/x-protobuf"),),
            )
        ),
        400,
        counted("unary", 400),
    ),
    Case(
        "order-protobuf-not-acceptable",
        Rest(
            http(
                "POST",
                "/v1/orders",
                b"",
                (("Content-Type", "application/x-protobuf"), ("Accept", "application/json")),
            )
        ),
        406,
        counted("unary", 406),
    ),
    Case(
        "order-text-plain",
        Rest(http("POST", "/v1/orders", b"{}", (("Content-Type", "text/plain"),))),
        422,
        counted("unary", 422),
    ),
    Case(
        "order-no-content-type", Rest(http("POST", "/v1/orders", b"{}")), 422, counted("unary", 422)
    ),
    Case(
        "order-json-suffix",
        Rest(http("POST", "/v1/orders", b"{}", (("Content-Type", "application/problem+json"),))),
        200,
        counted("unary", 200),
    ),
    Case("order-json-bom", post_json("/v1/orders", b"\xef\xbb\xbf{}"), 200, counted("unary", 200)),
    # An order's JSON is read as json.loads reads bytes: UTF-16 and UTF-32 told from the first
    # bytes, a surrogate's UTF-8 form text (refused where a string must be Unicode).
    Case(
        "order-json-utf-16",
        post_json("/v1/orders", '{"order":{"note":"h\u00e9"}}'.encode("utf-16-le")),
        200,
        counted("unary", 200),
    ),
    Case(
        "order-json-utf-32-bom",
        post_json("/v1/orders", '{"order":{"note":"h\u00e9"}}'.encode("utf-32")),
        200,
        counted("unary", 200),
    ),
    Case(
        "order-json-utf-16-odd-length",
        post_json("/v1/orders", '{"x":1}'.encode("utf-16-le") + b"\x00"),
        400,
        counted("unary", 400),
    ),
    Case(
        "order-note-surrogate-utf-8",
        post_json("/v1/orders", b'{"order":{"note":"\xed\xa0\x80"}}'),
        422,
        counted("unary", 422),
    ),
    Case(
        "order-unknown-field-surrogate-utf-8",
        post_json("/v1/orders", b'{"x":"\xed\xa0\x80"}'),
        200,
        counted("unary", 200),
    ),
    Case(
        "blob-json-bom",
        post_json("/v1/blobs/json", b'\xef\xbb\xbf{"data":""}'),
        422,
        counted("upload_json", 422),
    ),
    Case("path-with-empty-segment", get("//x"), 404, counted("other", 404)),
    Case("stream-negative-count", get("/v1/stream?count=-1"), 400, counted("server_stream", 400)),
    # Request targets no URL parser takes whole (each ended Node's process, with or without
    # Upgrade: no request may end a service).
    Case("target-bad-host", get("//["), 404, counted("other", 404)),
    Case("target-bad-port", get("//x:99999/"), 404, counted("other", 404)),
    Case("websocket-target-bad-host", get("//[", *WEBSOCKET), 403, counted("other", 403)),
    Case("websocket-target-bad-port", get("//x:99999/", *WEBSOCKET), 403, counted("other", 403)),
    Case("websocket-to-other-path", get("/nope", *WEBSOCKET), 403, counted("other", 403)),
    # ------------------------------------------------------------------------------- gRPC
    Case("grpc-order-empty", Grpc("ProcessOrder"), "OK", counted("unary", "OK")),
    Case(
        "grpc-order-work-over-limit",
        Grpc("ProcessOrder", (order(work_ms=10**9),)),
        "RESOURCE_EXHAUSTED",
        counted("unary", "RESOURCE_EXHAUSTED"),
    ),
    Case(
        "grpc-order-undecodable",
        Grpc("ProcessOrder", (b"\xff",)),
        "INVALID_ARGUMENT",
        counted("unary", "INVALID_ARGUMENT"),
    ),
    # A string field that is not UTF-8 (order_id = ff fe).
    Case(
        "grpc-order-not-utf8",
        Grpc("ProcessOrder", (bytes.fromhex("0a040a02fffe"),)),
        "INVALID_ARGUMENT",
        counted("unary", "INVALID_ARGUMENT"),
    ),
    # A client stream cancelled after its messages is CANCELLED, not OK.
    Case(
        "grpc-upload-stream-cancelled",
        Grpc("UploadStream", (pb.Chunk(data=b"x" * 1024).SerializeToString(),) * 3, cancel=True),
        "CANCELLED",
        counted("upload_chunked", "CANCELLED"),
    ),
    Case(
        "grpc-upload-stream",
        Grpc("UploadStream", (pb.Chunk(data=b"x" * 1024).SerializeToString(),) * 3),
        "OK",
        counted("upload_chunked", "OK"),
    ),
    Case(
        "grpc-pingpong-cancelled",
        Grpc("PingPong", (pb.Ping(seq=1).SerializeToString(),) * 2, cancel=True),
        "CANCELLED",
        counted("bidi", "CANCELLED"),
    ),
    Case(
        "grpc-pingpong",
        Grpc("PingPong", (pb.Ping(seq=1).SerializeToString(),) * 2),
        "OK",
        counted("bidi", "OK"),
    ),
    # Metadata past grpcio's hard limit (16 KiB) is refused at once, before any handler
    # (so neither runtime counts it). Node took up to 64 KiB, and past that failed the connection.
    Case(
        "grpc-metadata-one-value-over-16k",
        Grpc("ProcessOrder", metadata=(("x-big", "a" * 20_000),)),
        "RESOURCE_EXHAUSTED",
        {},
    ),
    Case(
        "grpc-metadata-many-values-over-16k",
        Grpc("ProcessOrder", metadata=tuple((f"x-m{i}", "a" * 1000) for i in range(40))),
        "RESOURCE_EXHAUSTED",
        {},
    ),
    Case(
        "grpc-upload-over-limit",
        Grpc("Upload", (pb.Blob(data=b"x" * (1024 * 1024 + 1)).SerializeToString(),)),
        "RESOURCE_EXHAUSTED",
        counted("upload", "RESOURCE_EXHAUSTED"),
    ),
    Case(
        "grpc-download-over-limit",
        Grpc("Download", (pb.BlobRequest(size=1024 * 1024 + 1).SerializeToString(),)),
        "RESOURCE_EXHAUSTED",
        counted("download", "RESOURCE_EXHAUSTED"),
    ),
    Case(
        "grpc-download-size-past-2^53",
        Grpc("Download", (pb.BlobRequest(size=2**53 + 1).SerializeToString(),)),
        "RESOURCE_EXHAUSTED",
        counted("download", "RESOURCE_EXHAUSTED"),
    ),
    # A method the server does not have is counted under kind "other"; health and reflection are
    # never measured, their unknown methods neither.
    Case("grpc-unknown-method", Grpc("Nope"), "UNIMPLEMENTED", counted("other", "UNIMPLEMENTED")),
    Case(
        "grpc-unknown-service", Grpc("/x.Y/Z"), "UNIMPLEMENTED", counted("other", "UNIMPLEMENTED")
    ),
    Case("grpc-unknown-health-method", Grpc("/grpc.health.v1.Health/Nope"), "UNIMPLEMENTED", {}),
    Case(
        "grpc-stream-count-over-limit",
        Grpc("StreamMessages", (pb.StreamRequest(count=10**9).SerializeToString(),)),
        "RESOURCE_EXHAUSTED",
        counted("server_stream", "RESOURCE_EXHAUSTED"),
    ),
    # A client that leaves mid-body is a departure (499), as on /v1/blobs, not a 400.
    Case(
        "order-client-leaves-mid-body",
        Rest(http("POST", "/v1/orders", b'{"order":', (("Content-Length", "500"),)), leave="unary"),
        None,
        counted("unary", 499),
    ),
    # An order whose client has gone stops working and counts 499 (it worked its
    # 20 s to the end and counted 200).
    Case(
        "order-client-leaves-while-working",
        Rest(post_json("/v1/orders", b'{"work_ms":20000}').data, leave="unary"),
        None,
        counted("unary", 499),
    ),
    # A stalled order body gets 408 and counts 408 (counted 400); ENV's body timeout.
    Case(
        "order-body-stalls",
        Rest(http("POST", "/v1/orders", b'{"order":{}, ', (("Content-Length", "100"),))),
        408,
        counted("unary", 408),
    ),
    # Past 64 KiB of request line and headers, 431, counted (70-120 KB were served, a
    # URL that long got uvicorn's bare 400).
    Case(
        "header-over-64-KiB",
        get("/v1/stream", ("X-Big", "a" * 70_000)),
        431,
        counted("other", 431),
    ),
    Case(
        "url-over-64-KiB",
        get("/v1/stream?x=" + "a" * 70_000),
        431,
        counted("other", 431),
    ),
    Case(
        "header-under-64-KiB",
        get("/v1/stream", ("X-Big", "a" * 60_000)),
        200,
        counted("server_stream", 200),
    ),
    # A protobuf order whose client has gone stops working and counts 499, as a JSON one does
    # (each REST runtime reads protobuf orders on a path of its own).
    Case(
        "protobuf-order-client-leaves-while-working",
        Rest(
            http(
                "POST",
                "/v1/orders",
                pb.OrderRequest(work_ms=20000).SerializeToString(),
                (("Content-Type", "application/x-protobuf"),),
            ),
            leave="unary",
        ),
        None,
        counted("unary", 499),
    ),
]

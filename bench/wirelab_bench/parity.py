"""Before measuring: the same inputs through REST and gRPC must give equivalent answers."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import grpc
import httpx
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

# Small but not trivial: every field type of the contract appears at least once.
ORDER = pb.OrderRequest(
    order=pb.Order(
        order_id="parity-1",
        customer_id="c-42",
        items=[
            pb.LineItem(sku="A-1", quantity=2, unit_price_cents=1999),
            pb.LineItem(sku="B-7", quantity=1, unit_price_cents=5),
        ],
        attributes={"channel": "bench", "é": "ünïcode"},
        note="one two  three\nfour",
    ),
    count_words=True,
)
BLOB_SIZE = 70_001  # not a power of two, so chunk boundaries are exercised
STREAM = pb.StreamRequest(count=3, size=17, interval_ms=0)


class ParityError(AssertionError):
    """The two protocols disagreed; the message says on what."""


class ParityCallFailed(ParityError):
    """A parity call got no answer at all: a service, or the way to it, is gone."""


def check_parity(
    rest_url: str, grpc_target: str, timeout: float = 30.0, h2c: bool = False
) -> list[str]:
    """Run each check on both protocols; return what was checked, raise ParityError if unequal.
    With ``h2c`` REST is called over cleartext HTTP/2 (prior knowledge), as h2c cells call it."""
    try:
        return _check(rest_url, grpc_target, timeout, h2c)
    except (httpx.HTTPError, grpc.RpcError) as exc:
        hint = " (REST over h2c needs the REST service on Granian: WIRELAB_REST_HTTP=2)"
        raise ParityCallFailed(
            f"parity check call failed: {type(exc).__name__}: {exc}{hint if h2c else ''}"
        ) from exc


def check_arm_parity(
    grpc_target: str, arm_target: str, name: str, timeout: float = 30.0
) -> list[str]:
    """The same order through the gRPC edge and through another gRPC service (the AMQP arm's
    edge, the Node.js service; ``name`` says which): the same reply, so both do the same work."""
    try:
        with (
            grpc.insecure_channel(grpc_target) as direct,
            grpc.insecure_channel(arm_target) as arm,
        ):
            want = pb_grpc.WireLabStub(direct).ProcessOrder(ORDER, timeout=timeout)
            got = pb_grpc.WireLabStub(arm).ProcessOrder(ORDER, timeout=timeout)
    except grpc.RpcError as exc:
        raise ParityCallFailed(f"parity check call failed: {type(exc).__name__}: {exc}") from exc
    if got != want:
        raise ParityError(f"unary ProcessOrder: {arm_target} {_dict(got)} != gRPC {_dict(want)}")
    return [f"unary ({name})"]


def _check(rest_url: str, grpc_target: str, timeout: float, h2c: bool) -> list[str]:
    base = rest_url.rstrip("/")
    with (
        httpx.Client(base_url=base, timeout=timeout, http1=not h2c, http2=h2c) as http,
        grpc.insecure_channel(grpc_target) as channel,
    ):
        stub = pb_grpc.WireLabStub(channel)
        _same(
            "unary ProcessOrder",
            _parse(http.post("/v1/orders", json=_dict(ORDER)), pb.OrderReply()),
            stub.ProcessOrder(ORDER, timeout=timeout),
        )
        data = bytes(range(256)) * (BLOB_SIZE // 256) + b"x" * (BLOB_SIZE % 256)
        want = pb.BlobDigest(size=len(data), sha256=hashlib.sha256(data).hexdigest())
        rest_up = http.post(
            "/v1/blobs", content=data, headers={"content-type": "application/octet-stream"}
        )
        _same("upload digest (REST)", _parse(rest_up, pb.BlobDigest()), want)
        _same("upload digest (gRPC)", stub.Upload(pb.Blob(data=data), timeout=timeout), want)
        rest_down = http.get("/v1/blobs", params={"size": BLOB_SIZE})
        rest_down.raise_for_status()
        grpc_down = stub.Download(pb.BlobRequest(size=BLOB_SIZE), timeout=timeout)
        _same(
            "download digest",
            pb.BlobDigest(size=len(rest_down.content), sha256=_sha(rest_down.content)),
            pb.BlobDigest(size=len(grpc_down.data), sha256=_sha(grpc_down.data)),
        )
        if rest_down.headers.get("x-wirelab-sha256") != grpc_down.sha256:
            raise ParityError("download: REST x-wirelab-sha256 header differs from gRPC sha256")
        rest_stream = http.get("/v1/stream", params=_dict(STREAM))
        rest_stream.raise_for_status()
        rest_msgs = [
            json_format.ParseDict(json.loads(line), pb.StreamMessage())
            for line in rest_stream.text.splitlines()
            if line.strip()
        ]
        grpc_msgs = list(stub.StreamMessages(STREAM, timeout=timeout))
        if rest_msgs != grpc_msgs:
            raise ParityError(f"server_stream: REST sent {rest_msgs!r}, gRPC sent {grpc_msgs!r}")
    return ["unary", "upload", "download", "server_stream"]


def _dict(message: Message) -> dict[str, Any]:
    """Proto JSON, except 64-bit integers as JSON numbers, as the REST contract has them."""
    return _numbers(message, json_format.MessageToDict(message, preserving_proto_field_name=True))


_INT64 = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)


def _numbers(message: Message, d: dict[str, Any]) -> dict[str, Any]:
    for f in message.DESCRIPTOR.fields:
        if f.name not in d:
            continue
        value = getattr(message, f.name)
        if f.type in _INT64:
            d[f.name] = [int(v) for v in d[f.name]] if f.is_repeated else int(d[f.name])
        elif f.message_type is not None and not f.message_type.GetOptions().map_entry:
            if f.is_repeated:
                d[f.name] = [_numbers(m, x) for m, x in zip(value, d[f.name], strict=True)]
            else:
                d[f.name] = _numbers(value, d[f.name])
    return d


def _parse(response: httpx.Response, message: Message) -> Message:
    if response.status_code != 200:
        raise ParityError(f"{response.request.url.path}: HTTP {response.status_code}")
    return json_format.ParseDict(response.json(), message, ignore_unknown_fields=False)


def _same(what: str, rest: Message, other: Message) -> None:
    if rest != other:
        raise ParityError(f"{what}: REST {_dict(rest)} != gRPC {_dict(other)}")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

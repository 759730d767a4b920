"""gRPC users: gevent-patched grpcio, one channel per user, every RPC kind timed stream-aware."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import grpc.experimental.gevent as grpc_gevent
from gevent.queue import Queue
from wirelab.contract import grpc_outcome
from wirelab.contract.table import value
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from locust import User
from wirelab_locust import content
from wirelab_locust.lab import LabUserMixin
from wirelab_locust.timing import Call, CallError, WrongAnswer

# grpcio must be patched for gevent before the first channel exists: unpatched, a blocking call
# holds the whole process and users run one at a time, so every figure would be fiction.
grpc_gevent.init_gevent()

_MAX_MESSAGE = int(value("WIRELAB_MAX_PAYLOAD_BYTES")) + 1024 * 1024


class GrpcLabUser(LabUserMixin, User):
    """A Locust user with its own gRPC channel; subclasses declare one @task per kind (an arm
    measured through a gRPC edge sets ``protocol`` to its own name: Knobs.targets)."""

    abstract = True
    protocol = "grpc"

    def on_start(self) -> None:
        self.setup_lab()
        self.channel = grpc.insecure_channel(
            self.knobs.targets[self.protocol],
            options=[
                ("grpc.max_send_message_length", _MAX_MESSAGE),
                ("grpc.max_receive_message_length", _MAX_MESSAGE),
            ],
        )
        self.stub = pb_grpc.WireLabStub(self.channel)
        body = content.order(id(self), self.knobs.note_words)
        self.order_items = content.expected_totals(body)
        self.order_request = pb.OrderRequest(
            order=pb.Order(**{**body, "items": [pb.LineItem(**i) for i in body["items"]]}),
            work_ms=self.knobs.work_ms,
            count_words=self.knobs.count_words,
        )
        self.order_bytes = self.order_request.ByteSize()
        self.blob = pb.Blob(data=content.payload(self.knobs.payload_bytes))

    def on_stop(self) -> None:
        self.channel.close()

    @contextmanager
    def timed(self, kind: str) -> Iterator[Call]:
        call = Call(self.environment, self.protocol, kind, self.knobs.fail_over_ms, self.peer)
        try:
            yield call
        except grpc.RpcError as error:
            code = error.code()
            name = code.name if code is not None else "UNKNOWN"
            # UNAVAILABLE on the client means no connection, not a server answer.
            outcome = "connection_error" if name == "UNAVAILABLE" else grpc_outcome(name)
            call.finish(CallError(outcome, name, str(error.details())))
        except Exception as error:
            call.finish(error)
        else:
            call.finish()

    def unary(self) -> None:
        with self.timed("unary") as call:
            call.sent(self.order_bytes)
            reply = self.stub.ProcessOrder(self.order_request, timeout=self.knobs.call_timeout)
            call.received(reply.ByteSize())
            call.check(
                (reply.item_count, reply.total_cents) == self.order_items
                and reply.order_id == self.order_request.order.order_id,
                "order totals differ from what was sent",
            )

    def server_stream(self) -> None:
        k = self.knobs
        with self.timed("server_stream") as call:
            request = pb.StreamRequest(
                count=k.stream_count, size=k.stream_size, interval_ms=k.stream_interval_ms
            )
            call.sent(request.ByteSize())
            for seq, message in enumerate(
                self.stub.StreamMessages(request, timeout=k.call_timeout)
            ):
                call.received(message.ByteSize())
                call.check(message.seq == seq and len(message.payload) == k.stream_size, "message")
            call.check(call.messages_in == k.stream_count, "wrong message count")

    def upload(self) -> None:
        k = self.knobs
        with self.timed("upload") as call:
            call.sent(self.blob.ByteSize())
            reply = self.stub.Upload(self.blob, timeout=k.call_timeout)
            call.received(reply.ByteSize())
            content.check_blob(k.payload_bytes, reply.size, reply.sha256)

    def upload_chunked(self) -> None:
        k = self.knobs

        def chunks() -> Iterator[pb.Chunk]:
            for piece in content.chunks(k.payload_bytes, k.chunk_bytes):
                chunk = pb.Chunk(data=piece)
                call.sent(chunk.ByteSize())
                yield chunk

        with self.timed("upload_chunked") as call:
            reply = self.stub.UploadStream(chunks(), timeout=k.call_timeout)
            call.received(reply.ByteSize())
            content.check_blob(k.payload_bytes, reply.size, reply.sha256)

    def download(self) -> None:
        k = self.knobs
        with self.timed("download") as call:
            request = pb.BlobRequest(size=k.payload_bytes)
            call.sent(request.ByteSize())
            blob = self.stub.Download(request, timeout=k.call_timeout)
            call.received(blob.ByteSize())
            content.check_blob(k.payload_bytes, blob.size, blob.sha256)
            content.check_blob(
                k.payload_bytes, len(blob.data), hashlib.sha256(blob.data).hexdigest()
            )

    def download_chunked(self) -> None:
        k = self.knobs
        with self.timed("download_chunked") as call:
            request = pb.BlobRequest(size=k.payload_bytes, chunk_size=k.chunk_bytes)
            call.sent(request.ByteSize())
            responses = self.stub.DownloadStream(request, timeout=k.call_timeout)
            header = dict(responses.initial_metadata())
            hasher, size = hashlib.sha256(), 0
            for chunk in responses:
                call.received(chunk.ByteSize())
                hasher.update(chunk.data)
                size += len(chunk.data)
            size_header = int(header.get("x-wirelab-size", -1))
            content.check_blob(k.payload_bytes, size_header, str(header.get("x-wirelab-sha256")))
            content.check_blob(k.payload_bytes, size, hasher.hexdigest())

    def bidi(self) -> None:
        k = self.knobs
        data = content.payload(k.ping_bytes)
        outbox: Queue[pb.Ping | None] = Queue()

        def pings() -> Iterator[pb.Ping]:
            # grpcio drains this iterator in its own greenlet; the queue hands it one ping at a
            # time so each ping waits for its pong (ping-pong, not a pipelined burst).
            while (ping := outbox.get()) is not None:
                yield ping

        with self.timed("bidi") as call:
            responses = self.stub.PingPong(pings(), timeout=k.call_timeout)
            pongs = iter(responses)
            try:
                for seq in range(k.ping_count):
                    ping = pb.Ping(seq=seq, payload=data)
                    call.sent(ping.ByteSize())
                    outbox.put(ping)
                    pong = next(pongs, None)
                    if pong is None:
                        raise WrongAnswer(f"stream ended after {seq} pongs")
                    call.received(pong.ByteSize())
                    call.check(pong.seq == seq and pong.payload == data, "pong is not the ping")
                outbox.put(None)
                call.check(next(pongs, None) is None, "pong without a ping")
            finally:
                outbox.put(None)
                responses.cancel()

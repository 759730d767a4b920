"""Baseline for the overhead benchmark: Locust's documented REST and gRPC patterns, no lab glue."""

from __future__ import annotations

import time

import grpc
import grpc.experimental.gevent as grpc_gevent
from wirelab.contract.table import value
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc
from wirelab_locust.content import order

from locust import FastHttpUser, User, constant, constant_throughput, task

# Locust's gRPC example: patch grpcio for gevent before any channel exists.
grpc_gevent.init_gevent()

# The same order the lab users send, so both arms ask the server for the same work.
ORDER = order(0, 16)
BODY = {"order": ORDER, "work_ms": 0, "count_words": False}
REQUEST = pb.OrderRequest(
    order=pb.Order(**{**ORDER, "items": [pb.LineItem(**i) for i in ORDER["items"]]})
)


# Task runs per second per user, for the cross-check at a fixed offered load; 0 = no wait.
PACE: float = value("WIRELAB_BASELINE_PACE")
WAIT = constant_throughput(PACE) if PACE > 0 else constant(0)


class BareRest(FastHttpUser):
    """Locust's FastHttpUser as documented: self.client.post, Locust times and names it."""

    wait_time = WAIT

    @task
    def unary(self) -> None:
        self.client.post("/v1/orders", json=BODY)


class BareGrpc(User):
    """Locust's gRPC example: one channel per user (-H is the target), an event per call."""

    wait_time = WAIT

    def on_start(self) -> None:
        self.channel = grpc.insecure_channel(str(self.host))
        self.stub = pb_grpc.WireLabStub(self.channel)

    def on_stop(self) -> None:
        self.channel.close()

    @task
    def unary(self) -> None:
        start = time.perf_counter()
        error: Exception | None = None
        try:
            self.stub.ProcessOrder(REQUEST)
        except grpc.RpcError as exc:
            error = exc
        self.environment.events.request.fire(
            request_type="grpc",
            name="ProcessOrder",
            response_time=(time.perf_counter() - start) * 1000,
            response_length=0,
            exception=error,
            context={},
        )

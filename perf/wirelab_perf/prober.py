"""A light probe beside a load tool: one small order call every interval, timed, into a series."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import grpc
import httpx
from google.protobuf import json_format
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc

from wirelab_perf import ORDER
from wirelab_perf.svcprocs import Service

T = TypeVar("T")


@dataclass(frozen=True)
class Probe:
    at: float  # time.monotonic() when the call started
    seconds: float
    ok: bool


def rest_call(url: str, timeout: float) -> tuple[Callable[[], bool], Callable[[], None]]:
    client = httpx.Client(base_url=url, timeout=timeout)
    return (lambda: client.post("/v1/orders", json=ORDER).status_code == 200), client.close


def grpc_call(target: str, timeout: float) -> tuple[Callable[[], bool], Callable[[], None]]:
    channel = grpc.insecure_channel(target)
    stub = pb_grpc.WireLabStub(channel)
    request = json_format.ParseDict(ORDER, pb.OrderRequest())  # the JSON mirror, as ghz sends it

    def call() -> bool:
        stub.ProcessOrder(request, timeout=timeout)
        return True

    return call, channel.close


@contextmanager
def periodic(interval: float, sample: Callable[[], T]) -> Iterator[list[T]]:
    """Call ``sample`` every ``interval`` seconds on a thread until the block ends; yields the
    results, filled in as calls complete. A call that overruns its slot skips the slots it
    missed, so a slow answer never turns into a burst of calls."""
    results: list[T] = []
    stop = threading.Event()

    def loop() -> None:
        start = time.monotonic()
        slot = 0
        while not stop.wait(max(0.0, start + slot * interval - time.monotonic())):
            results.append(sample())
            slot = int((time.monotonic() - start) / interval) + 1

    thread = threading.Thread(target=loop, name="periodic", daemon=True)
    thread.start()
    try:
        yield results
    finally:
        stop.set()
        thread.join()


@contextmanager
def probing(svc: Service, interval: float, timeout: float = 5.0) -> Iterator[list[Probe]]:
    """One small order call to ``svc`` every ``interval`` seconds until the block ends: a
    refusal or an error is a probe that is not ok."""
    make = rest_call if svc.protocol == "rest" else grpc_call
    call, close = make(svc.address, timeout)

    def probe() -> Probe:
        began = time.monotonic()
        try:
            ok = call()
        except (httpx.HTTPError, grpc.RpcError):
            ok = False
        return Probe(began, time.monotonic() - began, ok)

    try:
        with periodic(interval, probe) as probes:
            yield probes
    finally:
        close()


def median_ms(probes: Sequence[Probe]) -> float:
    """Median time of the successful probes, in ms (nan if none succeeded)."""
    times = [p.seconds * 1000 for p in probes if p.ok]
    return statistics.median(times) if times else float("nan")


def between(probes: Sequence[Probe], start: float, end: float) -> list[Probe]:
    return [p for p in probes if start <= p.at < end]


def recovery_seconds(
    probes: Sequence[Probe], end: float, threshold_ms: float, window: float = 1.0
) -> float | None:
    """Seconds after ``end`` (when the load stopped) from which every window of probes is good:
    each probe answered and the window's median at most ``threshold_ms``. A window without any
    probe is not good (the service did not even answer in time). None: not recovered by the last
    window. Counted in whole windows, so 0.0 means the first window after the load was good."""
    after = [p for p in probes if p.at >= end]
    if not after:
        return None
    count = int((after[-1].at - end) // window) + 1
    good = []
    for i in range(count):
        inside = between(after, end + i * window, end + (i + 1) * window)
        answered = bool(inside) and all(p.ok for p in inside)
        good.append(answered and median_ms(inside) <= threshold_ms)
    if not good[-1]:
        return None
    first = count
    while first > 0 and good[first - 1]:
        first -= 1
    return first * window

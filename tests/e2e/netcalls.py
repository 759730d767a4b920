"""Tiny calls timed direct and through the lab's Toxiproxy, for the network e2e tests."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from functools import partial

import grpc
import httpx
from wirelab.v1 import wirelab_pb2 as pb
from wirelab.v1 import wirelab_pb2_grpc as pb_grpc
from wirelab_bench.cli import main
from wirelab_bench.network import Profile

CALLS = 25
Timed = dict[str, dict[str, float]]  # protocol -> path ("direct", "proxy", ...) -> median ms
# The small order the topology tests send to an edge, which relays it to its downstream.
ORDER = {"order": {"order_id": "hop", "customer_id": "c", "items": [{"sku": "s", "quantity": 1}]}}
ORDER_PB = pb.OrderRequest(
    order=pb.Order(order_id="hop", customer_id="c", items=[pb.LineItem(sku="s", quantity=1)])
)


def order_rest(client: httpx.Client) -> object:
    return client.post("/v1/orders", json=ORDER).raise_for_status()


def order_grpc(channel: grpc.Channel) -> object:
    return pb_grpc.WireLabStub(channel).ProcessOrder(ORDER_PB, timeout=10)


def median_ms(call: Callable[[], object]) -> float:
    """The median of CALLS timed calls, after one untimed call that sets the connection up (as a
    pooled client's is)."""
    call()
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def medians(
    rest: Mapping[str, str],
    grpc_targets: Mapping[str, str],
    rest_call: Callable[[httpx.Client], object],
    grpc_call: Callable[[grpc.Channel], object],
) -> Timed:
    """Per protocol and path, the median ms of ``rest_call`` on one client of each base URL and of
    ``grpc_call`` on one channel to each target."""
    timed: Timed = {"rest": {}, "grpc": {}}
    for path, base in rest.items():
        with httpx.Client(base_url=base, timeout=10) as client:
            timed["rest"][path] = median_ms(partial(rest_call, client))
    for path, target in grpc_targets.items():
        with grpc.insecure_channel(target) as channel:
            timed["grpc"][path] = median_ms(partial(grpc_call, channel))
    return timed


def set_network(toxiproxy_api: str, profile: str, hops: str = "") -> None:
    """`wirelab network <profile> [--hops <hops>]` on the lab's Toxiproxy, as a user runs it."""
    extra = ["--hops", hops] if hops else []
    assert main(["network", profile, *extra, "--toxiproxy-url", toxiproxy_api]) == 0


def round_trips(profile: Profile, trips: int = 1) -> tuple[float, float]:
    """The bounds of an added delay that is ``trips`` round trips of ``profile``: more than the
    least ``trips`` can add, ``trips * (rtt - jitter)``, and less than the least one trip more can
    add. What the tests tell apart is a path paying the profile as often as it crosses a proxy,
    not once too few, not once too many.

    The upper bound sits there, not at the profile's most, because a loaded 2-core machine only
    adds: Toxiproxy delays each chunk it reads by the latency plus a draw of its own from the
    jitter, in order, so a message that reaches it in several reads pays the largest of their
    draws, and on top come the services' own times, stretched under load. A hop inside the lab
    (A's call to B, or to the cluster's nginx or replicas) read 50.9 and 52.7 ms under ``region``
    in two CI runs (29-30 Nov) and 55.1 and 57.0 ms in the cluster in two more (30 Nov), against
    41-42 ms on this machine idle and 42.4 ms with four busy loops on its two cores."""
    least = profile.rtt_ms - profile.jitter_ms
    return trips * least, (trips + 1) * least

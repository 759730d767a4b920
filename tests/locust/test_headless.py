"""Standalone Locust runs against both real services: every kind counted, metrics match Locust."""

from __future__ import annotations

import pytest
from wirelab.contract import (
    CALLS,
    DURATION_BUCKETS,
    EDGE_PROTOCOLS,
    KINDS_BY_PROTOCOL,
    STREAM_KINDS,
)
from wirelab_locust.metrics import bucket_bounds

from tests.locust.conftest import ALL_KINDS, LocustRun, Samples, Services, get, total, wait_for

pytestmark = pytest.mark.integration
PAYLOAD = 65536


def assert_metrics_match_locust(run: LocustRun) -> dict[tuple[str, str], int]:
    """/metrics (client histograms) and Locust's own CSV count every call once, the same way."""
    samples = run.metrics()
    counts = {}
    for row in run.stats_rows():
        protocol, (kind, call) = row["Type"], row["Name"].split("/")
        labels = {"protocol": protocol, "kind": kind, "call": call}
        requests = int(row["Request Count"])
        assert total(samples, "wirelab_client_requests_total", **labels) == requests, row
        assert total(samples, "wirelab_client_request_duration_seconds_count", **labels) == requests
        failures = requests - total(
            samples, "wirelab_client_requests_total", **labels, outcome="ok"
        )
        assert failures == int(row["Failure Count"]), row
        counts[(protocol, kind)] = requests
    return counts


def test_every_kind_of_both_protocols_runs_without_failures(
    services: Services, locust_run: LocustRun
) -> None:
    run = locust_run.start(
        services,
        *("-u", "6", "-r", "6", "-t", "5s", "--mix", ALL_KINDS),
        *("--payload-bytes", str(PAYLOAD), "--chunk-bytes", "16384"),
        *("--stream-count", "5", "--ping-count", "4"),
    )
    # The users gauge follows the runner while the swarm is on.
    wait_for("users gauge", lambda: run.metrics()[("wirelab_client_users", ())] == 6, 15)
    run.wait_stopped()
    counts = assert_metrics_match_locust(run)
    expected = {(p, k) for p in EDGE_PROTOCOLS for k in KINDS_BY_PROTOCOL[p]}
    assert set(counts) == expected
    assert all(n > 0 for n in counts.values()), counts
    assert all(int(r["Failure Count"]) == 0 for r in run.stats_rows()), run.stats_rows()

    samples = run.metrics()
    for protocol, kind in expected:
        labels = {"protocol": protocol, "kind": kind, "call": CALLS[kind]}
        calls = counts[(protocol, kind)]
        if kind.startswith("download"):
            got = total(samples, "wirelab_client_response_bytes_sum", **labels)
            assert got >= calls * PAYLOAD, (protocol, kind)
        if kind.startswith("upload"):
            assert total(samples, "wirelab_client_request_bytes_sum", **labels) >= calls * PAYLOAD
        if kind in STREAM_KINDS:
            assert_first_message_before_end(samples, labels, calls)
    stream = {"protocol": "grpc", "kind": "server_stream", "call": "StreamMessages"}
    grpc_streams = counts[("grpc", "server_stream")]
    assert total(samples, "wirelab_client_messages_received_total", **stream) == 5 * grpc_streams
    pings = {"protocol": "rest", "kind": "bidi", "call": "PingPong"}
    rounds = 4 * counts[("rest", "bidi")]
    assert total(samples, "wirelab_client_messages_sent_total", **pings) == rounds
    assert total(samples, "wirelab_client_messages_received_total", **pings) == rounds


def assert_first_message_before_end(samples: Samples, labels: dict[str, str], calls: int) -> None:
    """Each call's first message comes no later than its end, so at every bucket bound at least
    as many calls had their first message as had finished."""
    first = "wirelab_client_time_to_first_message_seconds"
    whole = "wirelab_client_request_duration_seconds"
    assert total(samples, f"{first}_count", **labels) == calls
    assert 0 < total(samples, f"{first}_sum", **labels) <= total(samples, f"{whole}_sum", **labels)
    for le in bucket_bounds(DURATION_BUCKETS):
        firsts = total(samples, f"{first}_bucket", **labels, le=le)
        ends = total(samples, f"{whole}_bucket", **labels, le=le)
        assert firsts >= ends, (labels, le)


def test_failure_threshold_turns_slow_calls_into_failures(
    services: Services, locust_run: LocustRun
) -> None:
    run = locust_run.start(
        services,
        *("-u", "2", "-r", "2", "-t", "2s", "--mix", "unary=1", "--protocols", "grpc"),
        *("--work-ms", "5", "--fail-over-ms", "2"),
    )
    run.wait_stopped()
    (row,) = run.stats_rows()
    assert row["Type"] == "grpc" and int(row["Request Count"]) > 0
    assert row["Failure Count"] == row["Request Count"]
    samples = run.metrics()
    slow = total(samples, "wirelab_client_requests_total", protocol="grpc", outcome="failure")
    assert slow == int(row["Request Count"])
    assert total(samples, "wirelab_client_requests_total", protocol="rest") == 0


def test_named_shape_drives_the_run_and_ends_it(services: Services, locust_run: LocustRun) -> None:
    # order-chain-low is 10 users for 60 s; scaled by 0.05 it is 10 users for 3 s.
    run = locust_run.start(
        services,
        *("--shape", "order-chain-low", "--shape-time-scale", "0.05", "--mix", "unary=1"),
    )
    wait_for("10 users", lambda: run.metrics()[("wirelab_client_users", ())] == 10, 15)
    run.wait_stopped()
    counts = assert_metrics_match_locust(run)
    assert counts[("rest", "unary")] > 0 and counts[("grpc", "unary")] > 0
    assert "load shape order-chain-low" in run.log()
    assert get(run.url("/")) != b""


def test_the_amqp_arms_user_calls_its_own_target_and_labels_its_calls_amqp(
    services: Services, locust_run: LocustRun
) -> None:
    """`--protocols amqp` runs only AmqpUser, against --amqp-target (here the plain gRPC service:
    the arm's edge is a gRPC server too), and every call and zero series says protocol amqp."""
    run = locust_run.start(
        services,
        *("-u", "2", "-r", "2", "-t", "3s", "--protocols", "amqp"),
        *("--amqp-target", services.grpc, "--grpc-target", "127.0.0.1:9"),
    )
    run.wait_stopped()
    counts = assert_metrics_match_locust(run)
    assert set(counts) == {("amqp", "unary")} and counts[("amqp", "unary")] > 0
    assert all(int(r["Failure Count"]) == 0 for r in run.stats_rows()), run.stats_rows()
    outcomes = {
        dict(labels)["outcome"]
        for name, labels in run.metrics()
        if name == "wirelab_client_requests_total" and dict(labels)["protocol"] == "amqp"
    }
    assert {"ok", "server_error"} <= outcomes  # pre-initialised once the arm is chosen

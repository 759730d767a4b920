"""The REST user's chunked upload is not held back by Nagle's algorithm waiting on a delayed ACK."""

from __future__ import annotations

import pytest

from tests.locust.conftest import LocustRun, Services, total

pytestmark = pytest.mark.integration
SIZE = 16384


def test_small_chunked_upload_does_not_wait_for_a_delayed_ack(
    services: Services, locust_run: LocustRun
) -> None:
    # geventhttpclient writes the head, each chunk and the closing "0\r\n\r\n" with separate
    # sends. With Nagle on, the chunk waits for the head's ACK, which the server delays (it has
    # nothing to answer yet): Linux's delayed-ACK timer, 40 ms, then sat in every call (about
    # 44 ms median here before the fix; 0.4 ms with TCP_NODELAY, curl and gRPC set it too). An
    # absolute bound fits: 40 ms is a protocol timer, not a speed, and a loopback call of
    # 16 KiB takes a few ms even on a busy core, so half the calls above 15 ms means the timer.
    run = locust_run.start(
        services,
        *("-u", "1", "-r", "1", "-t", "4s", "--protocols", "rest", "--mix", "upload_chunked=1"),
        *("--payload-bytes", str(SIZE), "--chunk-bytes", str(SIZE)),
    )
    run.wait_stopped()
    samples = run.metrics()
    labels = {"protocol": "rest", "kind": "upload_chunked", "call": "UploadStream"}
    calls = total(samples, "wirelab_client_request_duration_seconds_count", **labels)
    under = total(samples, "wirelab_client_request_duration_seconds_bucket", **labels, le="0.015")
    assert calls >= 20, run.log()
    assert total(samples, "wirelab_client_requests_total", **labels, outcome="ok") == calls
    assert under / calls > 0.5, f"{under:.0f} of {calls:.0f} calls under 15 ms"

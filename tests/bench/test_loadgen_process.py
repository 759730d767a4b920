"""wirelab-loadgen (the built binary) against the real services on loopback: every call it
counts is one the service counts, on REST over HTTP/1.1 and h2c and on gRPC, open and closed."""

from __future__ import annotations

import pytest
from wirelab_bench.loadgen import BINARY, run_closed, run_open
from wirelab_bench.scrape import scrape
from wirelab_perf.crosscheck import BODY
from wirelab_perf.svcprocs import Service, service

from tests.bench.lab import require_loadgen

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", autouse=True)
def binary() -> None:
    require_loadgen()


def unary_ok(svc: Service) -> float:
    samples = scrape(svc.metrics_url, "svc", names=("wirelab_server_requests_total",))
    return sum(v for _, got, v in samples if (got["kind"], got["outcome"]) == ("unary", "ok"))


@pytest.mark.parametrize(
    ("protocol", "extra", "http"),
    [("rest", (), "1.1"), ("rest", ("--rest-http", "2"), "h2c"), ("grpc", (), "1.1")],
    ids=["rest-http1.1", "rest-h2c-granian", "grpc"],
)
def test_every_call_the_generator_counts_reaches_the_service(
    protocol: str, extra: tuple[str, ...], http: str
) -> None:
    workers = 4
    with service(protocol, 0, extra) as svc:
        before = unary_ok(svc)
        run = run_open(BINARY, protocol, svc.address, BODY, 100, workers, 2, http=http)
        # Every arrival of the schedule is answered or dropped (no worker free at its time: a
        # loaded machine drops some), none lost; whether it kept time is not this test's.
        assert run.failed == 0 and run.answered + run.dropped == 200 and run.answered > 0, run
        closed = run_closed(BINARY, protocol, svc.address, BODY, 2, 1, fail_over_ms=0)
        assert closed.answered_per_s > 10 and closed.failed == 0, closed
        # Each run first sends one warm-up call per worker, before its clock starts.
        warm = workers + 2
        served = unary_ok(svc) - before
        assert served == run.answered + round(closed.answered_per_s * 1) + warm


def test_a_target_that_cannot_answer_stops_the_run_with_the_reason() -> None:
    with pytest.raises(RuntimeError, match="connection_error"):
        run_open(BINARY, "rest", "http://127.0.0.1:9", BODY, 10, 1, 1)

"""The observer-effect benchmark scrapes like the lab's Prometheus and pairs its rounds."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
import yaml
from wirelab.contract.table import BY_ENV
from wirelab_bench import medians
from wirelab_perf import overhead
from wirelab_perf.overhead import Run, paired_ratios, scraping

from tests.config.queries import REPO, seconds

PROMETHEUS_YML = REPO / "prometheus" / "prometheus.yml"


def test_default_scrape_interval_is_the_labs() -> None:
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    default = BY_ENV["WIRELAB_OBSERVER_SCRAPE_INTERVAL"].value
    for job in ("rest", "grpc"):
        interval = jobs[job].get("scrape_interval", config["global"]["scrape_interval"])
        assert seconds(interval) == default, f"{job} is scraped every {interval}"


def test_paired_ratios_pair_each_round_per_cpu_second() -> None:
    on = [Run(90, 1.0), Run(45, 0.5)]
    off = [Run(100, 1.0), Run(200, 2.0)]
    assert paired_ratios(on, off) == [0.9, 0.9]


def test_each_fresh_pair_is_loaded_for_the_warmup_before_its_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loads: list[tuple[list[str], int]] = []

    def together(count: Any, services: Sequence[str], seconds: int, every: float) -> list[Run]:
        loads.append((list(services), seconds))
        return [Run(100, 1.0), Run(90, 1.0)]

    monkeypatch.setattr(overhead, "together", together)
    started: list[str] = []

    def starter(name: str) -> Any:
        def start() -> Any:
            started.append(name)
            return nullcontext(name)

        return start

    first, second = overhead.measure_pairs(
        "t", lambda svc, seconds: 0, ("on", starter("on")), ("off", starter("off")),
        rounds=4, pairs=2, seconds=3, every=1.0, warmup=8,
    )  # fmt: skip
    # Each pair: a warm-up of 8 s, then its rounds of 3 s, the load order alternating.
    assert [s for _, s in loads] == [8, 3, 3, 8, 3, 3]
    assert [order for order, _ in loads] == [
        ["on", "off"], ["on", "off"], ["off", "on"], ["on", "off"], ["on", "off"], ["off", "on"],
    ]  # fmt: skip
    assert started == ["on", "off", "off", "on"]  # fresh processes per pair, first one alternating
    assert len(first) == len(second) == 4


def test_verdict_needs_the_whole_interval() -> None:
    assert overhead.verdict(0.97, 0.99, control=False, rounds=32) == "meets the goal"
    assert overhead.verdict(0.95, 0.969, control=False, rounds=32) == "MISSES the goal"
    assert "undecided" in overhead.verdict(0.96, 0.98, control=False, rounds=32)
    assert "control" in overhead.verdict(0.99, 1.01, control=True, rounds=32)


def test_too_few_rounds_decide_nothing() -> None:
    # Five rounds: the whole range, which holds the median only 15/16 of the time.
    assert not medians.decides(5)
    assert medians.decides(6)
    assert "too few rounds" in overhead.verdict(0.96, 0.97, control=False, rounds=5)


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []
    status = 200

    def do_GET(self) -> None:
        type(self).seen.append(dict(self.headers))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"x 1\n\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def target() -> Iterator[str]:
    _Recorder.seen, _Recorder.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def test_scraping_asks_like_prometheus_at_the_interval(target: str) -> None:
    # Waits for the scrapes rather than a fixed time, so a busy machine slows it, never fails it;
    # at most one scrape per interval (plus the first, at once) shows the pacing.
    began = time.monotonic()
    with scraping(target, 0.05) as sizes:
        while len(sizes) < 3 and time.monotonic() - began < 10:
            time.sleep(0.01)
        elapsed = time.monotonic() - began
    assert 3 <= len(sizes) <= elapsed / 0.05 + 2
    assert set(sizes) == {5}
    assert len(_Recorder.seen) == len(sizes)
    assert _Recorder.seen[0]["Accept"].startswith("application/openmetrics-text")
    assert _Recorder.seen[0]["Accept-Encoding"] == "gzip"


def test_scraping_off_sends_nothing(target: str) -> None:
    with scraping(target, 0) as sizes:
        time.sleep(0.1)
    assert sizes == []
    assert _Recorder.seen == []


def test_a_failed_scrape_fails_the_run(target: str) -> None:
    _Recorder.status = 500
    with pytest.raises(RuntimeError, match=r"scraping .* failed"), scraping(target, 0.02):
        time.sleep(0.2)


def test_median_interval_is_the_binomial_one() -> None:
    # The textbook ranks for 30 values at 95 %: the 10th and the 21st.
    assert medians.median_interval([float(v) for v in range(30, 0, -1)]) == (10.0, 21.0)
    # Five values cannot pin the median at 95 % (1/32 per tail): the whole range.
    assert medians.median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) == (1.0, 5.0)
    low, high = medians.median_interval([0.9] * 10 + [1.0] * 11)
    assert low == 0.9
    assert high == 1.0


@dataclass
class _FakeService:
    """What together() uses of a Service: its scrape address and its CPU clock."""

    name: str
    metrics_url: str
    cpu: list[float]

    def cpu_seconds(self) -> float:
        return self.cpu.pop(0)


def test_together_loads_every_service_at_once_each_scraped_per_its_share(target: str) -> None:
    spans: dict[str, tuple[float, float]] = {}

    def count(svc: Any, seconds: int) -> int:
        began = time.monotonic()
        time.sleep(0.4)
        spans[svc.name] = (began, time.monotonic())
        return 100 if svc.name == "a" else 50

    a, b = _FakeService("a", target, [1.0, 1.5]), _FakeService("b", target, [3.0, 3.25])
    runs = overhead.together(count, [a, b], 2, 0.05)  # type: ignore[list-item]
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values())
    measured = [(r.requests, r.cpu_seconds, r.per_cpu) for r in runs]
    assert measured == [(100, 0.5, 200), (50, 0.25, 200)]
    # Two services share the core: each is scraped every 2 x 0.05 s, 4 times in 0.4 s.
    for run in runs:
        assert 2 <= run.scrapes <= 5
        assert run.scrape_bytes == 5 * run.scrapes
    assert len(_Recorder.seen) == sum(r.scrapes for r in runs)


def test_together_fails_when_a_load_fails(target: str) -> None:
    def count(svc: Any, seconds: int) -> int:
        raise RuntimeError("wrk saw errors")

    svc = _FakeService("a", target, [0.0, 0.0])
    with pytest.raises(RuntimeError, match="wrk saw errors"):
        overhead.together(count, [svc], 1, 0)  # type: ignore[list-item]


H2LOAD_SUMMARY = """finished in 2.00s, 3650.50 req/s, 1.10MB/s
requests: 7401 total, 7333 started, 7301 done, 7301 succeeded, 100 failed, 100 errored, 0 timeout
status codes: 7301 2xx, 0 3xx, 0 4xx, 0 5xx
"""


def test_h2load_counts_the_calls_answered_2xx() -> None:
    # The calls -D cut off mid-flight are neither answered nor a failure of the server.
    assert overhead.h2load_answered(H2LOAD_SUMMARY) == 7301


@pytest.mark.parametrize(
    "codes", ["7300 2xx, 0 3xx, 1 4xx, 0 5xx", "7300 2xx, 0 3xx, 0 4xx, 1 5xx"]
)
def test_h2load_errors_fail_the_run(codes: str) -> None:
    with pytest.raises(RuntimeError, match="errors"):
        overhead.h2load_answered(H2LOAD_SUMMARY.replace("7301 2xx, 0 3xx, 0 4xx, 0 5xx", codes))


GRPC_SUMMARY = (
    H2LOAD_SUMMARY.replace("100 failed, 100 errored", "0 failed, 0 errored")
    + "traffic: 1.65MB (1731996) total, 88.58KB (90704) headers (space savings 96.38%), "
    "442.05KB (452662) data\n"
)


def test_h2load_counts_grpc_calls_that_each_carried_the_reply() -> None:
    # 7301 answered 200, each with the 62 bytes of the order's framed reply.
    assert overhead.h2load_grpc_answered(GRPC_SUMMARY, 62) == 7301


def test_a_grpc_call_answered_200_without_its_reply_fails_the_run() -> None:
    # A failed gRPC call is a 200 with grpc-status in its trailers and no message: h2load
    # counts it as succeeded, and only the missing reply bytes tell.
    short = GRPC_SUMMARY.replace("(452662) data", f"({452662 - 62}) data")
    with pytest.raises(RuntimeError, match="some failed"):
        overhead.h2load_grpc_answered(short, 62)
    with pytest.raises(RuntimeError, match="no traffic line"):
        overhead.h2load_grpc_answered(H2LOAD_SUMMARY.replace("100 failed", "0 failed"), 62)


def test_h2load_without_a_summary_fails_the_run() -> None:
    with pytest.raises(RuntimeError, match="no summary"):
        overhead.h2load_answered("connect error\n")


def test_rest_http_must_be_a_server_the_services_have() -> None:
    with pytest.raises(SystemExit):
        overhead.main(["--rest-http", "3"])


def test_a_missing_load_tool_stops_the_run_before_any_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def measured(*_: object) -> None:
        raise AssertionError("a round ran")

    monkeypatch.setattr(overhead, "measure_pairs", measured)
    monkeypatch.setattr(overhead, "pin", lambda _: None)
    monkeypatch.setattr(shutil, "which", lambda _: None)
    monkeypatch.setenv("HOME", "/nonexistent")
    with pytest.raises(SystemExit, match="ghz not found"):
        overhead.main(["--protocols", "rest,grpc", "--ghz", "/nonexistent/ghz"])

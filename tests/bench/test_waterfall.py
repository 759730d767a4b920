"""The report's waterfall (wirelab_bench.waterfall) and the runner's capture of it from Jaeger
(wirelab_bench.jaeger), on small traces in Jaeger's API format: spans kept compactly, the median
and p99 orders picked by the edge's span, the traces held against the hop histograms with the
difference stated, a waterfall drawn, and a Jaeger that is absent or fails never failing a run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Rectangle
from wirelab_bench import jaeger, waterfall
from wirelab_bench.waterfall import Order

matplotlib.use("Agg")

T0 = 1_800_000_000_000_000  # µs


def span(
    trace: str, sid: str, parent: str | None, pid: str, name: str, kind: str, start: int, dur: int
) -> dict[str, Any]:
    """A span as Jaeger's /api/traces returns it (times in µs)."""
    refs = [{"refType": "CHILD_OF", "traceID": trace, "spanID": parent}] if parent else []
    return {
        "traceID": trace,
        "spanID": sid,
        "operationName": name,
        "references": refs,
        "startTime": start,
        "duration": dur,
        "tags": [{"key": "span.kind", "type": "string", "value": kind},
                 {"key": "wirelab.protocol", "type": "string", "value": "rest"}],
        "processID": pid,
    }  # fmt: skip


def chain(trace: str, start: int, edge_us: int, hop_us: int) -> dict[str, Any]:
    """An order through a two-hop REST chain: rest's server span, its client span, rest-b's."""
    return {
        "traceID": trace,
        "spans": [
            # Jaeger lists spans in no promised order: the child first.
            span(trace, "c", "b", "p2", "POST /v1/orders", "server", start + 200, hop_us - 400),
            span(trace, "a", None, "p1", "POST /v1/orders", "server", start, edge_us),
            span(trace, "b", "a", "p1", "POST /v1/orders", "client", start + 100, hop_us),
        ],
        "processes": {"p1": {"serviceName": "rest"}, "p2": {"serviceName": "rest-b"}},
    }


def amqp(trace: str, start: int) -> dict[str, Any]:
    """An AMQP arm's order: the edge's publish, the consumer's process and its reply's publish,
    the edge's receipt of the reply, the last under the reply (docs/traces.md)."""
    return {
        "traceID": trace,
        "spans": [
            span(trace, "e", None, "p1", "/wirelab.v1.WireLab/ProcessOrder", "server", start, 9000),
            span(trace, "p", "e", "p1", "publish amqp-product", "producer", start + 100, 300),
            span(trace, "w", "p", "p2", "process amqp-product", "consumer", start + 1000, 5000),
            span(trace, "r", "w", "p2", "publish amq.gen-1", "producer", start + 5500, 200),
            span(trace, "v", "r", "p1", "receive amq.gen-1", "consumer", start + 7000, 100),
        ],
        "processes": {"p1": {"serviceName": "amqp"}, "p2": {"serviceName": "amqp-product"}},
    }


def test_a_trace_is_kept_compactly_offsets_parents_services_and_kinds() -> None:
    kept = jaeger.compact(chain("t1", T0 + 500, 3000, 2000))
    assert kept["trace_id"] == "t1" and kept["start_us"] == T0 + 500
    assert kept["spans"] == [
        {"id": "a", "parent": None, "service": "rest", "name": "POST /v1/orders",
         "kind": "server", "start_us": 0, "duration_us": 3000},
        {"id": "b", "parent": "a", "service": "rest", "name": "POST /v1/orders",
         "kind": "client", "start_us": 100, "duration_us": 2000},
        {"id": "c", "parent": "b", "service": "rest-b", "name": "POST /v1/orders",
         "kind": "server", "start_us": 200, "duration_us": 1600},
    ]  # fmt: skip
    assert jaeger.root_of(kept) == kept["spans"][0]


def test_a_trace_missing_its_root_or_with_two_has_no_root() -> None:
    kept = jaeger.compact(chain("t1", T0, 3000, 2000))
    orphan = {**kept, "spans": kept["spans"][1:2]}  # the client span, its parent not exported
    assert jaeger.root_of(orphan) == orphan["spans"][0]  # alone, it is that part's root
    two = {**kept, "spans": [*kept["spans"][1:], {**kept["spans"][0], "id": "z", "parent": "q"}]}
    assert jaeger.root_of(two) is None


def _orders(durations: list[int]) -> list[Order]:
    doc = {"traces": [jaeger.compact(chain(f"t{i:03}", T0, d, d // 2)) for i, d in
                      enumerate(durations)]}  # fmt: skip
    return waterfall.orders(doc)


def test_the_median_and_p99_orders_are_picked_by_the_edges_span() -> None:
    found = _orders([1000 * (i + 1) for i in range(100)])  # 1 ms .. 100 ms
    picks = waterfall.pick(found)
    assert picks.count == 100
    assert picks.median is not None and picks.median.duration_ms == 50.0
    assert picks.p99 is not None and picks.p99.duration_ms == 99.0 and picks.p99_rank == 99


def test_with_fewer_than_twenty_orders_no_p99_is_named() -> None:
    picks = waterfall.pick(_orders([3000, 1000, 2000, 9000, 4000]))
    assert picks.median is not None and picks.median.duration_ms == 3.0
    assert picks.p99 is None
    assert waterfall.pick([]) == waterfall.Picks(0, None, None)
    found = _orders([1000] * 19)
    assert [c.figure for c in waterfall.checks(found, SERVER, HOP)] == [
        "edge server span p50",
        "edge → downstream call p50",
    ]


def test_an_amqp_calls_extent_runs_to_the_replys_receipt() -> None:
    (order,) = waterfall.orders({"traces": [jaeger.compact(amqp("t", T0))]})
    ((publish, extent),) = order.hops()
    assert publish.name == "publish amqp-product"
    assert extent == pytest.approx(7.0)  # 0.1 ms -> the receipt's end at 7.1 ms
    assert [(depth, s.name) for depth, s in order.rows()] == [
        (0, "/wirelab.v1.WireLab/ProcessOrder"),
        (1, "publish amqp-product"),
        (2, "process amqp-product"),
        (3, "publish amq.gen-1"),
        (4, "receive amq.gen-1"),
    ]


def test_a_relays_call_is_timed_as_the_relay_timed_it() -> None:
    """B's server span may end after its answer reached A (its middleware ends it once the
    response is sent): A's call is its own client span, not B's span's end."""
    trace = chain("t", T0, 3000, 2000)
    trace["spans"][0]["duration"] = 2500  # B's span, from 0.2 ms to 2.7 ms; A's call ends at 2.1
    (order,) = waterfall.orders({"traces": [jaeger.compact(trace)]})
    ((call, extent),) = order.hops()
    assert call.service == "rest" and extent == call.duration_ms == 2.0


# Histogram buckets (upper bound s, cumulative count) of 100 calls each.
SERVER = [(0.005, 10.0), (0.05, 50.0), (0.1, 98.0), (0.25, 100.0), (float("inf"), 100.0)]
HOP = [(0.005, 20.0), (0.01, 60.0), (0.025, 99.0), (float("inf"), 100.0)]


def test_the_traces_are_held_against_the_histograms_and_the_difference_is_stated() -> None:
    found = _orders([1000 * (i + 1) for i in range(100)])  # edge 1..100 ms, hops half that
    by = {c.figure: c for c in waterfall.checks(found, SERVER, HOP)}
    edge50 = by["edge server span p50"]
    # The histogram's median: rank 50 of 100 at the top of (5, 50] ms.
    assert edge50.traces_ms == 50.0 and edge50.histogram_ms == pytest.approx(50.0)
    assert edge50.agrees and edge50.said() == "agree: within the histogram's bucket (5-50 ms)"
    hop99 = by["edge → downstream call p99"]
    # The traces' p99 hop is 49.5 ms; the histogram's rank 99 is the top of (10, 25] ms.
    assert hop99.traces_ms == 49.5 and hop99.histogram_ms == pytest.approx(25.0)
    assert not hop99.agrees
    assert hop99.said() == "disagree by +24.50 ms (1.98x), outside the bucket (10-25 ms)"
    picks = waterfall.pick(found)
    assert picks.p99 is not None
    line = waterfall.picked(picks.p99, "p99", 0.99, SERVER, HOP)
    assert line.startswith("The p99 order (trace `t098`): the edge's span took 99.00 ms against")
    assert "its slowest hop, POST /v1/orders (rest →), took 49.50 ms" in line
    assert "hop histogram's p99 of 25.00 ms (disagree by +24.50 ms (1.98x)" in line


def test_a_histogram_without_calls_is_not_compared() -> None:
    found = _orders([1000, 2000])
    assert waterfall.checks(found, [], []) == []
    assert waterfall.bucket_of(0.5, [(0.1, 0.0), (float("inf"), 0.0)]) is None
    assert waterfall.bucket_of(0.99, [(0.1, 1.0), (float("inf"), 5.0)]) == (0.1, float("inf"))


def test_an_order_is_drawn_bar_by_bar_indented_under_its_parent(tmp_path: Path) -> None:
    (order,) = waterfall.orders({"traces": [jaeger.compact(amqp("t", T0))]})
    fig, ax = plt.subplots()
    waterfall.draw(ax, order, "amqp, median", lambda service: "tab:green")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "amqp (server): /wirelab.v1.WireLab/ProcessOrder"
    assert labels[2] == "    amqp-product (consumer): process amqp-product"
    bars = [p for p in ax.patches if isinstance(p, Rectangle)]
    assert len(bars) == 5
    assert bars[2].get_x() == pytest.approx(1.0) and bars[2].get_width() == pytest.approx(5.0)
    fig.savefig(tmp_path / "w.png")
    plt.close(fig)
    assert (tmp_path / "w.png").stat().st_size > 0


def test_the_folders_documents_load_by_cell(tmp_path: Path) -> None:
    assert waterfall.load(tmp_path) == {}
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "cell-1.json").write_text(json.dumps({"traces": []}))
    assert waterfall.load(tmp_path) == {"cell-1": {"traces": []}}


# The capture, against a small stand-in of Jaeger's query API --------------------------------


class Jaeger(BaseHTTPRequestHandler):
    """/api/services and /api/traces as Jaeger answers them, from ``traces``; ``asked`` keeps
    each query; ``status`` other than 200 answers an error."""

    traces: ClassVar[list[dict[str, Any]]] = []
    asked: ClassVar[list[dict[str, list[str]]]] = []
    status = 200

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if self.status != 200:
            self.send_error(self.status)
            return
        if url.path == "/api/services":
            body: dict[str, Any] = {"data": ["rest", "rest-b"], "errors": None}
        else:
            type(self).asked.append(parse_qs(url.query))
            body = {"data": type(self).traces, "errors": None}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def jaeger_at(traces: list[dict[str, Any]], status: int = 200) -> Iterator[tuple[str, Any]]:
    """The stand-in on a free loopback port: its URL and its handler class (``asked``)."""
    handler = type("Handler", (Jaeger,), {"traces": traces, "asked": [], "status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_a_cells_capture_keeps_the_orders_its_edge_began_in_the_window(tmp_path: Path) -> None:
    start_s = T0 / 1e6
    inside = chain("in", T0 + 1_000_000, 3000, 2000)
    before = chain("before", T0 - 1000, 3000, 2000)  # began before the window: not this cell's
    rootless = chain("part", T0 + 2_000_000, 3000, 2000)
    rootless["spans"] = rootless["spans"][:1]  # only rest-b's span arrived: no edge root
    path = tmp_path / "traces" / "c.json"
    with jaeger_at([inside, before, rootless]) as (url, handler):
        got = jaeger.capture(url, "rest", start_s, start_s + 10, path, limit=3)
    assert got == jaeger.Captured(traces=1, rootless=1, truncated=True)
    doc = json.loads(path.read_text())
    assert [t["trace_id"] for t in doc["traces"]] == ["in"]
    assert doc["window"] == [start_s, start_s + 10] and doc["truncated"] is True
    assert handler.asked == [{"service": ["rest"], "start": [str(T0)],
                              "end": [str(T0 + 10_000_000)], "limit": ["3"]}]  # fmt: skip


def test_a_failing_jaeger_writes_nothing_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "c.json"
    with jaeger_at([], status=500) as (url, _):
        got = jaeger.capture(url, "rest", 0.0, 1.0, path)
    assert got.traces == 0 and "HTTPStatusError" in got.error and url in got.error
    assert not path.exists()


def _recorder(url: str, on: bool | None, topology_run: bool = True) -> tuple[Any, list[str]]:
    said: list[str] = []
    setting = {"on": on, "ratio": 1.0 if on else None, "source": "test"}
    return jaeger.Recorder(url, setting, topology_run, said.append), said


def test_the_run_captures_only_a_topology_with_traces_not_off_and_a_jaeger_that_answers(
    tmp_path: Path,
) -> None:
    with jaeger_at([]) as (url, _):
        for on, topology_run, why in (
            (False, True, "traces off in the lab (make lab PROFILES=traces turns them on)"),
            (True, False, "a one-hop run: no hops to draw"),
        ):
            recorder, said = _recorder(url, on, topology_run)
            assert not recorder.active and recorder.setting["reason"] == why and said == []
            recorder.cell("c", "rest", 0.0, 1.0, tmp_path)
            assert recorder.setting["cells"] == {} and not (tmp_path / "traces").exists()
        recorder, said = _recorder(url, None)  # unknown: Jaeger answers, so try
        assert recorder.active and recorder.setting["captured"] is True
        assert recorder.setting["jaeger_url"] == url


def test_an_absent_jaeger_is_one_line_and_no_capture(tmp_path: Path) -> None:
    with jaeger_at([]) as (url, _):
        pass  # its port is free again: nothing answers there
    recorder, said = _recorder(url, True)
    assert not recorder.active
    assert recorder.setting["reason"].startswith(f"Jaeger does not answer: {url}: ConnectError")
    assert len(said) == 1 and said[0].startswith("traces not captured: Jaeger does not answer")


def test_a_jaeger_failing_mid_run_is_said_once_and_recorded_per_cell(tmp_path: Path) -> None:
    # A window that ended SETTLE_S ago: captured at once.
    end = time.time() - jaeger.SETTLE_S
    began = int((end - 1) * 1e6)
    with jaeger_at([chain("in", began, 3000, 2000)]) as (url, handler):
        recorder, said = _recorder(url, True)
        recorder.cell("c1", "rest", end - 2, end, tmp_path)
        handler.status = 503
        recorder.cell("c2", "rest", end - 2, end, tmp_path)
        recorder.cell("c3", "rest", end - 2, end, tmp_path)
    cells = recorder.setting["cells"]
    assert cells["c1"] == {"traces": 1, "rootless": 0, "truncated": False}
    assert "503" in cells["c2"]["error"] and "503" in cells["c3"]["error"]
    assert len(said) == 1 and said[0].startswith("c2: traces not captured")
    assert (tmp_path / "traces" / "c1.json").exists()
    assert not (tmp_path / "traces" / "c2.json").exists()


def test_the_lab_says_whether_traces_were_on_and_at_which_ratio() -> None:
    env = {"WIRELAB_TRACES": "on", "WIRELAB_TRACE_SAMPLE_RATIO": "1"}
    assert jaeger.setting(env, 0.01, "rest") == {
        "on": True, "ratio": 1.0, "source": "rest's environment"
    }  # fmt: skip
    # Compose passes the variable empty when the lab was not given one: the services' default.
    assert jaeger.setting({**env, "WIRELAB_TRACE_SAMPLE_RATIO": ""}, 0.01, "rest")["ratio"] == 0.01
    assert jaeger.setting({}, 0.01, "rest") == {"on": False, "ratio": None,
                                                 "source": "rest's environment"}  # fmt: skip
    assert jaeger.setting(None, 0.01, "rest")["on"] is None


def test_a_cell_is_captured_once_its_last_batch_can_have_reached_jaeger(tmp_path: Path) -> None:
    with jaeger_at([]) as (url, handler):
        recorder, _ = _recorder(url, True)
        end = time.time() - jaeger.SETTLE_S + 0.5
        began = time.monotonic()
        recorder.cell("c", "rest", end - 1, end, tmp_path)
        waited = time.monotonic() - began
    assert waited >= 0.4 and len(handler.asked) == 1

"""Observer effect: each service with metrics on vs off, small unary at saturation on one core.

Both variants of a service run at once, pinned to the same core, and are loaded at the same time:
the load tool (wrk for REST, ghz or h2load for gRPC) runs once per variant on the other core, each
saturating its variant, so the two share the core for the whole run and every slowdown of the shared
machine falls on both alike. While loaded, each variant's /metrics is scraped the way the lab's
Prometheus scrapes it (same Accept headers, as often per CPU-second of the service as the lab's
interval gives a service that has a core to itself), metrics off too: exposing the numbers is part
of what measuring costs. Prints the on/off ratio of requests per server CPU-second (goal >= 0.97):
at saturation throughput is 1 / CPU per request, and this is that ratio, the median of many rounds'
own ratios with its 95 % interval. With --traces RATIO it compares tracing on at that head sampling
ratio against tracing off instead, metrics on in both (docs/traces.md), the spans exported over OTLP
to a receiver on the load's core.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from wirelab.traces import TRACES_PATH
from wirelab_bench.knobs import REPO, parser
from wirelab_bench.medians import decides, median_interval

from wirelab_perf import ORDER
from wirelab_perf.h2load import GRPC, GRPC_PATH, find_h2load, grpc_body
from wirelab_perf.svcprocs import (
    CLIENT_CPU,
    SERVER_CPU,
    Service,
    pin,
    pinned,
    service,
)

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

# The observer-effect goal: metrics cost a saturated service at most 3 % of its throughput, i.e.
# the on/off ratio's whole 95 % interval at or above 0.97 (docs/services.md, Observer effect).
GOAL = 0.97
# gRPC's load tools (counter_for): ghz, or h2load sending the same call for less CPU.
GRPC_LOADS = ("ghz", "h2load")
# What Prometheus 3 sends with its default scrape protocols: it prefers OpenMetrics, gzipped.
SCRAPE_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,"
    "application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}


def find_ghz(given: str) -> str:
    found = given or shutil.which("ghz") or str(Path.home() / "go" / "bin" / "ghz")
    if not os.access(found, os.X_OK):
        sys.exit("ghz not found: go install github.com/bojand/ghz/cmd/ghz@v0.120.0 (or pass --ghz)")
    return found


@contextmanager
def otlp_sink(
    received: Callable[[ExportTraceServiceRequest], None] | None = None,
) -> Iterator[str]:
    """An OTLP/HTTP trace receiver in this process (pinned to the load's core, so its CPU is
    never the services'), answering each export as Jaeger does; yields its endpoint, the base URL
    the services' WIRELAB_TRACES_ENDPOINT takes. Each export is handed to ``received`` (tests),
    else read and dropped. Not the lab's Jaeger: its all-in-one config binds fixed ports (its own
    metrics on 8888, ...) that a shared machine may hold, and what the services pay is the
    export, whoever receives it."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    answer = ExportTraceServiceResponse().SerializeToString()

    class Sink(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # the exporters keep their connection

        def do_POST(self) -> None:
            body = self._body()
            if self.path != TRACES_PATH:
                self.send_error(404)
                return
            if received is not None:
                received(ExportTraceServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def _body(self) -> bytes:
            """The request's body, of a Content-Length or chunked (as Node's exporter sends it)."""
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()  # the chunk's CRLF
            while self.rfile.readline().strip():  # trailers, up to the empty line
                pass
            return b"".join(chunks)

        def log_message(self, format: str, *args: Any) -> None:
            """Exports are not logged."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="otlp-sink", daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _run(cmd: list[str]) -> str:
    done = subprocess.run(pinned(cmd, CLIENT_CPU), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def wrk_count(url: str, seconds: int, connections: int, script: Path) -> int:
    out = _run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url])
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors:\n{out}")
    match = re.search(r"(\d+) requests in", out)
    assert match, out
    return int(match.group(1))


def ghz_count(ghz: str, target: str, seconds: int, connections: int) -> int:
    out = _run([
        ghz, "--insecure", "--proto", str(REPO / "proto/wirelab/v1/wirelab.proto"),
        "--import-paths", str(REPO / "proto"), "--call", "wirelab.v1.WireLab.ProcessOrder",
        "-d", json.dumps(ORDER), "-c", str(connections), "--connections", "4",
        "-z", f"{seconds}s", "--format", "json", target,
    ])  # fmt: skip
    report = json.loads(out)
    codes = report.get("statusCodeDistribution", {})
    ok = int(codes.get("OK", 0))
    # ghz cuts the calls still in flight when -z runs out (Unavailable/Canceled): a handful,
    # never the server's doing; anything more is a real failure.
    if sum(codes.values()) - ok > max(100, ok // 100):
        raise RuntimeError(f"ghz saw errors: {codes}")
    return ok


def h2load_saturating(
    h2load: str, url: str, seconds: int, connections: int, body: Path, headers: Sequence[str]
) -> str:
    """h2load's output after POSTing ``body`` with ``headers`` to ``url`` over h2c at
    saturation: ``connections`` calls in flight over 4 connections for ``seconds``."""
    return _run([
        h2load, "-c", "4", "-m", str(max(1, connections // 4)), "-D", str(seconds),
        "-d", str(body), *(f"-H{h}" for h in headers), url,
    ])  # fmt: skip


def h2load_count(h2load: str, url: str, seconds: int, connections: int, body: Path) -> int:
    """Small orders over h2c at saturation; returns the calls answered 2xx."""
    json_type = ("content-type: application/json",)
    return h2load_answered(h2load_saturating(h2load, url, seconds, connections, body, json_type))


def h2load_grpc_count(
    h2load: str, address: str, seconds: int, connections: int, body: Path, reply: int
) -> int:
    """Small orders as gRPC calls (ProcessOrder, ``body`` the framed request) over h2c at
    saturation; returns the calls answered. ``reply``: the framed reply's bytes, which every
    answered call must have carried."""
    url = f"http://{address}{GRPC_PATH}"
    return h2load_grpc_answered(
        h2load_saturating(h2load, url, seconds, connections, body, GRPC), reply
    )


def h2load_grpc_answered(out: str, reply: int) -> int:
    """The calls h2load answered as h2load_answered counts them, each an ok gRPC call: h2load
    reads no trailers, and a failed call is a 200 whose grpc-status is in its trailers, with no
    message. So the reply bytes must be ``reply`` for every 2xx, no fewer."""
    answered = h2load_answered(out)
    found = re.search(r"^status codes: (\d+) 2xx", out, re.M)
    data = re.search(r"^traffic: .* \((\d+)\) data$", out, re.M)
    if found is None or data is None:
        raise RuntimeError(f"no traffic line in h2load's output:\n{out[-1000:]}")
    if int(data.group(1)) != int(found.group(1)) * reply:
        raise RuntimeError(
            f"h2load's {found.group(1)} calls answered 200 carried {data.group(1)} bytes of "
            f"replies, not {reply} each: some failed (grpc-status in the trailers)"
        )
    return answered


def h2load_answered(out: str) -> int:
    """The calls h2load's summary counts as succeeded; any 4xx or 5xx fails the run."""
    found = re.search(r"^requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out, re.M)
    codes = re.search(r"^status codes: \d+ 2xx, \d+ 3xx, (\d+) 4xx, (\d+) 5xx$", out, re.M)
    if found is None or codes is None:
        raise RuntimeError(f"no summary in h2load's output:\n{out[-1000:]}")
    # As with ghz, the calls still in flight when -D runs out are cut: counted nowhere here.
    if int(codes.group(1)) or int(codes.group(2)):
        raise RuntimeError(f"h2load saw errors:\n{out[-1000:]}")
    return int(found.group(1))


@contextmanager
def scraping(url: str, interval: float) -> Iterator[list[int]]:
    """Scrape ``url`` every ``interval`` seconds until the block ends, as Prometheus would; yields
    the list of response sizes (bytes on the wire), filled in as scrapes complete."""
    sizes: list[int] = []
    if interval <= 0 or not url:  # no scrapes, or nothing to scrape (a bare echo server)
        yield sizes
        return
    stop = threading.Event()
    failed: list[BaseException] = []

    def loop() -> None:
        request = urllib.request.Request(url, headers=SCRAPE_HEADERS)
        # On a fixed schedule, as Prometheus scrapes, half an interval off the run's edges so a
        # run of whole intervals always holds the same number of scrapes, however long each
        # takes; a scrape that overruns its slot skips the slots it missed.
        start = time.monotonic()
        slot = 0.5
        while not stop.wait(max(0.0, start + slot * interval - time.monotonic())):
            slot = math.floor((time.monotonic() - start) / interval - 0.5) + 1.5
            try:
                with urllib.request.urlopen(request, timeout=interval) as response:
                    sizes.append(len(response.read()))
            except OSError as exc:  # a scrape that fails would hide its own cost: stop the run
                failed.append(exc)
                return

    thread = threading.Thread(target=loop, name="scraper", daemon=True)
    thread.start()
    try:
        yield sizes
    finally:
        stop.set()
        thread.join()
    if failed:
        raise RuntimeError(f"scraping {url} failed: {failed[0]}")


@dataclass(frozen=True)
class Run:
    requests: int
    cpu_seconds: float
    scrapes: int = 0
    scrape_bytes: int = 0

    @property
    def per_cpu(self) -> float:
        return self.requests / max(self.cpu_seconds, 1e-9)


def unary_reply(address: str, request: bytes) -> bytes:
    """The gRPC service at ``address``'s reply to one ProcessOrder of ``request`` (grpcio)."""
    with grpc.insecure_channel(address) as channel:
        method: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(GRPC_PATH)
        return method(request, timeout=10)


def counter_for(
    protocol: str,
    connections: int,
    ghz: str,
    tmp: Path,
    rest_http: str = "1.1",
    grpc_load: str = "ghz",
) -> Callable[[Service, int], int]:
    """A function that saturates one service for some seconds and returns the calls completed.
    gRPC's load is ghz, or h2load (``grpc_load``), which sends the same call for a fraction of
    ghz's CPU."""
    if protocol == "rest" and rest_http == "2":
        h2load = find_h2load("")
        order = tmp / "order.json"
        order.write_text(json.dumps(ORDER))

        def count(svc: Service, s: int) -> int:
            return h2load_count(h2load, f"{svc.address}/v1/orders", s, connections, order)
    elif protocol == "rest":
        script = tmp / "order.lua"
        body = json.dumps(json.dumps(ORDER))
        script.write_text(
            f'wrk.method = "POST"\nwrk.body = {body}\n'
            'wrk.headers["Content-Type"] = "application/json"\n'
        )

        def count(svc: Service, s: int) -> int:
            return wrk_count(f"{svc.address}/v1/orders", s, connections, script)
    elif grpc_load == "h2load":
        h2load = find_h2load("")
        framed = grpc_body(ORDER)
        request = tmp / "order.grpc"
        request.write_bytes(framed)
        replies: dict[str, int] = {}  # each service's framed reply to the order, in bytes

        def count(svc: Service, s: int) -> int:
            if svc.address not in replies:  # its first load: the warm-up
                replies[svc.address] = 5 + len(unary_reply(svc.address, framed[5:]))
            reply = replies[svc.address]
            return h2load_grpc_count(h2load, svc.address, s, connections, request, reply)
    else:
        binary = find_ghz(ghz)

        def count(svc: Service, s: int) -> int:
            return ghz_count(binary, svc.address, s, connections)

    return count


def together(
    count: Callable[[Service, int], int],
    services: Sequence[Service],
    seconds: int,
    scrape_interval: float,
) -> list[Run]:
    """Load every service at once for ``seconds``, each scraped as the lab scrapes it, and
    measure each. The services share one core, so each gets 1/n of it: a scrape every n lab
    intervals keeps scrapes per CPU-second, and calls per scrape, what the lab gives a service
    that has a core to itself."""
    every = scrape_interval * len(services)
    cpu = [svc.cpu_seconds() for svc in services]
    with ExitStack() as scrapers:
        sizes = [scrapers.enter_context(scraping(svc.metrics_url, every)) for svc in services]
        with ThreadPoolExecutor(len(services)) as pool:
            done = [pool.submit(count, svc, seconds) for svc in services]
            requests = [future.result() for future in done]
    return [
        Run(calls, svc.cpu_seconds() - before, len(got), sum(got))
        for calls, svc, before, got in zip(requests, services, cpu, sizes, strict=True)
    ]


def pair_rounds(rounds: int, pairs: int) -> list[range]:
    """Each process pair's share of the rounds, in order."""
    return [range(p * rounds // pairs, (p + 1) * rounds // pairs) for p in range(pairs)]


def paired_ratios(on: list[Run], off: list[Run]) -> list[float]:
    """Each round's on/off ratio of requests per server CPU-second."""
    return [a.per_cpu / b.per_cpu for a, b in zip(on, off, strict=True)]


def verdict(low: float, high: float, control: bool, rounds: int, goal: float | None = GOAL) -> str:
    if not decides(rounds):
        return "too few rounds for a 95 % interval: undecided"
    if control:
        return "control run: what the method reads where nothing differs"
    if goal is None:
        return "a comparison, without a goal"
    if low >= goal:
        return "meets the goal"
    if high < goal:
        return "MISSES the goal"
    return "the goal is inside the interval: undecided, run more rounds"


# Starts one variant of a service and yields it once healthy (svcprocs.service, or a Node process).
Starter = Callable[[], AbstractContextManager[Service]]


def measure_pairs(
    label: str,
    count: Callable[[Service, int], int],
    first: tuple[str, Starter],
    second: tuple[str, Starter],
    rounds: int,
    pairs: int,
    seconds: int,
    every: float,
    warmup: int = 2,
) -> tuple[list[Run], list[Run]]:
    """The method: the two variants (name, starter) side by side on one core, loaded at once
    and scraped as the lab scrapes, ``rounds`` rounds over ``pairs`` fresh process pairs, each
    pair loaded ``warmup`` seconds first, unmeasured; returns each variant's runs, round by
    round."""
    a_runs: list[Run] = []
    b_runs: list[Run] = []
    for pair, pair_rounds_ in enumerate(pair_rounds(rounds, pairs)):
        with ExitStack() as stack:
            # Fresh processes for each pair: one process can run a few percent faster or slower
            # than an identical one for its whole life (memory layout, hash seed), which no
            # number of rounds against the same process would average out. Which variant
            # starts first alternates too.
            order = (first, second) if pair % 2 == 0 else (second, first)
            started = {id(v): stack.enter_context(v[1]()) for v in order}
            a, b = started[id(first)], started[id(second)]
            together(count, [a, b], warmup, every)  # warm-up, discarded
            for round_ in pair_rounds_:
                # Which load tool starts first alternates too (microseconds apart).
                if round_ % 2 == 0:
                    ra, rb = together(count, [a, b], seconds, every)
                else:
                    rb, ra = together(count, [b, a], seconds, every)
                a_runs.append(ra)
                b_runs.append(rb)
                print(f"{label:4} pair {pair} round {round_}: {first[0]} {ra.per_cpu:8.1f} "
                      f"req/CPU-s ({ra.cpu_seconds:.2f} CPU-s) | {second[0]} "
                      f"{rb.per_cpu:8.1f} req/CPU-s ({rb.cpu_seconds:.2f} CPU-s) | "
                      f"ratio {ra.per_cpu / rb.per_cpu:.3f}", flush=True)  # fmt: skip
    return a_runs, b_runs


def summarize(
    label: str,
    firsts: list[Run],
    seconds_: list[Run],
    names: tuple[str, str],
    control: bool,
    goal: float | None,
    rounds: int,
    pairs: int,
) -> None:
    """Print the median of the rounds' ratios with its 95 % interval and verdict against
    ``goal``, each process pair's median, and the scrapes each variant answered."""
    ratios = paired_ratios(firsts, seconds_)
    low, high = median_interval(ratios)
    median = statistics.median(ratios)
    print(f"{label:4} {median:.3f} [{low:.3f}-{high:.3f}]: "
          f"{verdict(low, high, control, len(ratios), goal)}")  # fmt: skip
    medians = [statistics.median(ratios[r.start : r.stop]) for r in pair_rounds(rounds, pairs) if r]
    print(f"     median of each process pair: {' '.join(f'{m:.3f}' for m in medians)}")
    for name, done in zip(names, (firsts, seconds_), strict=True):
        scrapes = sum(r.scrapes for r in done)
        if scrapes:
            size = sum(r.scrape_bytes for r in done) / scrapes
            print(f"     {name:>10}: {scrapes} scrapes, {size / 1024:.1f} KiB each on the wire")


def main(argv: list[str] | None = None) -> int:
    prog = "wirelab perf overhead"
    cli = parser(prog, __doc__, "WIRELAB_OBSERVER")
    args = cli.parse_args(argv)
    if args.against not in ("off", "on"):
        cli.error(f"--against must be off or on, not {args.against!r}")
    if args.rest_http not in ("1.1", "2"):
        cli.error(f"--rest-http must be 1.1 or 2, not {args.rest_http!r}")
    if args.grpc_load not in GRPC_LOADS:
        cli.error(f"--grpc-load must be one of {', '.join(GRPC_LOADS)}, not {args.grpc_load!r}")
    if args.traces:
        return traced(args)
    protocols = [p for p in args.protocols.split(",") if p]
    pin(CLIENT_CPU)  # this process scrapes; the threads it starts inherit the pinning
    every = args.scrape_interval
    scrape = f"scraped as the lab scrapes every {every:g}s" if every > 0 else "no scrapes"
    rest = "Granian over h2c (h2load)" if args.rest_http == "2" else "uvicorn (wrk)"
    print(f"server CPU {SERVER_CPU} (both variants), load CPU {CLIENT_CPU}, metrics on against "
          f"metrics {args.against}, {args.rounds} rounds x {args.seconds}s, {scrape}; "
          f"REST on {rest}")  # fmt: skip
    results: dict[str, tuple[list[Run], list[Run]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # Every load tool found before the first round: a missing ghz stopped a run after REST's
        # four minutes, its figure unprinted.
        counters = {
            p: counter_for(p, args.connections, args.ghz, Path(tmp), args.rest_http, args.grpc_load)
            for p in protocols
        }
        for protocol, count in counters.items():
            server = ("--rest-http", args.rest_http) if protocol == "rest" else ()

            def variant(
                metrics: str, protocol: str = protocol, server: tuple[str, ...] = server
            ) -> Starter:
                extra = ("--metrics", metrics, *server)
                return lambda: service(protocol, SERVER_CPU, extra)

            results[protocol] = measure_pairs(
                protocol, count, ("on", variant("on")), (args.against, variant(args.against)),
                args.rounds, args.pairs, args.seconds, every,
            )  # fmt: skip
    control = args.against == "on"
    print(f"\nmetrics on/{args.against}, requests per server CPU-second: median of the rounds' "
          f"ratios, 95 % interval of the median (goal >= {GOAL})")  # fmt: skip
    for protocol, (ons, others) in results.items():
        summarize(
            protocol, ons, others, ("on", args.against), control, GOAL, args.rounds, args.pairs
        )
    return 0


def traced(args: argparse.Namespace) -> int:
    """--traces RATIO: tracing on at that ratio against off, metrics on in both, exporting over
    OTLP; the verdict against the same goal (docs/traces.md)."""
    protocols = [p for p in args.protocols.split(",") if p]
    pin(CLIENT_CPU)
    every = args.scrape_interval
    print(f"server CPU {SERVER_CPU} (both variants), load CPU {CLIENT_CPU} (and the OTLP sink), "
          f"traces on at ratio {args.traces} against off, metrics on in both, {args.rounds} "
          f"rounds x {args.seconds}s, scraped every {every:g}s")  # fmt: skip
    results: dict[str, tuple[list[Run], list[Run]]] = {}
    with tempfile.TemporaryDirectory() as tmp, otlp_sink() as endpoint:
        counters = {
            p: counter_for(p, args.connections, args.ghz, Path(tmp), args.rest_http, args.grpc_load)
            for p in protocols
        }
        for protocol, count in counters.items():
            server = ("--rest-http", args.rest_http) if protocol == "rest" else ()
            on = (
                "--traces",
                "on",
                "--trace-sample-ratio",
                args.traces,
                "--traces-endpoint",
                endpoint,
            )

            def variant(extra: tuple[str, ...], protocol: str = protocol) -> Starter:
                return lambda: service(protocol, SERVER_CPU, ("--metrics", "on", *extra))

            results[protocol] = measure_pairs(
                protocol, count, ("traced", variant((*on, *server))),
                ("off", variant(("--traces", "off", *server))),
                args.rounds, args.pairs, args.seconds, every,
            )  # fmt: skip
    print(f"\ntraces on at {args.traces}/off, requests per server CPU-second: median of the "
          f"rounds' ratios, 95 % interval of the median (goal >= {GOAL})")  # fmt: skip
    for protocol, (ons, offs) in results.items():
        summarize(protocol, ons, offs, ("traced", "off"), False, GOAL, args.rounds, args.pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())

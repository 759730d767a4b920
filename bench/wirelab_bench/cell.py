"""One cell: Locust warm-up (discarded), the measured window between two snapshots, cool-down."""

from __future__ import annotations

import json
import shlex
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from wirelab_bench.histo import Snapshot, buckets, delta
from wirelab_bench.hostcpu import other_cpu, proxy_seconds
from wirelab_bench.load import LoadProcess, Target, loadgen_command, locust_command, wait_started
from wirelab_bench.loadgen import PROTO_ROOT
from wirelab_bench.network import DIRECT
from wirelab_bench.peaks import SAMPLED, Peaks
from wirelab_bench.prom import Prometheus
from wirelab_bench.promql import EXPORTS, TOPOLOGY_EXPORTS, aggregate, sample_names
from wirelab_bench.results import write_json
from wirelab_bench.scenario import Cell
from wirelab_bench.scrape import scrape
from wirelab_bench.tidy import Window
from wirelab_bench.topology import ONE_HOP

SERVER = tuple(n for n in EXPORTS if n.startswith("server_"))
CLIENT = tuple(n for n in EXPORTS if n.startswith("client_"))
# A topology's edge: its outgoing calls too (replica counts come from Prometheus only).
HOPS = tuple(n for n in TOPOLOGY_EXPORTS if n.startswith("hop_"))
# Show progress (and sample gauges for their peaks) this often during a phase.
TICK_S = 1.0

Ticker = Callable[[str, float], None]


@dataclass
class Lab:
    """Where a run measures: addresses, and which source each side's metrics come from."""

    rest_url: str
    grpc_target: str
    locustfile: Path
    locust_args: tuple[str, ...]
    client_metrics_port: int
    server_urls: dict[str, str] = field(default_factory=dict)  # protocol -> direct /metrics
    prometheus: Prometheus | None = None
    export_delay_s: float = 1.0
    export_step_s: float = 0.0
    topology: str = ONE_HOP
    # wirelab-loadgen, for groups whose generator it is (wirelab_bench.load.loadgen_command).
    loadgen: str = ""
    loadgen_proto: str = str(PROTO_ROOT)  # the contract's .proto folder, for its gRPC calls
    # The services through Toxiproxy, for cells with a network profile (wirelab_bench.network).
    net_rest_url: str = ""
    net_grpc_target: str = ""
    amqp_target: str = ""  # the AMQP arm's gRPC edge (docs/broker.md)
    # The Node.js services (profile node), for runtime node cells: addresses and direct /metrics.
    node_rest_url: str = ""
    node_grpc_target: str = ""
    node_server_urls: dict[str, str] = field(default_factory=dict)
    net_node_rest_url: str = ""
    net_node_grpc_target: str = ""
    net_amqp_target: str = ""  # the AMQP arm's edge through Toxiproxy

    @property
    def edge(self) -> tuple[str, ...]:
        """The exports read from an edge's /metrics: its server side, and in a topology the
        calls it makes to its downstreams."""
        return SERVER if self.topology == ONE_HOP else SERVER + HOPS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _snap(url: str, job: str, names: tuple[str, ...]) -> Snapshot | None:
    try:
        return aggregate(scrape(url, job, names=sample_names(names)), names)
    except (httpx.HTTPError, ValueError):
        return None


@dataclass(frozen=True)
class Route:
    """Where a cell's load goes and whose /metrics measure it (protocol -> URL)."""

    rest_url: str
    grpc_target: str
    amqp_target: str
    servers: dict[str, str]


def route(cell: Cell, lab: Lab) -> Route:
    """Where ``cell``'s load goes: its runtime's services (the AMQP arm's edge for the Python
    runtime), through their Toxiproxy proxies when its group has a network."""
    proxied = cell.group.network != DIRECT
    if cell.runtime == "node":
        if proxied:
            return Route(lab.net_node_rest_url, lab.net_node_grpc_target, "", lab.node_server_urls)
        return Route(lab.node_rest_url, lab.node_grpc_target, "", lab.node_server_urls)
    if proxied:
        return Route(lab.net_rest_url, lab.net_grpc_target, lab.net_amqp_target, lab.server_urls)
    return Route(lab.rest_url, lab.grpc_target, lab.amqp_target, lab.server_urls)


def measure(
    cell: Cell, lab: Lab, run_dir: Path, tick: Ticker
) -> tuple[Window, list[dict[str, Any]]]:
    """Run ``cell`` and return its window plus the histogram bucket rows for the notebook."""
    g = cell.group
    port = lab.client_metrics_port or free_port()
    client_url = f"http://127.0.0.1:{port}/metrics"
    way = route(cell, lab)
    target = Target(
        way.rest_url, way.grpc_target, lab.locustfile, port, lab.locust_args, way.amqp_target
    )
    # The generator's files (command, log, and Locust's CSVs or wirelab-loadgen's summary).
    (run_dir / "locust").mkdir(exist_ok=True)
    base = run_dir / "locust" / cell.cell_id
    if g.generator == "loadgen":
        summary = base.with_suffix(".summary.json")
        cmd = loadgen_command(cell, target, lab.loadgen, summary, lab.loadgen_proto)
    else:
        cmd = locust_command(cell, target, base)
    (run_dir / "locust" / f"{cell.cell_id}.cmd").write_text(shlex.join(cmd) + "\n")
    server_url = way.servers.get(cell.protocol)
    proc = LoadProcess(cmd, run_dir / "locust" / f"{cell.cell_id}.log")
    peaks = Peaks()

    def snap_both() -> tuple[Snapshot | None, Snapshot | None]:
        # Both ends of the window at once. A saturated Python service reads its counters as its
        # scrape begins but may answer 0.4 s later (its metrics thread waits for the GIL): taken
        # one after the other, the generator's snapshot came that much later than the server's,
        # and a 2 s window counted 14 % more calls at the client than at the server (and the
        # window's length, timed from the answers, took in the 0.4 s).
        with ThreadPoolExecutor(2) as pool:
            server = pool.submit(_snap, server_url, cell.protocol, lab.edge) if server_url else None
            client = pool.submit(_snap, client_url, "locust", CLIENT)
            return (server.result() if server is not None else None), client.result()

    def sample() -> None:
        if server_url:
            peaks.add(_snap(server_url, cell.protocol, tuple(n for n in SERVER if n in SAMPLED)))
        peaks.add(_snap(client_url, "locust", tuple(n for n in CLIENT if n in SAMPLED)))

    try:
        tick(f"starting {g.generator}", g.warmup_s + g.duration_s)
        wait_started(proc, client_url, timeout=60)
        _wait(proc, "warm-up", g.warmup_s, tick)
        # The window's times are those of the snapshots' requests, not of their answers.
        cpu0, own0, t0 = proc.cpu_seconds(), time.process_time(), time.time()
        proxy0 = proxy_seconds()
        server0, client0 = snap_both()
        peaks.add(server0)
        peaks.add(client0)
        _wait(proc, "measure", g.duration_s, tick, sample)
        cpu1, own1, t1 = proc.cpu_seconds(), time.process_time(), time.time()
        proxy1 = proxy_seconds()
        server1, client1 = snap_both()
        # The window's ends count as samples too: a window shorter than two ticks still has
        # one CPU rate (its average), never none.
        peaks.add(server1)
        peaks.add(client1)
    finally:
        proc.stop()
    window = Window(
        cell,
        t0,
        t1 - t0,
        peaks=peaks.values,
        generator_cpu_ratio=(cpu1 - cpu0) / (t1 - t0),
        runner_cpu_ratio=(own1 - own0) / (t1 - t0),
        proxy_cpu_ratio=(proxy1 - proxy0) / (t1 - t0),
    )
    if g.generator == "loadgen":
        window.schedule = _summary(base.with_suffix(".summary.json"))
    if server0 is not None and server1 is not None:
        window.server, window.sources["server"] = delta(server0, server1), "scrape"
    elif server_url:
        # The service stopped answering during the window (a crash, a restart): say so in the
        # row instead of leaving the reader to guess why the server columns are empty.
        window.sources["server"] = "none: direct scrape failed at the window's start or end"
    if client0 is not None and client1 is not None:
        window.client, window.sources["client"] = delta(client0, client1), "scrape"
    else:
        window.sources["client"] = "none: the load generator's exporter did not answer"
    _wait(None, "cool-down", max(g.cooldown_s, lab.export_delay_s if lab.prometheus else 0), tick)
    if lab.prometheus is not None:
        _from_prometheus(window, lab, lab.prometheus, run_dir)
    return window, histogram_rows(window)


def _summary(path: Path) -> dict[str, Any] | None:
    """wirelab-loadgen's summary, written as it stops; None if it wrote none (it was killed)."""
    try:
        summary: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return summary


def _wait(
    proc: LoadProcess | None,
    phase: str,
    seconds: float,
    tick: Ticker,
    sample: Callable[[], None] | None = None,
) -> None:
    """Sleep through a phase in ticks, checking the generator is alive and sampling if asked."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        tick(phase, left)
        if proc is not None and not proc.alive():
            code = proc.proc.returncode
            raise RuntimeError(f"the load generator exited during {phase} (code {code})")
        if sample is not None:
            sample()
        time.sleep(min(TICK_S, max(0.0, end - time.monotonic())))


def _from_prometheus(w: Window, lab: Lab, prom: Prometheus, run_dir: Path) -> None:
    step = lab.export_step_s or max(1.0, w.seconds / 120)
    exports = EXPORTS if lab.topology == ONE_HOP else {**EXPORTS, **TOPOLOGY_EXPORTS}
    export = prom.export_window(w.started_at, w.started_at + w.seconds, step, exports)
    write_json(
        run_dir / "prometheus" / f"{w.cell.cell_id}.json",
        {"window": [w.started_at, w.started_at + w.seconds], "errors": export.errors, **export.raw},
    )
    moved = delta(export.start, export.end)
    w.host_other_cpu = other_cpu(
        export.raw, w.generator_cpu_ratio, w.runner_cpu_ratio, w.proxy_cpu_ratio
    )
    if export.errors:
        w.sources["prometheus_errors"] = "; ".join(f"{k}: {v}" for k, v in export.errors.items())
    # The exports read the Python edges' jobs: a Node.js cell's server side is its direct scrape.
    python = w.cell.runtime == "python"
    if python and w.server is None and any(k[0].startswith("server_") for k in moved):
        w.server = {k: v for k, v in moved.items() if k[0] in lab.edge}
        w.sources["server"] = "prometheus"
        w.peaks |= {k: v for k, v in export.peak.items() if k[0].startswith("server_")}
    if any(k[0] == "replica_requests" for k in moved):
        w.replicas = {k: v for k, v in moved.items() if k[0] == "replica_requests"}
    if any(k[0].startswith("container_") for k in moved):
        w.containers = {k: v for k, v in moved.items() if k[0].startswith("container_")}
        w.sources["containers"] = "prometheus"
        w.peaks |= {k: v for k, v in export.peak.items() if k[0].startswith("container_")}


def histogram_rows(w: Window) -> list[dict[str, Any]]:
    """Cumulative bucket counts of the window, per side and histogram, for latency CDFs."""
    rows: list[dict[str, Any]] = []
    pk = {"protocol": w.cell.protocol, "kind": w.cell.kind}
    # Side "hop": the edge's calls to its downstreams (topology runs), from the edge's snapshot.
    sides = (("client", w.client), ("server", w.server), ("hop", w.server))
    for side, snap in sides:
        if snap is None:
            continue
        for metric in ("duration", "ttfm") if side != "hop" else ("duration",):
            for le, count in buckets(snap, f"{side}_{metric}", **pk):
                rows.append(
                    {
                        "cell_id": w.cell.cell_id,
                        "side": side,
                        "metric": metric,
                        "le": le,
                        "count": count,
                    }
                )
    return rows

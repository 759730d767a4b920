"""Run a scenario cell by cell into a new results folder; the return value is the exit code."""

from __future__ import annotations

import shlex
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from wirelab.contract import ARM_EDGES, ARMS
from wirelab.contract.table import value

from wirelab_bench import environment, jaeger
from wirelab_bench.cell import Lab, measure
from wirelab_bench.cellcost import cell_cost
from wirelab_bench.health import load_path_verdict, wait_healthy
from wirelab_bench.knobs import REPO, Knobs
from wirelab_bench.network import DIRECT, Network, NetworkUnavailable, label
from wirelab_bench.parity import ParityCallFailed, ParityError, check_arm_parity, check_parity
from wirelab_bench.progress import Estimate, Progress, clock
from wirelab_bench.prom import Prometheus
from wirelab_bench.results import MANIFEST, new_run_dir, write_json, write_tables
from wirelab_bench.scenario import Cell, Scenario
from wirelab_bench.scrape import probe, scrape
from wirelab_bench.tidy import build_row, service_of
from wirelab_bench.tidy_hops import container_rows, replica_rows
from wirelab_bench.topology import ONE_HOP, TopologyError, edge_peers, refusal

# Exit codes (docs/bench.md): CI reads them.
EXIT_OK = 0
EXIT_GATE_FAILED = 1
EXIT_USAGE = 2
EXIT_LAB_NOT_READY = 3
EXIT_INCOMPLETE = 4


class Interrupted(Exception):
    """SIGTERM (or SIGINT) arrived; the run stops and records what it measured."""


def _raise_interrupted(signum: int, _frame: FrameType | None) -> None:
    # Once is enough: a second Ctrl-C must not break the cleanup that records the partial run.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Interrupted(signal.Signals(signum).name)


def _label(c: Cell) -> str:
    size = f" {c.payload_bytes} B" if c.payload_bytes else ""
    runtime = "" if c.runtime == "python" else f" ({c.runtime})"
    return f"{c.protocol}{runtime} {c.kind} {c.load.label}{size} rep {c.repetition}"


def _arms(scenario: Scenario) -> dict[str, tuple[str, ...]]:
    """runtime -> the arms its cells measure, in run order."""
    found: dict[str, dict[str, None]] = {}
    for c in scenario.cells():
        found.setdefault(c.runtime, {})[c.protocol] = None
    return {runtime: tuple(arms) for runtime, arms in found.items()}


def _lab(
    knobs: Knobs, reasons: dict[str, str], topology: str, arms: dict[str, tuple[str, ...]]
) -> Lab:
    """Pick each side's metric source: direct scrapes where they answer, else Prometheus.
    The AMQP arm's edge and the Node.js services are looked for only when ``arms`` (runtime ->
    the scenario's arms) include them."""
    prom = Prometheus(knobs.prometheus_url) if knobs.prometheus_url else None
    if prom is not None and (why := prom.unreachable()):
        reasons["prometheus"] = why
        prom = None
    elif prom is None:
        reasons["prometheus"] = "no Prometheus URL given"
    if prom is None:
        reasons["containers"] = "no Prometheus, so no cAdvisor or node-exporter data"
    urls: dict[str, str] = {}
    edges = {"rest": knobs.rest_metrics_url, "grpc": knobs.grpc_metrics_url}
    if "amqp" in arms.get("python", ()):
        edges["amqp"] = knobs.amqp_metrics_url
    for proto, url in edges.items():
        serves = ARM_EDGES[proto]
        why = probe(url, "wirelab_server_info", protocol=serves) if url else "no URL given"
        if why is None:
            urls[proto] = url
        else:
            via = "using Prometheus" if prom else "server columns empty"
            reasons[f"server_{proto}_scrape"] = f"{why} ({via})"
    node: dict[str, str] = {}
    for proto in arms.get("node", ()):
        url = {"rest": knobs.node_rest_metrics_url, "grpc": knobs.node_grpc_metrics_url}[proto]
        why = probe(url, "wirelab_server_info", protocol=proto) if url else "no URL given"
        if why is None:
            node[proto] = url
        else:
            reasons[f"server_{proto}_node_scrape"] = f"{why} (server columns empty)"
    return Lab(
        rest_url=knobs.rest_url,
        grpc_target=knobs.grpc_target,
        locustfile=Path(knobs.locustfile),
        locust_args=tuple(shlex.split(knobs.locust_args)),
        loadgen=knobs.loadgen,
        loadgen_proto=knobs.loadgen_proto,
        client_metrics_port=knobs.client_metrics_port,
        server_urls=urls,
        prometheus=prom,
        export_delay_s=knobs.export_delay_s,
        export_step_s=knobs.export_step_s,
        topology=topology,
        net_rest_url=knobs.net_rest_url,
        net_grpc_target=knobs.net_grpc_target,
        amqp_target=knobs.amqp_target,
        node_rest_url=knobs.node_rest_url,
        node_grpc_target=knobs.node_grpc_target,
        net_node_rest_url=knobs.net_node_rest_url,
        net_node_grpc_target=knobs.net_node_grpc_target,
        net_amqp_target=knobs.net_amqp_target,
        node_server_urls=node,
    )


def _server_info(lab: Lab) -> dict[str, dict[str, str]]:
    """arm -> the labels of its edge's wirelab_server_info: ``concurrency`` (so runs of the
    two models differ), ``fanout`` (how it calls its downstreams, which sets the work floor) and
    ``client`` (the library it calls them with)."""
    found: dict[str, dict[str, str]] = {}
    edges = [*lab.server_urls.items(), *((f"{p}-node", u) for p, u in lab.node_server_urls.items())]
    for edge, url in edges:
        for _, labels, _ in scrape(url, edge, names=("wirelab_server_info",)):
            found[edge] = labels
    if lab.prometheus is not None:
        # The arm is the edge's job (the AMQP arm's edge serves gRPC: promql.Export).
        for labels in lab.prometheus.instant(f'wirelab_server_info{{job=~"{"|".join(ARMS)}"}}'):
            found.setdefault(labels.get("job", "?"), labels)
    return found


def run(scenario: Scenario, knobs: Knobs) -> tuple[int, Path]:
    """Measure every cell of ``scenario``; returns (exit code, results folder)."""
    cells = scenario.cells()
    # Read before this run's folder exists.
    cost = cell_cost(Path(knobs.results_dir), scenario.name)
    run_dir = new_run_dir(Path(knobs.results_dir), scenario.name)
    progress = Progress(len(cells), enabled=knobs.progress != "off")
    estimate = Estimate([c.seconds for c in cells], cost.seconds)
    began = time.monotonic()
    reasons: dict[str, str] = {}
    manifest: dict[str, Any] = {
        "scenario": scenario.name,
        "scenario_file": str(scenario.path),
        "scenario_text": scenario.path.read_text(),
        "status": "running",
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cells_planned": len(cells),
        "cells_done": [],
        "knobs": vars(knobs),
        "git": environment.git_info(REPO),
        "host": environment.host_info(),
        "packages": environment.packages(REPO),
        "docker": environment.docker_info(knobs.compose_project),
        "missing": reasons,
    }
    write_json(run_dir / MANIFEST, manifest)
    progress.message(f"results: {run_dir}; {len(cells)} cells, about {clock(estimate.left())}")
    old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    rows: list[dict[str, Any]] = []
    hist: list[dict[str, Any]] = []
    # Written only by a topology run: a one-hop folder looks as it always did.
    replicas: list[dict[str, Any]] | None = None if scenario.topology == ONE_HOP else []
    # In a topology run, what each container on a cell's path used (tidy_hops.container_rows).
    containers: list[dict[str, Any]] | None = None if scenario.topology == ONE_HOP else []
    code, phase = EXIT_OK, "preflight"
    network: Network | None = None
    arms = _arms(scenario)
    # Cells calling the Python REST service over h2c: parity is checked over h2c too.
    h2c = any(c.rest_http == "h2c" for c in cells)
    protocols = arms.get("python", ())
    try:
        lab = _lab(knobs, reasons, scenario.topology, arms)
        fanout: dict[str, str] = {}
        try:
            info = _server_info(lab)
            manifest["servers"] = {p: info[p].get("concurrency", "") for p in info}
            manifest["fanout"] = fanout = {p: info[p].get("fanout", "") for p in info}
            # The library each edge calls its downstreams with ("none": it has none): a relay's
            # client can decide a topology's outcome (wirelab perf relay-client).
            manifest["clients"] = {p: info[p].get("client", "") for p in info}
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            manifest["servers"] = {"reason": f"{type(exc).__name__}: {exc}"}
        phase = "topology"
        _wait_healthy(knobs, arms)
        manifest["topology"] = _topology(scenario, lab, arms, progress)
        traces = _traces(knobs, scenario, progress)
        manifest["traces"] = traces.setting
        if needed := scenario.networks():
            phase = "network"
            amqp = any(
                "amqp" in g.protocols and (g.network, g.hops_network) != (DIRECT, DIRECT)
                for g in scenario.groups
            )
            network = Network(Path(knobs.network_profiles), knobs.toxiproxy_url, needed, amqp)
            manifest["network"] = {}
        for cell in cells:
            started = time.monotonic()
            g = cell.group
            links = label(g.network, g.hops_network)
            phase = f"{cell.cell_id}: network {links}"
            if network is not None and (applied := network.use(g.network, g.hops_network)):
                manifest["network"][links] = applied
                said = applied.get("description") or "no toxic on the edges"
                if "hops" in applied:
                    said += f"; hop links {applied['hops']['name']}"
                progress.message(f"network {links}: {said}")
                if protocols:
                    proxied = (knobs.net_rest_url, knobs.net_grpc_target, protocols, 30)
                    wait_healthy(*proxied, amqp_target=knobs.net_amqp_target)
                if node := arms.get("node"):
                    wait_healthy(knobs.net_node_rest_url, knobs.net_node_grpc_target, node, 30)
            phase = f"{cell.cell_id}: health"
            _wait_healthy(knobs, arms)
            phase = f"{cell.cell_id}: parity"
            try:
                manifest["parity"] = _parity(knobs, arms, h2c)
            except ParityCallFailed:
                # Gone since the health check: the health check says whether the service or
                # the way to it died, as it says between cells.
                _wait_healthy(knobs, arms)
                raise
            phase = f"{cell.cell_id}: measure"

            def tick(step: str, step_left: float, c: Cell = cell, t0: float = started) -> None:
                run_left = estimate.left(time.monotonic() - t0)
                progress.show(c.index, _label(c), step, step_left, run_left)

            window, cell_hist = measure(cell, lab, run_dir, tick)
            end = window.started_at + window.seconds
            traces.cell(cell.cell_id, service_of(cell), window.started_at, end, run_dir)
            profile = network.profiles.get(cell.group.network) if network else None
            hops = network.profiles.get(cell.group.hops_network) if network else None
            # Unread (no scrape, no Prometheus): the floor assumes one work after another.
            edge = cell.protocol if cell.runtime == "python" else f"{cell.protocol}-{cell.runtime}"
            mode = fanout.get(edge) or "unknown"
            row = build_row(window, scenario.gates, scenario.topology, profile, mode, hops)
            rows.append(row)
            hist += cell_hist
            if replicas is not None:
                replicas += replica_rows(cell, window.replicas)
            if containers is not None:
                orders = row["server_requests_per_s"] * window.seconds
                where = window.containers
                containers += container_rows(cell, scenario.topology, where, window.seconds, orders)
            write_tables(run_dir, rows, hist, replicas, containers)
            manifest["cells_done"].append(cell.cell_id)
            write_json(run_dir / MANIFEST, manifest)
            estimate.cell_done(time.monotonic() - started)
            if row["generator_saturated"]:
                progress.message(f"{cell.cell_id}: load generator saturated (cell marked)")
            # After the cell (its row kept) as before it: a load that killed its own path, a
            # published port's proxy under thousands of connections, is named in that cell.
            phase = f"{cell.cell_id}: health after"
            _wait_healthy(knobs, arms)
        manifest["status"] = "complete"
        failed = [r["cell_id"] for r in rows if not r["gate_passed"]]
        manifest["gates"] = {"passed": not failed, "failed_cells": failed, **vars(scenario.gates)}
        code = EXIT_GATE_FAILED if failed else EXIT_OK
    except (Interrupted, KeyboardInterrupt) as exc:
        code = _incomplete(manifest, phase, f"interrupted by {exc or 'SIGINT'}")
    except (TimeoutError, ParityError, TopologyError, NetworkUnavailable) as exc:
        if not rows:
            manifest["status"] = "failed"
            manifest["interrupted"] = {"phase": phase, "reason": f"lab not ready: {exc}"}
            progress.message(f"lab not ready: {exc}")
            code = EXIT_LAB_NOT_READY
        else:
            code = _incomplete(manifest, phase, f"lab failed mid-run: {exc}")
    except RuntimeError as exc:
        code = _incomplete(manifest, phase, f"load generator failed: {exc}")
    finally:
        if network is not None:
            manifest["network_reset"] = network.reset()
        for s, handler in old.items():
            signal.signal(s, handler)
        manifest["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        manifest["exit_code"] = code
        write_json(run_dir / MANIFEST, manifest)
    progress.message(
        f"{manifest['status']}: {len(rows)}/{len(cells)} cells in"
        f" {clock(time.monotonic() - began)} ({estimate.overhead_s():.1f} s per cell beyond its"
        f" phases), exit {code}: {run_dir}"
    )
    return code, run_dir


def _traces(knobs: Knobs, scenario: Scenario, progress: Progress) -> jaeger.Recorder:
    """Whether and where each cell's traces are captured (docs/traces.md): read from the first
    edge's environment, where the runner can see it (a docker CLI on the lab's host)."""
    edge = service_of(scenario.cells()[0])
    env = environment.service_env(knobs.compose_project, edge)
    setting = jaeger.setting(env, float(value("WIRELAB_TRACE_SAMPLE_RATIO")), edge)
    topology_run = scenario.topology != ONE_HOP
    return jaeger.Recorder(knobs.jaeger_url, setting, topology_run, progress.message)


def _wait_healthy(knobs: Knobs, arms: dict[str, tuple[str, ...]]) -> None:
    """Every service the cells call answers its health check, through the path the load takes
    (TimeoutError says which not, and whether the service or the way to it died)."""
    python, node = arms.get("python", ()), arms.get("node", ())
    try:
        if python:
            healthy = (knobs.rest_url, knobs.grpc_target, python, knobs.health_timeout_s)
            wait_healthy(*healthy, amqp_target=knobs.amqp_target)
        if node:
            wait_healthy(knobs.node_rest_url, knobs.node_grpc_target, node, knobs.health_timeout_s)
    except TimeoutError as exc:
        services = [*python, *(f"{arm}-node" for arm in node)]
        raise TimeoutError(load_path_verdict(str(exc), knobs.compose_project, services)) from exc


def _parity(knobs: Knobs, arms: dict[str, tuple[str, ...]], h2c: bool = False) -> list[str]:
    """Before every cell: the arms and runtimes measured give the same answers to the same
    inputs (REST and gRPC of each runtime, REST over h2c too when ``h2c`` cells call it so; the
    gRPC order through the AMQP arm and through the Node.js service as through the Python gRPC
    service)."""
    python, node = set(arms.get("python", ())), set(arms.get("node", ()))
    checked = []
    if {"rest", "grpc"} <= python:
        checked += check_parity(knobs.rest_url, knobs.grpc_target)
        if h2c:
            h2 = check_parity(knobs.rest_url, knobs.grpc_target, h2c=True)
            checked += [f"{c} (REST over h2c)" for c in h2]
    if {"grpc", "amqp"} <= python:
        checked += check_arm_parity(knobs.grpc_target, knobs.amqp_target, "amqp")
    if {"rest", "grpc"} <= node:
        checked += [
            f"{c} (node)" for c in check_parity(knobs.node_rest_url, knobs.node_grpc_target)
        ]
    if "grpc" in python and "grpc" in node:
        checked += check_arm_parity(knobs.grpc_target, knobs.node_grpc_target, "python = node")
    return checked


def _topology(
    scenario: Scenario, lab: Lab, arms: dict[str, tuple[str, ...]], progress: Progress
) -> dict[str, Any]:
    """Each edge's downstreams, read live: a run whose figures would carry the wrong topology
    stops here (TopologyError), before anything is measured. The Node.js edges (``rest-node``,
    ``grpc-node``) are read from their own /metrics only: Prometheus's export sums runtimes."""
    peers = edge_peers(arms.get("python", ()), lab.server_urls, lab.prometheus)
    node = edge_peers(arms.get("node", ()), lab.node_server_urls, None)
    for proto in node.found:
        peers.found[f"{proto}-node"] = node.found[proto]
        peers.source[f"{proto}-node"] = node.source[proto]
    if why := refusal(scenario.name, scenario.topology, peers):
        raise TopologyError(why)
    unknown = [p for p, found in peers.found.items() if found is None]
    if unknown:
        progress.message(f"downstreams of {', '.join(unknown)} unknown: topology not checked")
    return {"name": scenario.topology, "peers": peers.found, "peers_source": peers.source}


def _incomplete(manifest: dict[str, Any], phase: str, reason: str) -> int:
    manifest["status"] = "incomplete"
    manifest["interrupted"] = {"phase": phase, "reason": reason}
    return EXIT_INCOMPLETE

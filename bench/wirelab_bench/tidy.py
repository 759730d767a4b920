"""One tidy row per measured cell, computed from the window's metric deltas and peaks."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from wirelab.contract import STREAM_KINDS

from wirelab_bench.histo import Snapshot, buckets, quantile, total
from wirelab_bench.network import Profile, describe
from wirelab_bench.scenario import Cell, Gates
from wirelab_bench.tidy_hops import chain_columns, floor_columns, hop_columns
from wirelab_bench.topology import ONE_HOP

QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99, "p999": 0.999}
NAN = math.nan


@dataclass
class Window:
    """What one measured window produced; a side missing its source stays None."""

    cell: Cell
    started_at: float
    seconds: float
    server: Snapshot | None = None
    client: Snapshot | None = None
    containers: Snapshot | None = None
    replicas: Snapshot | None = None  # orders served per hop replica (topology runs)
    peaks: Snapshot = field(default_factory=dict)
    generator_cpu_ratio: float = NAN
    # The runner's own CPU over the window (its scrapes and samples run on the machine measured).
    runner_cpu_ratio: float = NAN
    # Cores Docker's userland proxies took relaying the load from the host (hostcpu.PROXY).
    proxy_cpu_ratio: float = NAN
    # Cores other work on the host took in the window (hostcpu.other_cpu).
    host_other_cpu: float = NAN
    sources: dict[str, str] = field(default_factory=dict)
    # wirelab-loadgen's summary of its run: how its open loop kept the schedule (in the window).
    schedule: dict[str, Any] | None = None


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else NAN


def _latencies(snap: Snapshot | None, hist: str, prefix: str, **match: str) -> dict[str, float]:
    cum = buckets(snap, hist, **match) if snap is not None else []
    return {f"{prefix}_{n}_ms": quantile(q, cum) * 1000 for n, q in QUANTILES.items()}


def payload_per_call(cell: Cell) -> float:
    """Application payload bytes one call moves in its main direction (NaN for orders)."""
    if cell.kind in ("server_stream", "bidi"):
        return float(cell.group.stream_count * cell.payload_bytes)
    return float(cell.payload_bytes) if cell.payload_bytes else NAN


def build_row(
    w: Window,
    gates: Gates,
    topology: str = ONE_HOP,
    network: Profile | None = None,
    fanout: str = "sequential",
    hops: Profile | None = None,
) -> dict[str, Any]:
    """The tidy row: identifiers, then rates, latencies, the work floor and the hops, resources
    and gate verdict. ``network``: the profile the cell ran under (None: direct, no proxy);
    ``fanout``: how the edge called its downstreams (its wirelab_server_info); ``hops``: the
    profile of a topology's hop links (None: direct)."""
    c, s = w.cell, w.seconds
    pk = {"protocol": c.protocol, "kind": c.kind}
    net = describe(network)
    # A one-hop cell has no hop links: its hop columns stay empty.
    hop = describe(hops) if topology != ONE_HOP else {"name": "", "rtt_ms": NAN}
    row: dict[str, Any] = {
        "cell_id": c.cell_id,
        "group": c.group.name,
        "topology": topology,
        "network": net["name"],
        "network_rtt_ms": net["rtt_ms"],
        "network_jitter_ms": net["jitter_ms"],
        "network_bandwidth_kbps": net["bandwidth_kbps"] or NAN,
        "hop_network": hop["name"],
        "hop_network_rtt_ms": hop["rtt_ms"],
        "runtime": c.runtime,
        "generator": c.group.generator,
        # REST cells: the HTTP they spoke (1.1 or h2c); empty for the other protocols.
        "rest_http": c.rest_http,
        "protocol": c.protocol,
        "kind": c.kind,
        "load": c.load.label,
        "users": c.load.users,
        "target_rate": c.load.rate if c.load.rate is not None else NAN,
        "payload_bytes": c.payload_bytes,
        "repetition": c.repetition,
        "started_at": w.started_at,
        "window_s": s,
    }
    srv, cli = w.server, w.client
    server_requests = total(srv, "server_requests", **pk) if srv is not None else NAN
    server_ok = total(srv, "server_requests", outcome="ok", **pk) if srv is not None else NAN
    if cli is not None:
        requests = total(cli, "client_requests", **pk)
        ok = total(cli, "client_requests", outcome="ok", **pk)
    else:
        requests, ok = server_requests, server_ok
    row |= {
        "requests": requests,
        "errors": requests - ok,
        "requests_per_s": _ratio(requests, s),
        "ok_per_s": _ratio(ok, s),
        "error_pct": 100 * _ratio(requests - ok, requests) if requests > 0 else NAN,
        "server_requests_per_s": _ratio(server_requests, s),
    }
    row |= _latencies(cli, "client_duration", "client", **pk)
    row |= _latencies(srv, "server_duration", "server", **pk)
    row |= floor_columns(c, topology, cli, fanout)
    row |= hop_columns(c, topology, srv, server_requests)
    stream = c.kind in STREAM_KINDS
    for side, snap in (("client", cli), ("server", srv)):
        ttfm = buckets(snap, f"{side}_ttfm", **pk) if stream and snap is not None else []
        row[f"{side}_ttfm_p50_ms"] = quantile(0.5, ttfm) * 1000
        row[f"{side}_ttfm_p95_ms"] = quantile(0.95, ttfm) * 1000
    row |= _resources(w, server_requests, pk, service_of(c))
    row |= chain_columns(c, topology, w.containers, server_requests)
    if stream and srv is not None:
        row["messages_per_s"] = _ratio(total(srv, "server_messages_sent", **pk), s)
    elif stream and cli is not None:
        row["messages_per_s"] = _ratio(total(cli, "client_messages_received", **pk), s)
    else:
        row["messages_per_s"] = NAN
    row["payload_bytes_per_s"] = _ratio(ok * payload_per_call(c), s)
    row |= schedule_columns(c, w.schedule, row["requests_per_s"])
    row["generator_cpu_ratio"] = w.generator_cpu_ratio
    saturated_flag = total(w.peaks, "client_saturated") if w.peaks else 0.0
    row["generator_saturated"] = bool(w.generator_cpu_ratio >= 0.9 or saturated_flag >= 1)
    row["runner_cpu_ratio"] = w.runner_cpu_ratio
    row["proxy_cpu_ratio"] = w.proxy_cpu_ratio
    row["host_other_cpu"] = w.host_other_cpu
    row["client_source"] = w.sources.get("client", "none")
    row["server_source"] = w.sources.get("server", "none")
    row["container_source"] = w.sources.get("containers", "none")
    row["notes"] = w.sources.get("prometheus_errors", "")
    row |= gate_verdict(row, gates)
    return row


def schedule_columns(
    cell: Cell, summary: dict[str, Any] | None, answered_per_s: float
) -> dict[str, Any]:
    """An open-loop cell's schedule as wirelab-loadgen kept it: the arrivals, the calls it
    scheduled and dropped (no worker free at the intended start: never started late), their
    share, the p99 of how late workers started the others, and ``on_time``: nothing dropped and
    at least 95 % of the offered rate answered in the window. The counts are those of the calls
    intended in the measured window (the summary's ``window``, by the generator's clock), or of
    its whole run, warm-up included, in a summary without one (a generator before 27 Nov). Empty
    for a closed loop, and for a run that wrote no summary."""
    rate = cell.load.rate if cell.group.generator == "loadgen" else None
    if rate is None or summary is None:
        return {
            "arrivals": cell.group.arrivals if rate is not None else "",
            "scheduled": NAN,
            "dropped": NAN,
            "dropped_pct": NAN,
            "start_lag_p99_ms": NAN,
            "on_time": None,
        }
    counted = summary.get("window") or summary
    scheduled, dropped = counted["scheduled"], counted["dropped"]
    return {
        "arrivals": cell.group.arrivals,
        "scheduled": scheduled,
        "dropped": dropped,
        "dropped_pct": 100 * _ratio(dropped, scheduled),
        "start_lag_p99_ms": counted["start_lag_ms"]["p99"],
        "on_time": bool(dropped == 0 and answered_per_s >= 0.95 * rate),
    }


def service_of(cell: Cell) -> str:
    """The compose service of a cell's edge: its protocol's, or the Node.js one (rest-node)."""
    return cell.protocol if cell.runtime == "python" else f"{cell.protocol}-{cell.runtime}"


def _resources(
    w: Window, server_requests: float, pk: dict[str, str], service: str
) -> dict[str, float]:
    srv, job = w.server, {"job": pk["protocol"]}
    out: dict[str, float] = {}
    if srv is not None:
        sent = total(srv, "server_response_bytes_sum", **pk)
        received = total(srv, "server_request_bytes_sum", **pk)
        cpu = total(srv, "server_cpu_seconds", **job)
        out["cpu_s_per_request"] = _ratio(cpu, server_requests)
        out["server_cpu_pct"] = 100 * _ratio(cpu, w.seconds)
        # Divide each sum by its own histogram's count: a scrape reads metric families one after
        # another, so another family's count can be a call or two ahead of this sum.
        up = _ratio(received, total(srv, "server_request_bytes_count", **pk))
        down = _ratio(sent, total(srv, "server_response_bytes_count", **pk))
        out["request_bytes_per_request"] = up
        out["response_bytes_per_request"] = down
        out["wire_bytes_per_request"] = up + down
    else:
        out |= dict.fromkeys(
            (
                "cpu_s_per_request",
                "server_cpu_pct",
                "request_bytes_per_request",
                "response_bytes_per_request",
                "wire_bytes_per_request",
            ),
            NAN,
        )
    seen_cpu = any(n == "server_cpu_peak_rate" for n, _ in w.peaks)
    peak_cpu = total(w.peaks, "server_cpu_peak_rate", **job)
    out["server_cpu_peak_pct"] = 100 * peak_cpu if seen_cpu else NAN
    seen_rss = any(n == "server_resident_memory" for n, _ in w.peaks)
    out["peak_rss_bytes"] = total(w.peaks, "server_resident_memory", **job) if seen_rss else NAN
    ct = w.containers
    svc = {"container_label_com_docker_compose_service": service}
    cpu = total(ct, "container_cpu_seconds", **svc) if ct is not None else 0.0
    out["container_peak_memory_bytes"] = total(w.peaks, "container_memory", **svc) or NAN
    if cpu > 0 and ct is not None:
        net = total(ct, "container_network_receive_bytes", **svc) + total(
            ct, "container_network_transmit_bytes", **svc
        )
        out["container_cpu_s_per_request"] = _ratio(cpu, server_requests)
        out["container_cpu_pct"] = 100 * _ratio(cpu, w.seconds)
        out["container_cpu_peak_pct"] = 100 * total(w.peaks, "container_cpu_peak_rate", **svc)
        out["container_net_bytes_per_request"] = _ratio(net, server_requests)
        # Share of the CPU limit's periods in which it held the service back: bursts past the
        # limit wait for the next period, which shows in the tail before it shows in the mean.
        periods = total(ct, "container_cpu_periods", **svc)
        throttled = total(ct, "container_cpu_throttled_periods", **svc)
        out["container_throttled_pct"] = 100 * throttled / periods if periods > 0 else NAN
    else:
        # A running container's CPU counter never stands still between two cAdvisor scrapes,
        # so no increase means no scrape landed inside the window (shorter than its interval):
        # unknown, not zero.
        out |= dict.fromkeys(
            (
                "container_cpu_s_per_request",
                "container_cpu_pct",
                "container_cpu_peak_pct",
                "container_net_bytes_per_request",
                "container_throttled_pct",
            ),
            NAN,
        )
    return out


def gate_verdict(row: dict[str, Any], gates: Gates) -> dict[str, Any]:
    """Pass unless the error ratio or the p99 (client side, else server side) is over its gate."""
    reasons = []
    err = row["error_pct"]
    if math.isnan(err) or row["requests"] <= 0:
        reasons.append("no requests completed")
    elif err / 100 > gates.max_error_ratio:
        reasons.append(f"error ratio {err / 100:.4f} > {gates.max_error_ratio}")
    if gates.max_p99_ms is not None:
        p99 = row["client_p99_ms"]
        if math.isnan(p99):
            p99 = row["server_p99_ms"]
        if not math.isnan(p99) and p99 > gates.max_p99_ms:
            reasons.append(f"p99 {p99:.1f} ms > {gates.max_p99_ms} ms")
    return {"gate_passed": not reasons, "gate_reasons": "; ".join(reasons)}

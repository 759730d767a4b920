"""Traces of a cell's window from Jaeger's query API, kept compactly in the results folder.

A topology run against a lab with the ``traces`` profile (docs/traces.md) fetches, at each cell's
end, the traces its edge began in the cell's window (``/api/traces?service=&start=&end=&limit=``)
and writes them to ``traces/<cell id>.json``: per trace its id and, per span, the service, the
name, its kind, its parent, its start as an offset from the trace's first span and its duration.
The report draws a median and a p99 order from them (wirelab_bench.waterfall). A Jaeger that is
absent or fails leaves the run as it was: the manifest says why nothing was captured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from wirelab_bench import webclient
from wirelab_bench.results import write_json

TRACES_DIR = "traces"
# The services export spans in batches every 5 s (the OpenTelemetry SDK's BatchSpanProcessor,
# OTEL_BSP_SCHEDULE_DELAY's default): a window's last orders reach Jaeger up to that long after
# it ends, plus Jaeger's own indexing.
SETTLE_S = 6.0
# Jaeger returns the newest traces first, at most this many per cell: past it the file says
# ``truncated`` and keeps the window's latest orders. A span takes about 300 bytes as written
# (the traced a-to-b run of tests/bench/test_trace_waterfall_run.py): 2,000 orders of the AMQP
# arm, 13 spans each, about 8 MB.
LIMIT = 2000
# Jaeger's span kinds (the OTLP kind as its tag), and the services' switches as they read them.
KIND_TAG = "span.kind"
TRACES_ON, RATIO = "WIRELAB_TRACES", "WIRELAB_TRACE_SAMPLE_RATIO"


@dataclass(frozen=True)
class Captured:
    """What one cell's capture kept: traces begun by the edge in the window, the traces
    without their edge's root span (not yet exported, or begun elsewhere), and why nothing was
    kept if Jaeger failed."""

    traces: int = 0
    rootless: int = 0
    truncated: bool = False
    error: str = ""


def setting(env: dict[str, str] | None, default_ratio: float, where: str) -> dict[str, Any]:
    """The manifest's ``traces``: whether the edge ``where`` ran with traces on and at which
    head-sampling ratio, from its environment (None: unknown, e.g. no docker CLI)."""
    if env is None:
        why = f"{where}'s environment not read: no docker CLI, or no container of the project"
        return {"on": None, "ratio": None, "source": why}
    on = env.get(TRACES_ON, "off") == "on"
    ratio = float(env.get(RATIO) or default_ratio) if on else None
    return {"on": on, "ratio": ratio, "source": f"{where}'s environment"}


def unreachable(url: str, timeout: float = 5.0) -> str | None:
    """None when Jaeger's query API answers at ``url``; otherwise why not, in one line."""
    try:
        _get(url, "/api/services", {}, timeout)
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return f"{url}: {type(exc).__name__}: {exc}"
    return None


def _get(url: str, path: str, params: dict[str, str], timeout: float) -> Any:
    response = webclient.client().get(url.rstrip("/") + path, params=params, timeout=timeout)
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise ValueError(f"Jaeger says: {body['errors']}")
    return body["data"]


def fetch(
    url: str, service: str, start_s: float, end_s: float, limit: int = LIMIT, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """Jaeger's traces with a span of ``service`` starting in [start_s, end_s] (Unix seconds),
    newest first, as its API returns them."""
    params = {
        "service": service,
        "start": str(math.floor(start_s * 1e6)),
        "end": str(math.ceil(end_s * 1e6)),
        "limit": str(limit),
    }
    data: list[dict[str, Any]] = _get(url, "/api/traces", params, timeout) or []
    return data


def compact(trace: dict[str, Any]) -> dict[str, Any]:
    """One trace of Jaeger's API as the results folder keeps it: its id, its first span's start
    (Unix µs) and its spans, each with its start as an offset from that one, earliest first."""
    processes = trace.get("processes") or {}
    spans = trace.get("spans") or []
    first = min((int(s["startTime"]) for s in spans), default=0)
    kept = []
    for s in spans:
        parents = [r["spanID"] for r in s.get("references") or [] if r.get("refType") == "CHILD_OF"]
        tags = {t["key"]: t.get("value") for t in s.get("tags") or []}
        kept.append(
            {
                "id": s["spanID"],
                "parent": parents[0] if parents else None,
                "service": (processes.get(s.get("processID")) or {}).get("serviceName", ""),
                "name": s.get("operationName", ""),
                "kind": str(tags.get(KIND_TAG, "")),
                "start_us": int(s["startTime"]) - first,
                "duration_us": int(s["duration"]),
            }
        )
    kept.sort(key=lambda s: (s["start_us"], s["id"]))
    return {"trace_id": trace["traceID"], "start_us": first, "spans": kept}


def root_of(trace: dict[str, Any]) -> dict[str, Any] | None:
    """A compact trace's root span: the one whose parent is not in the trace (None without one,
    or with several: part of the trace is missing)."""
    ids = {s["id"] for s in trace["spans"]}
    roots = [s for s in trace["spans"] if s["parent"] not in ids]
    return roots[0] if len(roots) == 1 else None


def capture(
    url: str, service: str, start_s: float, end_s: float, path: Path, limit: int = LIMIT
) -> Captured:
    """Fetch the traces ``service`` (the cell's edge) began in [start_s, end_s] and write them
    to ``path``: those whose root span is the edge's and started in the window. A failing Jaeger
    writes nothing and says why."""
    try:
        raw = fetch(url, service, start_s, end_s, limit)
        traces = [compact(t) for t in raw]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        return Captured(error=f"{url}: {type(exc).__name__}: {exc}")
    begun, rootless = [], 0
    for t in traces:
        root = root_of(t)
        if root is None or root["service"] != service:
            rootless += 1
        elif start_s * 1e6 <= t["start_us"] + root["start_us"] <= end_s * 1e6:
            begun.append(t)
    truncated = len(raw) >= limit
    write_json(
        path,
        {
            "service": service,
            "window": [start_s, end_s],
            "jaeger": url,
            "limit": limit,
            "truncated": truncated,
            "rootless": rootless,
            "traces": begun,
        },
    )
    return Captured(len(begun), rootless, truncated)


class Recorder:
    """A run's trace captures: whether to capture is decided once, before the cells (a topology
    run, traces not known to be off, a Jaeger that answers), then each cell's are fetched at its
    end. ``setting`` is the manifest's ``traces``, kept up to date; ``say`` prints one line."""

    def __init__(
        self, url: str, setting: dict[str, Any], topology_run: bool, say: Callable[[str], None]
    ) -> None:
        self.url, self.say = url, say
        self.setting = {**setting, "jaeger_url": url, "captured": False, "cells": {}}
        if not topology_run:
            why = "a one-hop run: no hops to draw"
        elif setting.get("on") is False:
            why = "traces off in the lab (make lab PROFILES=traces turns them on)"
        elif not url:
            why = "no Jaeger URL given"
        elif (down := unreachable(url)) is not None:
            why = f"Jaeger does not answer: {down}"
            say(f"traces not captured: {why}")
        else:
            why = ""
        self.setting["captured"] = not why
        if why:
            self.setting["reason"] = why
        self._failed = False

    @property
    def active(self) -> bool:
        return bool(self.setting["captured"])

    def cell(self, cell_id: str, service: str, start_s: float, end_s: float, run_dir: Path) -> None:
        """Capture one cell's traces into ``run_dir/traces/<cell_id>.json`` once the services'
        last batch of the window can have reached Jaeger; a failure is recorded, not raised."""
        if not self.active:
            return
        time.sleep(max(0.0, end_s + SETTLE_S - time.time()))
        got = capture(self.url, service, start_s, end_s, run_dir / TRACES_DIR / f"{cell_id}.json")
        cells: dict[str, Any] = self.setting["cells"]
        if got.error:
            cells[cell_id] = {"error": got.error}
            if not self._failed:
                self.say(f"{cell_id}: traces not captured ({got.error}); see the manifest")
            self._failed = True
            return
        kept = {"traces": got.traces, "rootless": got.rootless, "truncated": got.truncated}
        cells[cell_id] = kept

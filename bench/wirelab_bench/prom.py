"""Prometheus HTTP API: reachability and range exports of a measured window."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import httpx

from wirelab_bench import webclient
from wirelab_bench.histo import Snapshot, key
from wirelab_bench.promql import EXPORTS, GAUGES, RATE_PEAKS, Export


@dataclass
class WindowExport:
    """A window's range exports: raw API answers for the files, and per-export start/end/peak."""

    raw: dict[str, Any] = field(default_factory=dict)
    start: Snapshot = field(default_factory=dict)
    end: Snapshot = field(default_factory=dict)
    peak: Snapshot = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


class Prometheus:
    """A small client for the query API of one Prometheus server."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def unreachable(self) -> str | None:
        """None when the server answers a trivial query; otherwise the reason."""
        try:
            self._get("/api/v1/query", {"query": "1"})
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            return f"{self.url}: {type(exc).__name__}: {exc}"
        return None

    def _get(self, path: str, params: dict[str, str]) -> Any:
        response = webclient.client().get(self.url + path, params=params, timeout=self.timeout)
        response.raise_for_status()
        body = response.json()
        if body.get("status") != "success":
            raise ValueError(body.get("error", "query failed"))
        return body["data"]

    def instant(self, query: str) -> list[dict[str, str]]:
        """The label sets of an instant query's result."""
        data = self._get("/api/v1/query", {"query": query})
        return [dict(series["metric"]) for series in data.get("result", [])]

    def export_window(
        self, start: float, end: float, step: float, exports: Mapping[str, Export] = EXPORTS
    ) -> WindowExport:
        """Range-query every export over [start, end]; the first and last points give deltas."""
        out = WindowExport()
        # Whole steps only, so the last evaluation lands exactly on the window's end.
        end = start + max(1, math.ceil((end - start) / step)) * step
        # Queries run side by side: on a loaded 2-core host, one after another took seconds.
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = pool.map(lambda n: (n, self._range(exports[n], start, end, step)), exports)
        for name, (params, answer) in answers:
            if isinstance(answer, Exception):
                out.errors[name] = f"{type(answer).__name__}: {answer}"
                continue
            out.raw[name] = {**params, "data": answer}
            # Per ``by`` group and instant, the rates of its series (summed where ``apart``
            # keeps several: a service's replicas peak together only if they do at one time).
            rates: dict[tuple[tuple[str, str], ...], dict[float, float]] = defaultdict(
                lambda: defaultdict(float)
            )
            for series in answer.get("result", []):
                labels = {k: v for k, v in series["metric"].items() if k in exports[name].grouping}
                values = [(float(t), float(v)) for t, v in series.get("values", [])]
                if not values:
                    continue
                k = key(name, labels)
                # A failed scrape leaves a gap (a staleness marker), also at the window's start:
                # the first point there is then the best known start, never zero.
                out.start[k] = values[0][1]
                out.end[k] = values[-1][1]
                if name in GAUGES:
                    out.peak[k] = max(v for _, v in values)
                if name in RATE_PEAKS:
                    at = rates[exports[name].merged(labels)]
                    for (t0, v0), (t1, v1) in pairwise(values):
                        at[t1] += max(0.0, v1 - v0) / (t1 - t0)  # a reset adds no rate
            for group, at in rates.items():
                if at:
                    out.peak[(RATE_PEAKS[name], group)] = max(at.values())
        return out

    def _range(
        self, export: Export, start: float, end: float, step: float
    ) -> tuple[dict[str, str], Any]:
        # Bucket series are hundreds (le x kind x protocol) and only their deltas are used:
        # the window's two ends suffice. The few other series keep their curve for plots.
        every = end - start if export.metric.endswith("_bucket") else step
        params = {
            "query": export.promql,
            "start": f"{start:.3f}",
            "end": f"{end:.3f}",
            "step": f"{every:g}",
        }
        try:
            return params, self._get("/api/v1/query_range", params)
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            return params, exc

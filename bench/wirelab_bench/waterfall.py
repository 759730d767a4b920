"""The report's hop-by-hop waterfall (docs/traces.md): a median and a p99 order of a topology
run's traces (traces/<cell>.json, wirelab_bench.jaeger), drawn span by span, and where the traces
and the hops' histograms disagree, and by how much."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes

from wirelab_bench.histo import quantile
from wirelab_bench.jaeger import TRACES_DIR, root_of

# Below this many orders a p99 is the slowest order or close to it: not a percentile worth naming.
MIN_FOR_P99 = 20
# The edge's own outgoing calls: a relay's HTTP or gRPC client span, the AMQP arm's publish.
CALLS = ("client", "producer")
Cumulative = list[tuple[float, float]]


@dataclass(frozen=True)
class Span:
    id: str
    parent: str | None
    service: str
    name: str
    kind: str
    start_ms: float  # from the trace's first span
    duration_ms: float

    @property
    def end_ms(self) -> float:
        return self.start_ms + self.duration_ms


@dataclass(frozen=True)
class Order:
    """One traced order: its spans and its root, the edge's server span."""

    trace_id: str
    spans: tuple[Span, ...]
    root: Span

    @property
    def duration_ms(self) -> float:
        return self.root.duration_ms

    def children(self, span: Span) -> list[Span]:
        return sorted((s for s in self.spans if s.parent == span.id), key=lambda s: s.start_ms)

    def rows(self) -> list[tuple[int, Span]]:
        """Every span under the root, depth first, each with its depth (the root's is 0)."""
        out: list[tuple[int, Span]] = []
        stack = [(0, self.root)]
        while stack:
            depth, span = stack.pop()
            out.append((depth, span))
            stack += [(depth + 1, c) for c in reversed(self.children(span))]
        return out

    def extent_ms(self, span: Span) -> float:
        """From ``span``'s start to the latest end among it and its descendants in its own
        service: a relay's call as the relay timed it (a downstream's server span may end after
        its answer left), and the AMQP arm's publish until the edge received the reply (which
        the edge's hop histogram times too)."""
        end, todo = span.end_ms, [span]
        while todo:
            for child in self.children(todo.pop()):
                if child.service == span.service:
                    end = max(end, child.end_ms)
                todo.append(child)
        return end - span.start_ms

    def hops(self) -> list[tuple[Span, float]]:
        """The edge's calls to its downstreams, each with its extent (ms)."""
        calls = [s for s in self.spans if s.service == self.root.service and s.kind in CALLS]
        return [(s, self.extent_ms(s)) for s in sorted(calls, key=lambda s: s.start_ms)]


def _span(s: dict[str, Any]) -> Span:
    start, duration = s["start_us"] / 1000, s["duration_us"] / 1000
    return Span(
        s["id"], s.get("parent"), s["service"], s["name"], s.get("kind", ""), start, duration
    )


def orders(doc: dict[str, Any]) -> list[Order]:
    """The orders of one traces/<cell>.json document (traces without one root skipped)."""
    found = []
    for trace in doc.get("traces") or []:
        root = root_of(trace)
        if root is not None:
            spans = tuple(_span(s) for s in trace["spans"])
            found.append(Order(trace["trace_id"], spans, _span(root)))
    return found


def load(run_dir: Path) -> dict[str, dict[str, Any]]:
    """cell id -> its traces document, for every cell whose traces were captured."""
    folder = run_dir / TRACES_DIR
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return {path.stem: json.loads(path.read_text()) for path in files}


def rank(q: float, n: int) -> int:
    """The nearest-rank index (0-based) of quantile ``q`` among ``n`` sorted values."""
    return max(0, math.ceil(q * n) - 1)


@dataclass(frozen=True)
class Picks:
    """The orders drawn: the median and the p99 by the edge's span (None: too few orders)."""

    count: int
    median: Order | None
    p99: Order | None

    @property
    def p99_rank(self) -> int:
        return rank(0.99, self.count) + 1


def pick(found: Sequence[Order]) -> Picks:
    ordered = sorted(found, key=lambda o: (o.duration_ms, o.trace_id))
    n = len(ordered)
    median = ordered[rank(0.5, n)] if n else None
    p99 = ordered[rank(0.99, n)] if n >= MIN_FOR_P99 else None
    return Picks(n, median, p99)


def bucket_of(q: float, cumulative: Cumulative) -> tuple[float, float] | None:
    """The (lower, upper] bounds in seconds of the histogram bucket holding quantile ``q``, by
    the rule of histo.quantile; None for an empty histogram."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    target = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for le, count in cumulative:
        if count >= target and count > below:
            return lower, le
        lower, below = le, count
    return lower, math.inf


@dataclass(frozen=True)
class Check:
    """One figure, read from the traces and from a histogram of the same calls."""

    figure: str  # "edge server span p99", ...
    traces_ms: float
    histogram_ms: float
    bucket_ms: tuple[float, float]  # the histogram's bucket holding its quantile

    @property
    def agrees(self) -> bool:
        """Within the histogram's bucket: as close as its buckets can tell."""
        low, high = self.bucket_ms
        return low <= self.traces_ms <= high

    def said(self) -> str:
        low, high = self.bucket_ms
        where = f"{low:g}-{high:g} ms" if math.isfinite(high) else f"above {low:g} ms"
        if self.agrees:
            return f"agree: within the histogram's bucket ({where})"
        diff = self.traces_ms - self.histogram_ms
        times = self.traces_ms / self.histogram_ms if self.histogram_ms > 0 else math.nan
        return f"disagree by {diff:+.2f} ms ({times:.2f}x), outside the bucket ({where})"

    def row(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "traces ms": round(self.traces_ms, 3),
            "histogram ms": round(self.histogram_ms, 3),
            "verdict": self.said(),
        }


def check(figure: str, q: float, values: Iterable[float], cum: Cumulative) -> Check | None:
    """``figure``'s quantile ``q`` from ``values`` (traces, ms; nearest rank) against the
    histogram's; None when either has nothing."""
    ordered = sorted(values)
    bucket = bucket_of(q, cum)
    if not ordered or bucket is None:
        return None
    from_hist = quantile(q, cum) * 1000
    return Check(
        figure, ordered[rank(q, len(ordered))], from_hist, (bucket[0] * 1000, bucket[1] * 1000)
    )


def checks(found: Sequence[Order], server: Cumulative, hop: Cumulative) -> list[Check]:
    """The edge's server span and the edge's calls to its downstreams, median and (with
    MIN_FOR_P99 orders or more) p99, from the traces against the server and hop histograms."""
    roots = [o.duration_ms for o in found]
    calls = [extent for o in found for _, extent in o.hops()]
    quantiles = [("p50", 0.5)] + ([("p99", 0.99)] if len(found) >= MIN_FOR_P99 else [])
    made = []
    for name, q in quantiles:
        made.append(check(f"edge server span {name}", q, roots, server))
        made.append(check(f"edge → downstream call {name}", q, calls, hop))
    return [c for c in made if c is not None]


def picked(order: Order, which: str, q: float, server: Cumulative, hop: Cumulative) -> str:
    """A sentence on one drawn order against the histograms' same quantile: its edge span, and
    its slowest call to a downstream."""
    said = [f"The {which} order (trace `{order.trace_id}`): the edge's span took "
            f"{order.duration_ms:.2f} ms"]  # fmt: skip
    edge = check("", q, [order.duration_ms], server)
    if edge is not None:
        said.append(f" against the server histogram's {which} of {edge.histogram_ms:.2f} ms "
                    f"({edge.said()})")  # fmt: skip
    calls = order.hops()
    if calls:
        span, slowest = max(calls, key=lambda c: c[1])
        said.append(f"; its slowest hop, {span.name} ({span.service} →), took {slowest:.2f} ms")
        call = check("", q, [slowest], hop)
        if call is not None:
            said.append(f" against the hop histogram's {which} of {call.histogram_ms:.2f} ms "
                        f"({call.said()})")  # fmt: skip
    return "".join(said) + "."


def draw(ax: Axes, order: Order, title: str, color_of: Callable[[str], str]) -> None:
    """``order`` as a waterfall: a bar per span from its start for its duration, labelled with
    its service and name, indented under its parent; calls (client, producer) lighter."""
    rows = order.rows()
    labels = [f"{'  ' * depth}{s.service}{f' ({s.kind})' if s.kind else ''}: {s.name}"
              for depth, s in rows]  # fmt: skip
    for i, (_, s) in enumerate(rows):
        light = 0.55 if s.kind in CALLS else 1.0
        ax.barh(i, max(s.duration_ms, 1e-3), left=s.start_ms, height=0.6,
                color=color_of(s.service), alpha=light)  # fmt: skip
        ax.annotate(f"{s.duration_ms:.2f} ms", (s.end_ms, i), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=6)  # fmt: skip
    # Left-aligned monospace labels, pushed out by the longest: the indentation shows.
    width = max(len(label) for label in labels)
    ax.set_yticks(range(len(rows)), labels, fontsize=7, fontfamily="monospace", ha="left")
    ax.tick_params(axis="y", pad=4.6 * width + 4, length=0)
    ax.invert_yaxis()
    ax.set_xlim(0, order.root.end_ms * 1.18)
    ax.set_xlabel("ms from the order's first span")
    ax.set_title(title, fontsize=9)

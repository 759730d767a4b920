"""Process plumbing both services share: the /metrics thread, loud failures to listen, and the
startup heap kept out of the garbage collector's way."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import NoReturn

from prometheus_client import CollectorRegistry, disable_created_metrics

from wirelab.exposition import start_server
from wirelab.metrics import ServerMetrics
from wirelab.settings import Settings


def fail_to_listen(prog: str, what: str, host: str, port: int, exc: BaseException) -> NoReturn:
    """Exit non-zero with one clear line instead of a traceback (e.g. the port is taken)."""
    print(f"{prog}: cannot listen for {what} on {host}:{port}: {exc}", file=sys.stderr)
    sys.exit(1)


def bad_configuration(prog: str, exc: Exception) -> NoReturn:
    """Exit non-zero with the knob problem in one line (e.g. a downstream of the wrong protocol)."""
    print(f"{prog}: {exc}", file=sys.stderr)
    sys.exit(2)


def instruments(settings: Settings, protocol: str, concurrency: str) -> ServerMetrics | None:
    """The server metrics (in a registry of their own, rendered before the default one), or
    None when WIRELAB_METRICS=off."""
    if not settings.metrics:
        return None
    # The fan-out mode tells a run's work floor (wirelab_bench.topology): all at once waits for
    # one work_ms, one after another for each.
    fanout = settings.fanout if settings.downstream else "none"
    metrics = ServerMetrics(
        protocol, CollectorRegistry(), concurrency, fanout, client_of(settings, protocol)
    )
    if settings.traces:  # sampled calls' trace ids as the duration histogram's exemplars
        metrics.keep_exemplars()
    return metrics


def client_of(settings: Settings, protocol: str) -> str:
    """The library a service calls its downstreams with (wirelab_server_info's ``client``): a
    relay's client can decide a topology's outcome (docs/topologies.md), so a run names it."""
    if not settings.downstream:
        return "none"
    if protocol == "rest":
        return settings.rest_client
    return "aio-pika" if all(t.startswith("amqp://") for t in settings.downstream) else "grpcio"


def serve_metrics(
    settings: Settings,
    prog: str,
    metrics: ServerMetrics | None,
    ready: Callable[[], str | None] | None = None,
) -> None:
    """Serve ``metrics`` and the default registry's process_* and python_* collectors on the
    metrics port from a thread of its own: both services expose them the same way, off the API
    port, the process figures even with instrumentation off (wirelab/exposition.py)."""
    # No `_created` sample per counter and histogram series: in the text format Prometheus ingests
    # each as a series of its own, and no query reads them. A fresh process's page, counted with
    # `curl -s 127.0.0.1:9100/metrics | grep -vc '^#'`: REST 928 -> 835 samples, gRPC 752 -> 679.
    disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        registry = None if metrics is None else metrics.registry
        # With traces on, OpenMetrics to a scraper that asks for it: the text format has no
        # exemplars.
        start_server(settings.host, settings.metrics_port, registry, ready, settings.traces)
    except OSError as exc:
        fail_to_listen(prog, "metrics", settings.host, settings.metrics_port, exc)


def settle() -> None:
    """Call once the service is built, just before it serves: what starting made (modules,
    classes, the app, about 65,000 tracked objects in the gRPC service) is collected once and
    frozen (``gc.freeze``), so a later full collection walks only what was made since, not the
    whole heap. Without it a full collection of the gRPC service took 75 ms, and under load the
    calls' promoted leftovers bring one again and again: the metrics-on service, one more
    tracked object per call than metrics off, reached one inside a measured round (7.5 s after
    it started), and `wirelab perf overhead --protocols grpc` (32 rounds over 16 process pairs,
    29 Nov 2026) read 0.945-0.957 where the frozen heap reads 0.976 and 0.978
    (docs/services.md#observer-effect-metrics-on-vs-off)."""
    gc.collect()
    gc.freeze()

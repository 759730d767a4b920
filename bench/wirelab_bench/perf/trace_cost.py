"""What tracing costs a REST order in process: CPU per order, traces off, ours, the library's.

The REST app of `python -m wirelab.rest` (metrics on) is called directly, as uvicorn calls it,
with the small order, so what is timed is the app's own CPU per order: no socket, no HTTP
parser, no load tool, and a loaded machine moves it little (the process's CPU time, the best
of several batches). Variants: traces off; traces on at each ratio with the lab's middleware
(wirelab.traces.asgi), and with OpenTelemetry's FastAPI/ASGI instrumentation in its place, the
cheaper thing measured first (docs/traces.md). Spans go to an in-memory exporter: what is timed
is making them, not shipping them (`wirelab perf overhead --traces` measures the whole service).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from wirelab import settings as knobs
from wirelab.rest.app import create_app
from wirelab.serving import instruments
from wirelab.traces import Tracing, start

from wirelab_bench.knobs import parser
from wirelab_bench.perf import ORDER

BODY = json.dumps(ORDER).encode()


def app_for(variant: str, ratio: str) -> Any:
    """The REST app with traces off, ours or the library's (``variant``) at ``ratio``."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    env = {} if variant == "off" else {"WIRELAB_TRACES": "on", "WIRELAB_TRACE_SAMPLE_RATIO": ratio}
    config = knobs.load([], environ=env)
    tracing = start(config, "rest", exporter=InMemorySpanExporter())
    if variant != "library":
        return create_app(config, instruments(config, "rest", "async"), tracing)
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    app = create_app(config, instruments(config, "rest", "async"))
    assert isinstance(tracing, Tracing)
    FastAPIInstrumentor.instrument_app(
        app, tracer_provider=tracing.provider, exclude_spans=["receive", "send"]
    )
    return app


async def order(app: Any) -> None:
    """One small order through the app, as a server hands it over."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/orders", "raw_path": b"/v1/orders", "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000),
        "headers": [
            (b"host", b"rest"), (b"content-type", b"application/json"),
            (b"content-length", str(len(BODY)).encode()),
        ],
    }  # fmt: skip
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": BODY, "more_body": False}
        await asyncio.Event().wait()  # the client stays: no disconnect
        raise AssertionError

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise RuntimeError(f"the order was answered {message['status']}")

    await app(scope, receive, send)


async def cpu_per_order(app: Any, orders: int, batches: int) -> float:
    """Microseconds of this process's CPU per order, the best of ``batches`` batches."""
    best = float("inf")
    async with app.router.lifespan_context(app):
        for _ in range(orders // 4):  # warm-up
            await order(app)
        for _ in range(batches):
            started = time.process_time()
            for _ in range(orders):
                await order(app)
            best = min(best, (time.process_time() - started) / orders * 1e6)
    return best


def main(argv: list[str] | None = None) -> int:
    cli = parser("wirelab perf trace-cost", __doc__, "WIRELAB_TRACE_COST")
    args = cli.parse_args(argv)
    ratios = [r for r in args.ratios.split(",") if r]
    run: Callable[[Any], float] = lambda app: asyncio.run(  # noqa: E731
        cpu_per_order(app, args.orders, args.batches)
    )
    off = run(app_for("off", "0"))
    print(f"REST order through the app in process, CPU per order (best of {args.batches} x "
          f"{args.orders}):\n  traces off: {off:6.1f} us")  # fmt: skip
    for ratio in ratios:
        for variant, name in (("ours", "wirelab.traces.asgi"), ("library", "OpenTelemetry ASGI")):
            cost = run(app_for(variant, ratio))
            print(f"  ratio {ratio:>4}, {name:21}: {cost:6.1f} us (+{cost - off:5.1f}), "
                  f"off/on {off / cost:.3f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

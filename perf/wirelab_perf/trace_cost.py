"""What tracing costs a call in process: CPU per small order, REST and gRPC, off and on.

REST: the app of `python -m wirelab.rest` (metrics on) is called directly, as uvicorn calls it,
with the small order, so what is timed is the app's own CPU per order: no socket, no HTTP
parser, no load tool; and so with a WebSocket session of 10 pings. gRPC, twice: through the
handlers the aio server of `python -m wirelab.rpc` (metrics on) registers, called as grpc calls
them (the lookup, the behaviour in a task of its own with the raw message, the done callbacks),
with a stand-in servicer context: the Python around a call alone, what a loaded machine moves
least; and through that server itself, in this process on loopback, pinned to the services'
core, ghz on the other core sending it small
ProcessOrder calls as `wirelab perf overhead` does, this process's CPU per call (grpc's own
threads included): everything a call costs the server, and noisier (at load average 25 the same
code read 2 to 20 us apart from one run to the next). CPU time, the best of several batches,
the variants taking turns. Variants: traces off; traces on at
each ratio with the lab's hooks (wirelab.traces.asgi, .grpcio), and for REST with
OpenTelemetry's FastAPI/ASGI instrumentation in their place, the cheaper thing measured first
(docs/traces.md). Spans go to an exporter that keeps nothing: what is timed is making them, not
shipping them (`wirelab perf overhead --traces` measures the whole service). With --runtime node,
the Node services' figures instead (node/scripts/trace-cost.js says how).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from wirelab import settings as knobs
from wirelab.rest.app import create_app
from wirelab.rpc.kinds import METHOD_KINDS
from wirelab.rpc.server import build_aio
from wirelab.serving import instruments
from wirelab.traces import Tracing, grpc_kind, start
from wirelab_bench.knobs import REPO, listed, parser

from wirelab_perf import ORDER
from wirelab_perf.overhead import find_ghz
from wirelab_perf.svcprocs import CLIENT_CPU, SERVER_CPU, pin, pinned

BODY = json.dumps(ORDER).encode()
PROTOCOLS = ("rest", "grpc")


class Discard(SpanExporter):
    """Takes every batch and keeps nothing: the SDK's batching and its thread are timed, not
    an exporter's encoding or a store that grows with every kept span."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def config_for(variant: str, ratio: str) -> knobs.Settings:
    env = {} if variant == "off" else {"WIRELAB_TRACES": "on", "WIRELAB_TRACE_SAMPLE_RATIO": ratio}
    return knobs.load([], environ=env)


# REST ---------------------------------------------------------------------------------------


def app_for(variant: str, ratio: str) -> Any:
    """The REST app with traces off, ours or the library's (``variant``) at ``ratio``."""
    config = config_for(variant, ratio)
    tracing = start(config, "rest", exporter=Discard())
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


# A WebSocket session as Locust's bidi user holds one by default: 10 pings of 64 bytes.
PINGS = 10
PING = json.dumps({"seq": 0, "payload": base64.b64encode(bytes(64)).decode()})


async def session(app: Any) -> None:
    """One WebSocket session through the app, as a server hands it over: the handshake,
    PINGS ping frames each answered, then the client's close."""
    scope = {
        "type": "websocket", "asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "ws",
        "path": "/v1/pingpong", "raw_path": b"/v1/pingpong", "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000),
        "headers": [(b"host", b"rest")], "subprotocols": [],
    }  # fmt: skip
    inbox: collections.deque[dict[str, Any]] = collections.deque(
        [
            {"type": "websocket.connect"},
            *({"type": "websocket.receive", "text": PING} for _ in range(PINGS)),
            {"type": "websocket.disconnect", "code": 1000},
        ]
    )
    answered = 0

    async def receive() -> dict[str, Any]:
        return inbox.popleft()

    async def send(message: Any) -> None:
        nonlocal answered
        if message["type"] == "websocket.send":
            answered += 1
        elif message["type"] != "websocket.accept":
            raise RuntimeError(f"the session was answered {message}")

    await app(scope, receive, send)
    if answered != PINGS:
        raise RuntimeError(f"{answered} of {PINGS} pings answered")


async def rest_costs(
    apps: dict[tuple[str, str], Any],
    orders: int,
    batches: int,
    call: Callable[[Any], Coroutine[Any, Any, None]] = order,
) -> dict[tuple[str, str], float]:
    """Microseconds of this process's CPU per order (or per ``call``: a session) through each of
    ``apps`` (by variant and ratio), the best of ``batches`` batches, the apps taking turns.
    Each runs in a task of its own, as uvicorn runs each request: what one sets in its context
    (a kept span's trace id, for the exemplars) must not reach the next."""
    run = asyncio.get_running_loop().create_task
    async with AsyncExitStack() as stack:
        for app in apps.values():
            await stack.enter_async_context(app.router.lifespan_context(app))
            for _ in range(orders // 4):  # warm-up
                await run(call(app))
        best = dict.fromkeys(apps, float("inf"))
        names = list(apps)
        for batch in range(batches):
            for name in names[batch % len(names) :] + names[: batch % len(names)]:
                app = apps[name]
                started = time.process_time()
                for _ in range(orders):
                    await run(call(app))
                best[name] = min(best[name], (time.process_time() - started) / orders * 1e6)
    return best


# gRPC ---------------------------------------------------------------------------------------


class _Registered:
    """Stands in for grpc.aio.server() while build_aio registers its handlers: keeps the
    generic handlers grpc would consult as a call arrives."""

    def __init__(self) -> None:
        self.generic: list[Any] = []

    def add_generic_rpc_handlers(self, handlers: Sequence[Any]) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: Any) -> None:
        """With metrics on (as here) the contract's methods come through the generic ones."""

    def add_insecure_port(self, address: str) -> int:
        return 1


class _Arrival:
    """What grpc hands a generic handler as a call arrives (grpc.HandlerCallDetails)."""

    def __init__(self, method: str, metadata: tuple[tuple[str, str], ...]) -> None:
        self.method = method
        self.invocation_metadata = metadata


class _Context:
    """A servicer context with what the handlers read of a call that succeeds."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done: list[Callable[[Any], None]] = []

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return METADATA

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        self.done.append(callback)

    def code(self) -> None:
        return None

    def time_remaining(self) -> None:
        return None


PROCESS_ORDER = "/wirelab.v1.WireLab/ProcessOrder"
# What ghz sends with each call, as grpc hands it over (no traceparent: a new trace).
METADATA = (("user-agent", "grpc-go/1.76.0"),)


async def handlers_for(variant: str, ratio: str) -> tuple[list[Any], Tracing | None]:
    """The generic handlers build_aio registers for ``variant`` at ``ratio``, and its tracing."""
    from unittest import mock

    config = config_for(variant, ratio)
    tracing = start(config, "grpc", grpc_kind(METHOD_KINDS), exporter=Discard())
    registered = _Registered()
    with mock.patch("grpc.aio.server", lambda **_: registered):
        await build_aio(config, instruments(config, "grpc", "aio"), 0, None, tracing)
    return registered.generic, tracing


async def handled(generic: list[Any], raw: bytes) -> None:
    """One ProcessOrder call through ``generic`` as grpc.aio runs it."""
    arrival = _Arrival(PROCESS_ORDER, METADATA)
    handler = next(h for h in (g.service(arrival) for g in generic) if h is not None)
    context = _Context()

    async def rpc() -> None:
        handler.response_serializer(await handler.unary_unary(raw, context))

    await asyncio.get_running_loop().create_task(rpc())
    for callback in context.done:
        callback(context)


async def handler_costs(
    variants: dict[str, tuple[str, str]], calls: int, batches: int
) -> dict[str, float]:
    """Microseconds of CPU per ProcessOrder call through each variant's handlers (name ->
    (variant, ratio)), the best of ``batches`` batches of ``calls``, the variants taking turns."""
    from google.protobuf import json_format
    from wirelab.v1 import wirelab_pb2 as pb

    raw = json_format.ParseDict(ORDER, pb.OrderRequest()).SerializeToString()
    made = {name: await handlers_for(*v) for name, v in variants.items()}
    try:
        for generic, _ in made.values():  # warm-up
            for _ in range(calls // 4):
                await handled(generic, raw)
        best = dict.fromkeys(made, float("inf"))
        names = list(made)
        for batch in range(batches):
            for name in names[batch % len(names) :] + names[: batch % len(names)]:
                generic = made[name][0]
                started = time.process_time()
                for _ in range(calls):
                    await handled(generic, raw)
                best[name] = min(best[name], (time.process_time() - started) / calls * 1e6)
        return best
    finally:
        for _, tracing in made.values():
            if tracing is not None:
                tracing.shutdown()


async def ghz(ghz_path: str, port: int, calls: int) -> None:
    """``calls`` small orders sent by ghz on the load's core, 32 in flight over 4 connections
    (the overhead benchmark's load); fails unless every one was answered OK."""
    command = pinned([
        ghz_path, "--insecure", "--proto", str(REPO / "proto/wirelab/v1/wirelab.proto"),
        "--import-paths", str(REPO / "proto"), "--call", "wirelab.v1.WireLab.ProcessOrder",
        "-d", json.dumps(ORDER), "-c", "32", "--connections", "4", "-n", str(calls),
        "--format", "json", f"127.0.0.1:{port}",
    ], CLIENT_CPU)  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"ghz failed: {err.decode()[-2000:]}")
    codes = json.loads(out).get("statusCodeDistribution", {})
    if codes.get("OK", 0) != calls:
        raise RuntimeError(f"ghz saw calls that were not answered OK: {codes}")


async def grpc_costs(
    variants: dict[str, tuple[str, str]], calls: int, batches: int
) -> dict[str, float]:
    """Microseconds of this process's CPU per ProcessOrder call of each variant's aio server
    (name -> (variant, ratio)), the best of ``batches`` batches of ``calls``, the variants
    taking turns batch by batch; every server runs at once, the idle ones waiting."""
    ghz_path = find_ghz("")
    ports: dict[str, int] = {}
    servers: list[Any] = []
    tracings: list[Tracing] = []
    try:
        for name, (variant, ratio) in variants.items():
            config = config_for(variant, ratio)
            tracing = start(config, "grpc", grpc_kind(METHOD_KINDS), exporter=Discard())
            if tracing is not None:
                tracings.append(tracing)
            metrics = instruments(config, "grpc", "aio")
            server, _, ports[name] = await build_aio(config, metrics, 0, None, tracing)
            servers.append(server)
            await server.start()
        for port in ports.values():  # warm-up
            await ghz(ghz_path, port, calls // 4)
        best = dict.fromkeys(ports, float("inf"))
        names = list(ports)
        for batch in range(batches):
            for name in names[batch % len(names) :] + names[: batch % len(names)]:
                started = time.process_time()
                await ghz(ghz_path, ports[name], calls)
                best[name] = min(best[name], (time.process_time() - started) / calls * 1e6)
        return best
    finally:
        for server in servers:
            await server.stop(0)
        for tracing in tracings:
            tracing.shutdown()


def main(argv: list[str] | None = None) -> int:
    cli = parser("wirelab perf trace-cost", __doc__, "WIRELAB_TRACE_COST")
    args = cli.parse_args(argv)
    ratios = [r for r in args.ratios.split(",") if r]
    protocols = listed(cli, args.protocols, PROTOCOLS, "protocols")
    if args.runtime == "node":
        node = args.node or shutil.which("node")
        if not node:
            cli.error("node not found: install Node.js 20 (or pass --node)")
        script = str(REPO / "node/scripts/trace-cost.js")
        # --name=value: node's parseArgs takes a value starting with "-" only so.
        options = [f"--protocols={','.join(protocols)}", f"--ratios={args.ratios}"]
        options += [f"--orders={args.orders}", f"--batches={args.batches}"]
        options += [f"--warmup={args.warmup}"]
        return subprocess.run([node, script, *options]).returncode
    pin(SERVER_CPU)  # ghz, for gRPC, on the other core
    print(f"load average {os.getloadavg()[0]:.2f}; CPU per call, best of {args.batches} x "
          f"{args.orders}")  # fmt: skip
    if "rest" in protocols:
        names = {"ours": "wirelab.traces.asgi", "library": "OpenTelemetry ASGI"}
        apps = {("off", "0"): app_for("off", "0")}
        apps |= {(v, r): app_for(v, r) for r in ratios for v in names}
        sessions = max(1, args.orders // PINGS)  # about as many round trips as orders
        for title, call, count in (
            ("REST order through the app", order, args.orders),
            (f"REST WebSocket session ({PINGS} pings of 64 B) through the app", session, sessions),
        ):
            timed = asyncio.run(rest_costs(apps, count, args.batches, call))
            off = timed.pop(("off", "0"))
            print(f"{title}:\n  traces off: {off:6.1f} us", flush=True)
            for (variant, at), cost in timed.items():
                print(f"  ratio {at:>4}, {names[variant]:21}: {cost:6.1f} us "
                      f"(+{cost - off:5.1f}), off/on {off / cost:.3f}", flush=True)  # fmt: skip
    if "grpc" in protocols:
        variants = {"off": ("off", "0")} | {r: ("ours", r) for r in ratios}
        # The handlers' figure is only the Python around a call: no throughput ratio of it.
        for title, measure, calls, whole in (
            ("through the aio server's handlers", handler_costs, args.orders * 5, False),
            ("through the aio server on loopback (ghz)", grpc_costs, args.orders, True),
        ):
            costs = asyncio.run(measure(variants, calls, args.batches))
            off = costs.pop("off")
            print(f"gRPC ProcessOrder {title}:\n  traces off: {off:6.1f} us", flush=True)
            for ratio, cost in costs.items():
                share = f", off/on {off / cost:.3f}" if whole else ""
                print(f"  ratio {ratio:>4}, {'wirelab.traces.grpcio':21}: {cost:6.1f} us "
                      f"(+{cost - off:5.1f}){share}", flush=True)  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

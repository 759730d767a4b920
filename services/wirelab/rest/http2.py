"""The REST app on Granian, which speaks HTTP/2 (WIRELAB_REST_HTTP=2): h2c, h2 by ALPN, HTTP/1.1."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import uvloop
from fastapi import FastAPI
from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings, HTTP2Settings
from granian.log import LogLevels
from granian.server.embed import Server

from wirelab.settings import Settings

# Granian over Hypercorn, by small orders per second of one server core (h2load on the other
# core, 8 connections x 8 streams, POST /v1/orders with metrics on, 2026-11-23, 2-core VM):
# Granian 2.8.7 3,650 h2c / 3,350 HTTP/1.1; Hypercorn 0.18.0 1,410 h2c; uvicorn (HTTP/1.1 only)
# 4,580. Hypercorn's pure-Python h2 would make the HTTP/2 arm mostly a measure of Hypercorn.

# What uvicorn's bounded protocol (rest/protocol.py) enforces, as Granian's settings. Granian
# has no body-idle timeout: docs/http2.md lists what differs.
_BACKLOG = 2048  # as rest/__main__.listen


def _http1(settings: Settings) -> HTTP1Settings:
    # Granian reads request headers into one buffer of this size and answers 431 past it (tested);
    # its header timeout is in milliseconds, and "off" (0 here) is taken as a day.
    timeout_ms = int(settings.rest_header_timeout_seconds * 1000) or 86_400_000
    limit = settings.rest_max_header_bytes or HTTP1Settings.max_buffer_size
    # 8 KiB is hyper's documented minimum read buffer (it panics below it): smaller header
    # limits are held at 8 KiB on HTTP/1.1.
    return HTTP1Settings(header_read_timeout=timeout_ms, max_buffer_size=max(8192, limit))


def _http2(settings: Settings) -> HTTP2Settings:
    limit = settings.rest_max_header_bytes or HTTP2Settings.max_headers_size
    return HTTP2Settings(max_headers_size=limit)


def server(app: FastAPI, settings: Settings) -> Server:
    """Granian, embedded in this process's event loop (the metrics thread, the /metrics registry
    and the app stay in one process, as on uvicorn), one worker, access log off."""
    cert, key = settings.rest_tls_cert, settings.rest_tls_key
    return Server(
        app,
        address=settings.host,
        port=settings.rest_port,
        interface=Interfaces.ASGI,  # with lifespan, as uvicorn's lifespan="on"
        http=HTTPModes.auto,  # HTTP/1.1 too: healthchecks, and the same port for both arms
        websockets=True,  # /v1/pingpong, over HTTP/1.1 only (no RFC 8441 in Granian)
        backlog=_BACKLOG,
        http1_settings=_http1(settings),
        http2_settings=_http2(settings),
        # Errors only: the embedded mode announces itself as experimental on every start.
        log_level=LogLevels.error,
        ssl_cert=Path(cert) if cert else None,
        ssl_key=Path(key) if key else None,
    )


def run(app: FastAPI, settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then drain calls in flight for the grace period."""
    granian = server(app, settings)

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, granian.stop)
        try:
            await granian.serve()
        except TimeoutError:
            # Granian waits for every connection to close, idle keep-alive ones included (an
            # h2 client that got GOAWAY and a socket that never sent a byte held it), and
            # raises once the grace period is over. uvicorn closes idle connections at once
            # and cuts the rest off at the end of the grace period: the same exit here.
            print(f"grace period over with connections open ({grace} s): closed", flush=True)

    grace = max(1, int(settings.grace_seconds))
    granian.workers_kill_timeout = grace
    uvloop.run(serve())

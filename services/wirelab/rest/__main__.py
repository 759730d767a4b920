"""`python -m wirelab.rest`: the REST service on uvicorn (uvloop + httptools), or on Granian."""

from __future__ import annotations

import signal
import socket
from collections.abc import Sequence

import uvicorn

from wirelab import serving, settings
from wirelab.rest import http2
from wirelab.rest.app import create_app
from wirelab.rest.protocol import Bounds, bounded
from wirelab.traces import start as start_tracing

PROG = "python -m wirelab.rest"
# uvicorn's default WebSocket frame cap is 16 MiB; a ping is JSON with base64 (4/3 of the bytes).
_WS_MIN_MAX_SIZE = 16 * 1024 * 1024


def listen(host: str, port: int) -> socket.socket:
    """Bind the API port ourselves so a taken port is one clear line and a non-zero exit."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        serving.fail_to_listen(PROG, "REST", host, port, exc)


def concurrency(config: settings.Settings) -> str:
    """wirelab_server_info's ``concurrency``, which names the server: the handler mode, and
    ``-h2`` on the HTTP/2 server (a label of its own would change the metric contract for every
    runtime)."""
    return config.rest_handlers + ("-h2" if config.rest_http == "2" else "")


def main(argv: Sequence[str] | None = None) -> None:
    config = settings.load(argv, prog=PROG, description="wirelab REST service (FastAPI)")
    if config.rest_http == "1.1" and (config.rest_tls_cert or config.rest_tls_key):
        serving.bad_configuration(
            PROG, ValueError("TLS (WIRELAB_REST_TLS_*) needs WIRELAB_REST_HTTP=2")
        )
    if bool(config.rest_tls_cert) != bool(config.rest_tls_key):
        serving.bad_configuration(PROG, ValueError("TLS needs both WIRELAB_REST_TLS_CERT and _KEY"))
    sock = listen(config.host, config.rest_port)
    metrics = serving.instruments(config, "rest", concurrency(config))
    serving.serve_metrics(config, PROG, metrics)
    ws_max = max(_WS_MIN_MAX_SIZE, config.limits.max_message_bytes * 4 // 3 + 4096)
    bounds = Bounds(
        max_header_bytes=config.rest_max_header_bytes,
        header_timeout=config.rest_header_timeout_seconds,
        body_timeout=config.rest_body_timeout_seconds,
    )
    tracing = start_tracing(config, "rest")
    try:
        app = create_app(config, metrics, tracing)
    except ValueError as exc:  # knobs that contradict each other, e.g. a gRPC downstream
        serving.bad_configuration(PROG, exc)
    if config.rest_http == "2":
        # Granian binds the port itself: ours only proved it free, for the one clear line.
        sock.close()
        print(
            f"{PROG}: listening on {config.host}:{config.rest_port} (HTTP/2, Granian)", flush=True
        )
        serving.settle()
        http2.run(app, config)
        if tracing is not None:
            tracing.shutdown()
        return
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            loop="uvloop",
            http=bounded(bounds, metrics),  # httptools, bounded (rest/protocol.py)
            ws="websockets-sansio",
            lifespan="on",
            access_log=False,
            ws_max_size=ws_max,
            timeout_graceful_shutdown=int(config.grace_seconds),
        )
    )
    print(f"{PROG}: listening on {config.host}:{config.rest_port}", flush=True)
    # uvicorn handles SIGTERM: stop accepting, drain in-flight calls for the grace period, then
    # re-raise the signal under the handler that was installed before it. A no-op handler there
    # makes a drained shutdown exit 0, like the gRPC service, instead of dying by SIGTERM.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.config.load()  # the app and uvicorn's protocols, before the heap is frozen
    serving.settle()
    server.run(sockets=[sock])
    if tracing is not None:
        tracing.shutdown()


if __name__ == "__main__":
    main()

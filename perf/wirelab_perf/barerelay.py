"""A bare relay: the transport's own cost of one hop, without wirelab's.

``python -m wirelab_perf.barerelay rest|grpc PORT DOWNSTREAM`` forwards each order as it
came, bytes in and bytes out, to DOWNSTREAM (http://host:port or grpc://host:port) on one client
opened once: REST a raw ASGI app on uvicorn (uvloop + httptools, as wirelab's REST service) with
one httpx.AsyncClient pooled as wirelab's hop pools it; gRPC a grpc.aio server with one channel,
the method handled as raw bytes. No parsing, no validation, no metrics: what is left is what
any relay of the same shape pays. The hop benchmark (wirelab_perf.hop) compares it with
wirelab's relay.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Sequence

import grpc
import grpc.aio
import httpx
import uvicorn
from starlette.types import Receive, Scope, Send

ORDERS_PATH = "/v1/orders"
SERVICE, METHOD = "wirelab.v1.WireLab", "ProcessOrder"
_JSON = {"content-type": "application/json"}


class Forward:
    """ASGI app: POST /v1/orders sent on with its body as it came, the answer returned as it
    came; anything else 404."""

    def __init__(self, downstream: str) -> None:
        self.url = downstream.rstrip("/") + ORDERS_PATH
        self.client: httpx.AsyncClient | None = None  # opened in the server's event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["path"] != ORDERS_PATH or scope["method"] != "POST" or self.client is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        reply = await self.client.post(self.url, content=body, headers=_JSON)
        headers = [(b"content-type", reply.headers.get("content-type", "").encode())]
        await send({"type": "http.response.start", "status": reply.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": reply.content})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # As wirelab's REST hop pools its connections (wirelab/hops/via_rest.py).
                limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
                self.client = httpx.AsyncClient(limits=limits)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.client is not None:
                    await self.client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def serve_rest(port: int, downstream: str) -> None:
    config = uvicorn.Config(
        Forward(downstream),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
    )
    # uvicorn drains on SIGTERM, then re-raises it under the handler installed before: a no-op
    # one makes a drained shutdown exit 0, as wirelab's REST service does.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    uvicorn.Server(config).run()


async def serve_grpc(port: int, downstream: str) -> None:
    channel = grpc.aio.insecure_channel(downstream.removeprefix("grpc://"))
    # No serializers on either side: the request and the reply pass through as bytes.
    call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(
        f"/{SERVICE}/{METHOD}", None, None
    )

    async def forward(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        # The caller's deadline travels on, as wirelab's hop sends it.
        reply: bytes = await call(request, timeout=context.time_remaining())
        return reply

    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(forward)
    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {METHOD: handler}),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(grace=5)
    await channel.close(grace=None)


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m wirelab_perf.barerelay", description=__doc__)
    p.add_argument("protocol", choices=("rest", "grpc"))
    p.add_argument("port", type=int, help="loopback port to listen on")
    p.add_argument("downstream", help="http://host:port (rest) or grpc://host:port (grpc)")
    args = p.parse_args(argv)
    if args.protocol == "rest":
        serve_rest(args.port, args.downstream)
    else:
        asyncio.run(serve_grpc(args.port, args.downstream))


if __name__ == "__main__":
    main()

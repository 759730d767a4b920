"""`python -m wirelab.rpc`: the gRPC service."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from wirelab import settings
from wirelab.rpc.server import PROG, serve_aio, serve_sync


def main(argv: Sequence[str] | None = None) -> None:
    config = settings.load(argv, prog=PROG, description="wirelab gRPC service (wirelab.v1.WireLab)")
    if config.grpc_server == "sync":
        serve_sync(config)
    else:
        asyncio.run(serve_aio(config))


if __name__ == "__main__":
    main()

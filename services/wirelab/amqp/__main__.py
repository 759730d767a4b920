"""`python -m wirelab.amqp`: an order queue's consumer (the AMQP arm's hop)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from wirelab import settings
from wirelab.amqp.service import PROG, serve


def main(argv: Sequence[str] | None = None) -> None:
    config = settings.load(argv, prog=PROG, description="wirelab AMQP order consumer")
    asyncio.run(serve(config))


if __name__ == "__main__":
    main()

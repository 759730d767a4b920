"""Container healthcheck: exit 0 when GET /healthz answers 200."""

from __future__ import annotations

import sys

from wirelab import serving, settings


def main() -> int:
    config = settings.load([], prog="python -m wirelab.rest.healthcheck")
    return serving.probe(f"http://{serving.local_host(config.host)}:{config.rest_port}/healthz")


if __name__ == "__main__":
    sys.exit(main())

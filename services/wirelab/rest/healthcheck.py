"""Container healthcheck: exit 0 when GET /healthz answers 200."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from wirelab import serving, settings


def main() -> int:
    config = settings.load([], prog="python -m wirelab.rest.healthcheck")
    url = f"http://{serving.local_host(config.host)}:{config.rest_port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            status = int(response.status)
    except (urllib.error.URLError, OSError) as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
        return 1
    print(f"{url}: {status}")
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())

"""One HTTP client for the runner's own calls (scrapes, Prometheus queries, health checks).

A new httpx client loads the CA bundle: 58 ms of CPU each on this 2-core machine, paid on the
machine under test. A tiny run made 115 of them (6.6 s of its 49 s, cProfile), and each cell's
Prometheus export one per query. The endpoints are plain HTTP on loopback or in the lab; one
shared client (httpx's pool is thread-safe) loads the bundle once and keeps connections.
"""

from __future__ import annotations

from functools import cache

import httpx


@cache
def client() -> httpx.Client:
    return httpx.Client()

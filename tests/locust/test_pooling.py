"""The REST user's pool closes a connection idle past the lab's clients' limit, before the
services would close it (wirelab.contract.CLIENT_IDLE_SECONDS), and reuses a fresher one."""

from __future__ import annotations

import time

import uvicorn
from geventhttpclient import HTTPClient
from geventhttpclient.url import URL
from wirelab.contract import CLIENT_IDLE_SECONDS
from wirelab_locust.pooling import expire_idle

from tests.services.served import in_thread
from tests.services.test_hops import _client_port


def _ports(url: str, idle: float | None, pauses: tuple[float, ...]) -> list[bytes]:
    """The client port the server saw for an order after each pause, through one user's pool
    (``idle`` None: geventhttpclient's pool as it comes)."""
    client = HTTPClient.from_url(URL(url), concurrency=1, network_timeout=5)
    if idle is not None:
        expire_idle(client._connection_pool, idle)
    seen = []
    try:
        for pause in pauses:
            time.sleep(pause)
            response = client.request("POST", "/", body=b"{}")
            assert response.status_code == 200
            seen.append(response.read())
    finally:
        client.close()
    return seen


def test_a_connection_idle_past_the_limit_is_not_reused() -> None:
    assert uvicorn.Config(_client_port).timeout_keep_alive > CLIENT_IDLE_SECONDS
    with in_thread(_client_port) as url:
        first, kept, after_idle = _ports(url, 0.5, (0, 0.1, 0.8))
        # As geventhttpclient comes, the same idle connection is used again: the server,
        # closing at 5 s, has not closed it yet.
        plain = _ports(url, None, (0, 0.8))
    assert first == kept != after_idle
    assert plain[0] == plain[1]

"""What one large call costs the REST process in memory, per path: the figures docs/services.md
quotes (``python -m pytest tests/services/test_rest_memory.py -s`` prints them) and the bounds the
payload budget's accounting relies on."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from wirelab import core

from tests.services.test_integration import start
from tests.services.test_rest_runtime import _peak_rss

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
SIZE = 64 * MIB
JSON_BODY = (SIZE + 2) // 3 * 4 + len('{"data": ""}')
Call = Callable[[httpx.Client, str], httpx.Response]


def _upload(client: httpx.Client, base: str) -> httpx.Response:
    return client.post(f"{base}/v1/blobs", content=core.payload(SIZE))


def _upload_json(client: httpx.Client, base: str) -> httpx.Response:
    body = json.dumps({"data": base64.b64encode(core.payload(SIZE)).decode()})
    return client.post(f"{base}/v1/blobs/json", content=body)


def _upload_chunked(client: httpx.Client, base: str) -> httpx.Response:
    pieces = (core.payload_slice(i, MIB) for i in range(0, SIZE, MIB))
    return client.post(f"{base}/v1/blobs/stream", content=pieces)


def _get(path: str) -> Call:
    return lambda client, base: client.get(f"{base}{path}", params={"size": SIZE})


# Path, call, and the most its peak may add over the idle process, in MiB: what the budget holds
# for it (bodies.py, routes.py) and what the docs quote, with room for allocator slack.
PATHS: list[tuple[str, Call, float]] = [
    ("upload", _upload, 1.1 * SIZE / MIB),
    ("upload_json", _upload_json, 4 * JSON_BODY / MIB),
    ("upload_chunked", _upload_chunked, 8),
    ("download", _get("/v1/blobs"), 1.1 * SIZE / MIB),
    ("download_json", _get("/v1/blobs/json"), 1.1 * (SIZE + JSON_BODY) / MIB),
    ("download_chunked", _get("/v1/blobs/stream"), 8),
]


@pytest.mark.parametrize(("kind", "call", "bound"), PATHS, ids=[p[0] for p in PATHS])
def test_peak_memory_of_one_64_mib_call(
    kind: str, call: Call, bound: float, tmp_path_factory: pytest.TempPathFactory
) -> None:
    service = start("wirelab.rest", tmp_path_factory.mktemp(f"memory-{kind}"))
    try:
        base = f"http://127.0.0.1:{service.port}"
        with httpx.Client(timeout=120) as client:
            # First calls of each route import and build what they need once.
            client.get(f"{base}/v1/blobs/json", params={"size": 1024})
            client.post(f"{base}/v1/blobs/json", json={"data": ""})
            idle = _peak_rss(service)
            assert call(client, base).status_code == 200
        grew = (_peak_rss(service) - idle) / MIB
        print(f"{kind}: one 64 MiB call, peak RSS +{grew:.0f} MiB over idle ({idle / MIB:.0f} MiB)")
        assert grew <= bound
    finally:
        assert service.stop() == 0


def test_the_figures_are_documented() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "services.md").read_text()
    assert "tests/services/test_rest_memory.py" in docs

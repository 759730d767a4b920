"""The REST process under heavy and faulty clients: memory bounded, refusals and cancels counted."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from wirelab import core

from tests.services.test_integration import Service, start

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
BLOB = 64 * MIB
BUDGET = 2 * BLOB


def _peak_rss(service: Service) -> int:
    """The process's high-water resident set (VmHWM), in bytes."""
    status = Path(f"/proc/{service.proc.pid}/status").read_text()
    line = next(ln for ln in status.splitlines() if ln.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def _requests(service: Service, kind: str, outcome: str, code: str) -> float:
    labels = f'code="{code}",kind="{kind}",outcome="{outcome}",protocol="rest"'
    return service.metric(f"wirelab_server_requests_total{{{labels}}}")


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    env = {"WIRELAB_PAYLOAD_BUDGET_BYTES": str(BUDGET), "WIRELAB_MAX_PAYLOAD_BYTES": str(BLOB)}
    service = start("wirelab.rest", tmp_path_factory.mktemp("rest-runtime"), env)
    yield service
    assert service.stop() == 0


def _slow_body(release: threading.Event) -> Iterator[bytes]:
    # The headers (with the length) go first; the body waits until every call has been
    # answered or admitted, so the admitted ones are all in flight at once.
    piece = core.payload(MIB)
    release.wait(10)
    for _ in range(BLOB // MIB):
        yield piece


def test_concurrent_uploads_past_the_budget_are_refused_and_memory_stays_bounded(
    rest: Service,
) -> None:
    url = f"http://127.0.0.1:{rest.port}/v1/blobs"
    before = _peak_rss(rest)
    release = threading.Event()
    calls = 6

    def upload() -> int:
        headers = {"content-length": str(BLOB), "content-type": "application/octet-stream"}
        with httpx.Client(timeout=60) as client:
            return client.post(url, content=_slow_body(release), headers=headers).status_code

    with ThreadPoolExecutor(calls) as pool:
        futures = [pool.submit(upload) for _ in range(calls)]
        time.sleep(1.0)  # every call has sent its headers and been admitted or refused
        release.set()
        statuses = sorted(f.result() for f in futures)
    assert statuses == [200] * (BUDGET // BLOB) + [503] * (calls - BUDGET // BLOB)
    assert rest.wait_for(_requests_line("upload", "client_error", "503"), 4) == 4
    assert rest.metric('wirelab_server_payload_budget_bytes{protocol="rest"}') == BUDGET
    assert rest.metric('wirelab_server_payload_in_flight_bytes{protocol="rest"}') == 0
    # Two 64 MiB bodies held at once; without the budget the six took it past 500 MB.
    grew = _peak_rss(rest) - before
    assert grew < BUDGET + 64 * MIB, f"peak RSS grew by {grew / MIB:.0f} MiB"


def _requests_line(kind: str, outcome: str, code: str) -> str:
    labels = f'code="{code}",kind="{kind}",outcome="{outcome}",protocol="rest"'
    return f"wirelab_server_requests_total{{{labels}}}"

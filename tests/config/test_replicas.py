"""toxiproxy/replicas.py, the cluster's per-replica proxies under netem (topologies/netem/
cluster.yaml): each replica's address gets a proxy on consecutive ports, a service that is not
there is skipped only when optional, and a wrong replica count stops the lab's start."""

from __future__ import annotations

import json
import runpy
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.config.queries import REPO

REPLICAS = runpy.run_path(str(REPO / "toxiproxy" / "replicas.py"))


@pytest.fixture
def toxiproxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Toxiproxy's API on loopback: the bodies POSTed to /populate."""
    posted: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            posted.append((self.path, json.loads(body)))
            self.send_response(201)
            self.end_headers()
            self.wfile.write(b'{"proxies": []}')

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("TOXIPROXY_URL", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield posted
    finally:
        server.shutdown()


def test_a_proxy_per_replica_on_consecutive_ports() -> None:
    made = REPLICAS["proxies"]("grpc-b", 50051, 50201, ["172.18.0.5", "172.18.0.7", "172.18.0.9"])
    assert [(p["name"], p["listen"], p["upstream"]) for p in made] == [
        ("grpc-b-1", "0.0.0.0:50201", "172.18.0.5:50051"),
        ("grpc-b-2", "0.0.0.0:50202", "172.18.0.7:50051"),
        ("grpc-b-3", "0.0.0.0:50203", "172.18.0.9:50051"),
    ]
    assert all(p["enabled"] for p in made)
    # The next service's block starts 10 ports up: an eleventh replica would take its first.
    with pytest.raises(SystemExit, match="11 replicas, at most 10"):
        REPLICAS["proxies"]("grpc-b", 50051, 50201, [f"10.0.0.{n}" for n in range(11)])


def test_the_job_populates_toxiproxy_and_skips_an_optional_service_that_is_not_there(
    toxiproxy: list[Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WIRELAB_REPLICAS", "1")
    argv = ["localhost:50051:50201", "--optional", "absent.invalid:50051:50211"]
    assert REPLICAS["main"](argv) == 0
    wanted = [{"name": "localhost-1", "listen": "0.0.0.0:50201",
               "upstream": "127.0.0.1:50051", "enabled": True}]  # fmt: skip
    assert toxiproxy == [("/populate", wanted)]
    said = capsys.readouterr()
    assert "absent.invalid does not resolve: skipped" in said.err
    assert "localhost-1 0.0.0.0:50201 -> 127.0.0.1:50051" in said.out


def test_a_missing_service_or_a_wrong_replica_count_stops_the_job(
    toxiproxy: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit, match=r"absent\.invalid does not resolve"):
        REPLICAS["main"](["absent.invalid:50051:50201"])
    with pytest.raises(SystemExit, match="localhost has 1 addresses, not 3"):
        REPLICAS["replicas"]("localhost", 3, wait=0)
    assert toxiproxy == []

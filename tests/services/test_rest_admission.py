"""REST admission control: one-message bodies past the payload budget get 503 + Retry-After."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from wirelab import core
from wirelab.metrics import ServerMetrics
from wirelab.rest.app import create_app

from tests.services.conftest import SMALL, requests, settings, value

BUDGET = 48 * 1024  # under SMALL's 64 KiB payload limit, so a legal call can pass the budget


@pytest.fixture(params=["async", "sync"])
def budgeted(request: pytest.FixtureRequest, registry: CollectorRegistry) -> Iterator[TestClient]:
    limits = dataclasses.replace(SMALL, payload_budget_bytes=BUDGET)
    config = settings(rest_handlers=request.param, limits=limits)
    app = create_app(config, ServerMetrics("rest", registry, request.param))
    with TestClient(app) as client:
        yield client


def _in_flight(registry: CollectorRegistry) -> float:
    return value(registry, "wirelab_server_payload_in_flight_bytes", protocol="rest")


def _refused(response: object, registry: CollectorRegistry, kind: str) -> None:
    assert getattr(response, "status_code", None) == 503
    assert response.headers["retry-after"] == "1"  # type: ignore[attr-defined]
    assert "payload budget exhausted" in response.json()["detail"]  # type: ignore[attr-defined]
    assert requests(registry, "rest", kind, "client_error", "503") == 1


def test_budget_is_reported(budgeted: TestClient, registry: CollectorRegistry) -> None:
    assert value(registry, "wirelab_server_payload_budget_bytes", protocol="rest") == BUDGET
    assert _in_flight(registry) == 0


def test_upload_over_the_budget_is_refused_before_its_body_is_read(
    budgeted: TestClient, registry: CollectorRegistry
) -> None:
    body = core.payload(BUDGET + 1)
    _refused(budgeted.post("/v1/blobs", content=body), registry, "upload")
    assert _in_flight(registry) == 0
    # Within the budget the same route works, and gives back what it held.
    ok = budgeted.post("/v1/blobs", content=core.payload(BUDGET))
    assert ok.status_code == 200
    assert ok.json()["size"] == BUDGET
    assert _in_flight(registry) == 0


def test_upload_without_a_length_is_refused_as_it_grows(
    budgeted: TestClient, registry: CollectorRegistry
) -> None:
    pieces = iter([core.payload(16 * 1024)] * 4)  # 64 KiB in all, sent chunked
    _refused(budgeted.post("/v1/blobs", content=pieces), registry, "upload")
    assert _in_flight(registry) == 0


def test_json_upload_holds_its_body(budgeted: TestClient, registry: CollectorRegistry) -> None:
    text = "x" * (BUDGET + 1)  # any body over the budget: refused before it is parsed
    _refused(budgeted.post("/v1/blobs/json", content=text), registry, "upload_json")


@pytest.mark.parametrize(
    ("path", "size", "kind"),
    [("/v1/blobs", BUDGET + 1, "download"), ("/v1/blobs/json", BUDGET, "download_json")],
)
def test_download_over_the_budget_is_refused(
    budgeted: TestClient, registry: CollectorRegistry, path: str, size: int, kind: str
) -> None:
    _refused(budgeted.get(path, params={"size": size}), registry, kind)
    assert _in_flight(registry) == 0


def test_downloads_within_the_budget_give_it_back(
    budgeted: TestClient, registry: CollectorRegistry
) -> None:
    for _ in range(3):
        got = budgeted.get("/v1/blobs", params={"size": BUDGET})
        assert got.status_code == 200
        assert got.content == core.payload(BUDGET)
        got = budgeted.get("/v1/blobs/json", params={"size": BUDGET // 4})
        assert got.json()["size"] == BUDGET // 4
    assert _in_flight(registry) == 0


def test_chunked_paths_are_not_budgeted(budgeted: TestClient) -> None:
    # They hold one chunk at a time, whatever the total (docs/services.md).
    pieces = iter([core.payload(8 * 1024)] * 8)
    assert budgeted.post("/v1/blobs/stream", content=pieces).json()["size"] == 64 * 1024
    got = budgeted.get("/v1/blobs/stream", params={"size": 64 * 1024, "chunk_size": 4096})
    assert len(got.content) == 64 * 1024

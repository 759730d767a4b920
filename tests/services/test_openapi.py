"""The REST service does what its OpenAPI document says: schemathesis, in-process, every check."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from schemathesis.config import SchemathesisConfig
from schemathesis.config._checks import NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES
from wirelab.core import Limits
from wirelab.metrics import ServerMetrics
from wirelab.rest.app import create_app
from wirelab.rest.openapi import BUDGETED, STATUSES, _base64_of_at_most

from tests.services.conftest import settings

# Small limits: the document states them as maxima, and schemathesis sends the maxima too.
LIMITS = Limits(
    max_payload_bytes=64 * 1024,
    chunk_bytes=4096,
    max_stream_count=20,
    max_message_bytes=4096,
    max_interval_ms=5,
    max_work_ms=20,
)
APP = create_app(settings(limits=LIMITS), ServerMetrics("rest", CollectorRegistry(), "async"))
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            # A value over its maximum is refused with 413, as gRPC's RESOURCE_EXHAUSTED.
            "negative_data_rejection": {
                "expected-statuses": [*NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, "413"]
            },
            # Off by default: with these limits no call needs more than a small part of a second.
            "max_response_time": 2.0,
        },
        # Bounded: the coverage phase (each value at, under and over its bounds, wrong types,
        # other methods: about 300 calls) plus 40 fuzzed examples per operation, from a fixed
        # seed; about 20 s on this project's 2-core machine.
        "generation": {"max-examples": 40},
        "seed": 15,
    }
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, config=CONFIG)
INT64 = range(-(2**63), 2**63)


@schema.hook("filter_body")
def total_fits_int64(ctx: Any, body: Any) -> bool:
    """Leave out orders whose items' total overflows int64. The document states each item's
    range; that their sum must fit too is a rule across items that no JSON Schema can state, so
    such an order, refused with 400 (test below), would fail the positive-data check for the
    document's silence, not the service's."""
    order = body.get("order") if isinstance(body, dict) else None
    items = order.get("items") if isinstance(order, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        return True
    total = 0
    for item in items:
        quantity, price = item.get("quantity", 0), item.get("unit_price_cents", 0)
        if not all(isinstance(v, int | float) for v in (quantity, price)):
            return True
        total += int(quantity) * int(price)
    return total in INT64


def test_an_order_whose_total_overflows_int64_is_refused_with_400() -> None:
    item = {"sku": "a", "quantity": 2, "unit_price_cents": 2**62}
    with TestClient(APP) as client:
        reply = client.post("/v1/orders", json={"order": {"items": [item]}})
    assert (reply.status_code, reply.json()) == (400, {"detail": "total_cents overflows int64"})


@schema.parametrize()
def test_api_does_what_its_document_says(case: schemathesis.Case[Any]) -> None:
    case.call_and_validate()


def _document(app: FastAPI) -> dict[str, Any]:
    with TestClient(app) as client:
        doc: dict[str, Any] = client.get("/openapi.json").json()
    return doc


def test_document_states_limits_errors_and_statuses() -> None:
    doc = _document(APP)
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for (method, path), codes in STATUSES.items():
        responses = doc["paths"][path][method]["responses"]
        overload = {"503"} if (method, path) in BUDGETED else set()
        assert set(responses) == {"200", *map(str, codes), *overload}
        for code in set(responses) - {"200"}:
            problem = responses[code]["content"]["application/json"]["schema"]
            assert problem == {"$ref": "#/components/schemas/Problem"}
    assert doc["paths"]["/v1/blobs"]["get"]["responses"]["503"]["headers"]["Retry-After"]
    count = doc["paths"]["/v1/stream"]["get"]["parameters"][0]
    assert count["name"] == "count"
    assert (count["schema"]["minimum"], count["schema"]["maximum"]) == (0, 20)
    work_ms = doc["components"]["schemas"]["OrderRequest"]["properties"]["work_ms"]
    assert work_ms["maximum"] == LIMITS.max_work_ms
    # The schemathesis run covers the async handlers; the sync ones take the same document.
    assert _document(create_app(settings(limits=LIMITS, rest_handlers="sync"))) == doc


@pytest.mark.parametrize(("budget", "cap", "with_503"), [(0, 0, 0), (1, 0, 4), (0, 8, 8)])
def test_503_is_declared_where_it_can_be_answered(budget: int, cap: int, with_503: int) -> None:
    limits = dataclasses.replace(LIMITS, payload_budget_bytes=budget)
    doc = _document(create_app(settings(limits=limits, rest_max_concurrent_calls=cap)))
    operations = [op for path in doc["paths"].values() for op in path.values()]
    assert sum("503" in op["responses"] for op in operations) == with_503


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 4, 5, 65534, 65535, 65536])
def test_base64_schema_holds_exactly_what_decodes_within_the_limit(limit: int) -> None:
    # A length alone cannot say it: 4 characters unpadded hold 3 bytes, padded 1 or 2.
    valid = jsonschema_rs.validator_for(_base64_of_at_most(limit)).is_valid
    for size in range(max(0, limit - 4), limit + 5):
        assert valid(base64.b64encode(b"x" * size).decode()) == (size <= limit)
        for padding in ("", "=", "=="):
            text = "A" * (4 * (size // 3 + 1) - len(padding)) + padding
            if valid(text):
                assert len(base64.b64decode(text)) <= limit

"""The REST service's OpenAPI document, completed with what FastAPI cannot see from the routes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from wirelab.core import Limits
from wirelab.core.limits import INT64_MAX, INT64_MIN, UINT32_MAX
from wirelab.rest.models import Problem
from wirelab.rest.protobuf import PROTOBUF
from wirelab.rest.routes import NDJSON, OCTETS

_PROBLEM = {"application/json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
_ERRORS: dict[int, dict[str, Any]] = {
    400: {
        "description": "Malformed input: a negative value, a quantity outside uint32, a total "
        "outside int64, bad base64"
    },
    406: {"description": "A protobuf order whose Accept header excludes application/x-protobuf"},
    413: {"description": "A value over its maximum in this document, or a body over its limit"},
    422: {
        "description": "A body or parameter that does not parse: not JSON, a wrong type, a "
        "string that is not Unicode text (a lone surrogate)"
    },
    503: {
        "description": "Overloaded: the payload budget is exhausted (one-message blob routes) or "
        "the cap on concurrent calls reached; nothing was done, retry after Retry-After seconds",
        "headers": {
            "Retry-After": {"required": True, "schema": {"type": "integer", "minimum": 0}},
        },
    },
}
# Every status each operation answers besides 200 and 503; the schemathesis test holds the
# service to it.
STATUSES: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/v1/orders"): (400, 406, 413, 422),  # 406: protobuf orders only (no relay)
    ("get", "/v1/stream"): (400, 413, 422),
    ("post", "/v1/blobs"): (413,),
    ("post", "/v1/blobs/json"): (400, 413, 422),
    ("post", "/v1/blobs/stream"): (413,),
    ("get", "/v1/blobs"): (400, 413, 422),
    ("get", "/v1/blobs/json"): (400, 413, 422),
    ("get", "/v1/blobs/stream"): (400, 413, 422),
}
# The operations that hold their body in the payload budget (rest/bodies.py): 503 past it.
BUDGETED = frozenset(
    {
        ("post", "/v1/blobs"),
        ("post", "/v1/blobs/json"),
        ("get", "/v1/blobs"),
        ("get", "/v1/blobs/json"),
    }
)
_BLOB_HEADERS = {
    "x-wirelab-size": {"required": True, "schema": {"type": "integer", "minimum": 0}},
    "x-wirelab-sha256": {
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
    },
}
_BINARY = {OCTETS: {"schema": {"type": "string", "format": "binary"}}}
# 200 replies that are not JSON: FastAPI sees only a Response class without a media type.
_REPLIES: dict[tuple[str, str], dict[str, Any]] = {
    ("get", "/v1/stream"): {
        "description": 'NDJSON: `count` lines {"seq": n, "payload": "<base64>"}',
        "content": {NDJSON: {"schema": {"type": "string"}}},
    },
    ("get", "/v1/blobs"): {
        "description": "The blob of `size` bytes",
        "content": _BINARY,
        "headers": _BLOB_HEADERS,
    },
    ("get", "/v1/blobs/stream"): {
        "description": "The blob of `size` bytes, sent in chunks of `chunk_size`",
        "content": _BINARY,
        "headers": _BLOB_HEADERS,
    },
}
# Standard base64 as the core decodes it (binascii with validate=True), and the same ending in
# a padded group of one byte (==) or of one or two bytes (=).
_GROUPS = "^(?:[A-Za-z0-9+/]{4})*"
_BASE64 = _GROUPS + "(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_PADDED = {
    1: _GROUPS + "[A-Za-z0-9+/]{2}==$",
    2: _GROUPS + "(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$",
}


def _base64_of_at_most(nbytes: int) -> dict[str, Any]:
    """The base64 strings that decode to at most ``nbytes``: every 4 characters hold 3 bytes,
    so past the last whole group only a padded group holding the remaining 1 or 2 bytes fits."""
    groups, rest = divmod(nbytes, 3)
    whole = {"type": "string", "pattern": _BASE64, "maxLength": 4 * groups}
    if not rest:
        return whole
    last = 4 * groups + 4
    return {
        "anyOf": [
            whole,
            {"type": "string", "pattern": _PADDED[rest], "minLength": last, "maxLength": last},
        ]
    }


def _parameter_ranges(limits: Limits) -> dict[tuple[str, str], tuple[int, int]]:
    return {
        ("/v1/stream", "count"): (0, limits.max_stream_count),
        ("/v1/stream", "size"): (0, limits.max_message_bytes),
        ("/v1/stream", "interval_ms"): (0, limits.max_interval_ms),
        ("/v1/blobs", "size"): (0, limits.max_payload_bytes),
        ("/v1/blobs/json", "size"): (0, limits.max_payload_bytes),
        ("/v1/blobs/stream", "size"): (0, limits.max_payload_bytes),
        ("/v1/blobs/stream", "chunk_size"): (0, limits.max_message_bytes),
    }


def _protobuf_orders(doc: dict[str, Any]) -> None:
    """``POST /v1/orders`` also takes and answers protobuf (rest/protobuf.py): gRPC's
    OrderRequest and OrderReply, as bytes; its errors stay JSON."""
    binary = {"schema": {"type": "string", "format": "binary"}}
    operation = doc["paths"]["/v1/orders"]["post"]
    operation["requestBody"]["content"][PROTOBUF] = binary
    operation["responses"]["200"]["content"][PROTOBUF] = binary


def complete(doc: dict[str, Any], limits: Limits, capped: bool, protobuf: bool) -> dict[str, Any]:
    """Declare in ``doc`` the error body and every status each operation answers, the media
    types of binary and NDJSON replies, and ``limits`` as each value's minimum and maximum.
    503 is declared where the service can answer it: on the budgeted operations while there is
    a payload budget, on every one when the number of concurrent calls is ``capped``.

    The limits are not validation rules of the routes (``ge``/``le`` would answer 422 where the
    core answers 400 or 413, as gRPC does), so FastAPI cannot see them; a fuzzer that does not
    know them generates valid requests that run for minutes."""
    schemas = doc["components"]["schemas"]
    # FastAPI's HTTPValidationError (a list) is not what the service sends: app.py answers
    # every error with one line, {"detail": "<field>: <problem>"}.
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas["Problem"] = Problem.model_json_schema()
    ranges = _parameter_ranges(limits)
    for (method, path), codes in STATUSES.items():
        operation = doc["paths"][path][method]
        responses = operation["responses"]
        responses.pop("422", None)
        overloaded = capped or (limits.payload_budget_bytes > 0 and (method, path) in BUDGETED)
        for code in (*codes, 503) if overloaded else codes:
            if code == 406 and not protobuf:
                continue
            responses[str(code)] = {**_ERRORS[code], "content": _PROBLEM}
        if (method, path) in _REPLIES:
            responses["200"] = _REPLIES[method, path]
        for parameter in operation.get("parameters", ()):
            low, high = ranges[path, parameter["name"]]
            parameter["schema"].update(minimum=low, maximum=high)
    order = schemas["OrderRequest"]["properties"]
    order["work_ms"].update(minimum=0, maximum=limits.max_work_ms)
    item = schemas["LineItem"]["properties"]
    item["quantity"].update(minimum=0, maximum=UINT32_MAX)
    item["unit_price_cents"].update(minimum=INT64_MIN, maximum=INT64_MAX)
    upload = doc["paths"]["/v1/blobs/json"]["post"]["requestBody"]["content"]["application/json"]
    data = upload["schema"]["properties"]["data"]
    data.pop("type")
    data.update(_base64_of_at_most(limits.max_payload_bytes))
    if protobuf:
        _protobuf_orders(doc)
    return doc


def install(app: FastAPI, limits: Limits, capped: bool, protobuf: bool) -> None:
    """Serve :func:`complete`'s document as ``app``'s ``/openapi.json`` (built once, cached)."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            # A copy: FastAPI's document shares dicts with the routes (openapi_extra).
            app.openapi_schema = complete(copy.deepcopy(generate()), limits, capped, protobuf)
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]  # FastAPI's documented extension point

"""Wire encodings the REST side needs beyond pydantic: base64 fields, NDJSON lines, ping frames."""

from __future__ import annotations

import base64
import binascii
import json

from wirelab.core import CoreError, Limits, pong


def decode_b64(text: str, field: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CoreError(f"{field} is not valid standard base64: {exc}") from None


def b64(data: bytes) -> bytes:
    return base64.b64encode(data)


def ndjson_line(seq: int, encoded_payload: bytes) -> bytes:
    """One StreamMessage as a JSON line; the payload is base64-encoded once per stream."""
    return b'{"seq":%d,"payload":"%s"}\n' % (seq, encoded_payload)


def answer_ping(frame: str, limits: Limits) -> str:
    """Parse a JSON Ping text frame and return the Pong frame echoing seq and payload."""
    try:
        ping = json.loads(frame)
    except ValueError as exc:
        raise CoreError(f"ping frame is not JSON: {exc}") from None
    if not isinstance(ping, dict):
        raise CoreError('ping frame must be a JSON object {"seq": n, "payload": "<base64>"}')
    seq, payload = ping.get("seq", 0), ping.get("payload", "")
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise CoreError("seq must be an integer")
    if not isinstance(payload, str):
        raise CoreError("payload must be a base64 string")
    seq, data = pong(seq, decode_b64(payload, "payload"), limits)
    return f'{{"seq":{seq},"payload":"{b64(data).decode("ascii")}"}}'

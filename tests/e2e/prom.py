"""A small Prometheus HTTP API client for the end-to-end checks (standard library only)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any


class Prometheus:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def _get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.base_url}{path}{query}", timeout=30) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant vector/scalar result of `expr` now; [] when it has no data."""
        data = self._get("/api/v1/query", query=expr)
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def values(self, expr: str, by: str) -> dict[str, float]:
        """{label value: sample value} of an instant vector grouped by one label."""
        return {r["metric"].get(by, ""): float(r["value"][1]) for r in self.query(expr)}

    def by_protocol_kind(self, expr: str) -> dict[tuple[str, str], float]:
        """{(protocol, kind): value} of an instant vector with those two labels."""
        return {
            (r["metric"]["protocol"], r["metric"]["kind"]): float(r["value"][1])
            for r in self.query(expr)
        }

    def request_totals(self) -> dict[str, dict[tuple[str, str], float]]:
        """Requests so far per (protocol, kind), as Locust ("client") and the services count."""
        return {
            side: self.by_protocol_kind(f"sum by (protocol, kind) (wirelab_{side}_requests_total)")
            for side in ("client", "server")
        }

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self._get("/api/v1/targets")["activeTargets"]
        return active

    def firing(self, alertname: str) -> list[dict[str, str]]:
        """Label sets of the alerts of that name that are firing now."""
        alerts = self._get("/api/v1/alerts")["alerts"]
        return [
            a["labels"]
            for a in alerts
            if a["labels"].get("alertname") == alertname and a["state"] == "firing"
        ]

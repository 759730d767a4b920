"""A small Prometheus HTTP API client for the end-to-end checks (standard library only)."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

# {"client" | "server": {(protocol, kind): requests}}
Totals = dict[str, dict[tuple[str, str], float]]


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

    def request_totals(self) -> Totals:
        """Requests so far per (protocol, kind), as Locust ("client") and the services count."""
        return {
            side: self.by_protocol_kind(f"sum by (protocol, kind) (wirelab_{side}_requests_total)")
            for side in ("client", "server")
        }

    def settled_request_totals(self, timeout: float = 30.0) -> Totals:
        """request_totals once two reads 4 s apart agree: Locust workers ship their counts to
        the master every 3 s, so a stop is only visible on the client side a report later."""
        deadline = time.monotonic() + timeout
        last = self.request_totals()
        while time.monotonic() < deadline:
            time.sleep(4)
            now = self.request_totals()
            if now == last:
                return now
            last = now
        raise AssertionError(f"request counts still moving after {timeout:g} s")

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

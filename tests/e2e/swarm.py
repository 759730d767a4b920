"""Drive the lab's own Locust master (and through it its workers) over its web API."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any


class LocustMaster:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    def _call(self, path: str, form: dict[str, str] | None = None) -> Any:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(f"{self.base_url}{path}", data=data)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def swarm(self, users: int, run_time: str, **options: str | int) -> None:
        """Start (or re-shape) a swarm; lab options go by their Locust names (payload_bytes, mix,
        ...). `run_time` bounds the swarm even if the caller never stops it."""
        form = {"user_count": str(users), "spawn_rate": str(users), "run_time": run_time}
        form |= {key: str(value) for key, value in options.items()}
        reply = self._call("/swarm", form)
        assert reply.get("success"), f"Locust refused the swarm: {reply}"

    def stop(self) -> None:
        self._call("/stop", {})

    def stats(self) -> dict[str, Any]:
        stats: dict[str, Any] = self._call("/stats/requests")
        return stats

    def requests_by_name(self) -> dict[tuple[str, str], int]:
        """(type, name) -> completed requests, Locust's own count (type = protocol)."""
        return {
            (row["method"], row["name"]): int(row["num_requests"])
            for row in self.stats()["stats"]
            if row["name"] != "Aggregated"
        }

"""Performance benchmarks of the lab itself: commands that print figures, not tests."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# A small order: the request-response kind at its cheapest, so transport cost dominates. Every
# benchmark that loads the order call sends this one.
ORDER = {
    "order": {
        "order_id": "o-1",
        "customer_id": "c-1",
        "items": [{"sku": "a", "quantity": 2, "unit_price_cents": 150}],
        "attributes": {"channel": "bench"},
        "note": "small",
    }
}


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """A benchmark's rows as CSV, the first row's keys as the header."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

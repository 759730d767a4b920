"""Write grafana/dashboards/*.json: `python3 -m grafana.build`; a test checks they are current."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from grafana.board import Dashboard
from grafana.containers_host import containers_host
from grafana.load_generator import load_generator
from grafana.rest_vs_grpc import rest_vs_grpc
from grafana.topology import topology

OUT = Path(__file__).resolve().parent / "dashboards"
DASHBOARDS: dict[str, Callable[[], Dashboard]] = {
    "rest-vs-grpc.json": rest_vs_grpc,
    "containers-host.json": containers_host,
    "load-generator.json": load_generator,
    "topology.json": topology,
}


def render_all() -> dict[str, str]:
    """File name -> JSON text, exactly as committed."""
    return {
        name: json.dumps(build().render(), indent=2) + "\n" for name, build in DASHBOARDS.items()
    }


def main() -> None:
    for name, body in render_all().items():
        (OUT / name).write_text(body)
        print(OUT / name, file=sys.stderr)


if __name__ == "__main__":
    main()

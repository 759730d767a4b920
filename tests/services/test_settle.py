"""The services freeze their startup heap out of the garbage collector before they serve
(wirelab.serving.settle): a later full collection walks only what was made since, which took a
metrics-on gRPC service's observer effect from 0.945-0.957 to 0.976-0.978
(docs/services.md#observer-effect-metrics-on-vs-off)."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest
from wirelab import serving

from tests.services.test_integration import start

# Written into each service's sitecustomize: its frozen object count, as it exits.
REPORT = """\
import atexit, gc, os

def _report():
    with open(os.environ["SETTLE_TEST_REPORT"], "w") as out:
        out.write(str(gc.get_freeze_count()))

atexit.register(_report)
"""


def test_settle_collects_then_freezes_what_exists() -> None:
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    Cycle()  # garbage only a collection frees
    kept = [object() for _ in range(1000)]
    try:
        serving.settle()
        assert gc.get_freeze_count() >= len(kept)
        assert not [o for o in gc.get_objects() if isinstance(o, Cycle)]
    finally:
        gc.unfreeze()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("module", "env"),
    [
        ("wirelab.rest", {}),
        ("wirelab.rest", {"WIRELAB_REST_HTTP": "2"}),
        ("wirelab.rpc", {"WIRELAB_GRPC_SERVER": "aio"}),
        ("wirelab.rpc", {"WIRELAB_GRPC_SERVER": "sync"}),
    ],
    ids=["rest", "rest-h2", "grpc-aio", "grpc-sync"],
)
def test_a_serving_service_has_its_startup_heap_frozen(
    module: str, env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "sitecustomize.py").write_text(REPORT)
    report = tmp_path / "frozen"
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    env = env | {"PYTHONPATH": path, "SETTLE_TEST_REPORT": str(report)}
    service = start(module, tmp_path, env)
    assert service.stop() == 0, service.log.read_text()
    # Modules, classes and the app: tens of thousands (a service that never froze reports 0).
    assert int(report.read_text()) > 10_000

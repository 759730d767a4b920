"""`wirelab perf trace-cost` briefly: each protocol's variants are timed through the service's
own call path (REST's app, gRPC's aio server loaded by ghz), each figure printed beside off."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from wirelab_perf import trace_cost

from tests.bench.test_crosscheck_run import require


@pytest.fixture(autouse=True)
def _unpinned() -> Iterator[None]:
    """The command pins its process to the services' core: the test process is given back its
    CPUs afterwards."""
    cpus = os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, cpus)


def _figures(out: str, title: str) -> tuple[float, dict[str, float]]:
    """The off figure and each ratio's figure printed under ``title`` (up to the next title:
    the first line after it not indented)."""
    lines = out.split(title, 1)[1].splitlines()[1:]
    section = "\n".join(itertools.takewhile(lambda line: line.startswith("  "), lines))
    off = float(re.search(r"traces off: +([\d.]+) us", section).group(1))  # type: ignore[union-attr]
    on = {r: float(us) for r, us in re.findall(r"ratio +([\d.]+), [^:]+: +([\d.]+) us", section)}
    return off, on


def test_rest_is_timed_off_and_at_each_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--protocols", "rest", "--orders", "20", "--batches", "1", "--ratios", "0,1"]
    assert trace_cost.main(argv) == 0
    out = capsys.readouterr().out
    for title in ("REST order through the app", "REST WebSocket session (10 pings of 64 B)"):
        off, on = _figures(out, title)
        assert off > 0 and set(on) == {"0", "1"} and all(us > 0 for us in on.values())


def test_a_websocket_session_is_each_ping_answered_through_the_app(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the session figure times: the handshake, every ping answered, the client's close;
    a session the app ends otherwise (here a ping it refuses, closed 1007) is no figure."""
    app = trace_cost.app_for("off", "0")
    asyncio.run(trace_cost.session(app))
    monkeypatch.setattr(trace_cost, "PING", "not JSON")
    with pytest.raises(RuntimeError, match="answered"):
        asyncio.run(trace_cost.session(app))


@pytest.mark.integration
def test_grpc_is_timed_through_the_aio_server(capsys: pytest.CaptureFixture[str]) -> None:
    require(shutil.which("ghz") or str(Path.home() / "go" / "bin" / "ghz"))
    argv = ["--protocols", "grpc", "--orders", "40", "--batches", "1", "--ratios", "1"]
    assert trace_cost.main(argv) == 0
    out = capsys.readouterr().out
    for title in ("through the aio server's handlers", "through the aio server on loopback"):
        off, on = _figures(out, f"gRPC ProcessOrder {title}")
        assert off > 0 and set(on) == {"1"} and on["1"] > 0


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(SystemExit) as refused:
        trace_cost.main(["--protocols", "rest,soap"])
    assert refused.value.code == 2

"""wirelab-loadgen runs of the small order call, open or closed loop, as figures."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from wirelab.contract.folder import FOLDER

from wirelab_bench.knobs import LOADGEN_BINARY, REPO

# Where `make tools` installs the generator (loadgen/).
BINARY = Path(LOADGEN_BINARY)
# The folder holding wirelab/v1/wirelab.proto: the generator builds its gRPC calls from it
# (the runner's knob loadgen_proto; the bench image keeps a copy at /opt/wirelab/proto).
PROTO_ROOT = REPO / "proto"
# The metric contract: the generator's series take their names, outcomes and buckets from it.
# Read where the wirelab package finds it: a checkout's contract/ and the bench image's copy alike.
CONTRACT = FOLDER / "metrics.json"
ARRIVALS = ("constant", "poisson")


@dataclass(frozen=True)
class OpenRun:
    """One open-loop run: what was offered, what was answered and how fast, what never started.

    The generator schedules each call at its intended time and hands it to a free worker; with
    none free the call is not started late but dropped and counted (``dropped``), so every
    latency is measured from the intended start and the schedule's misses are explicit.
    """

    offered_per_s: float
    answered_per_s: float
    median_ms: float
    mean_ms: float
    p99_ms: float
    dropped: int
    failed: int
    # The generator's own CPU-seconds per second of the run: near 1, it (one core) set the pace.
    client_cpu: float = 0.0
    # How late the workers started calls after their intended time: large, the schedule slipped.
    start_lag_p99_ms: float = 0.0
    # Calls answered in all (any outcome): the count its wirelab_client_requests_total adds up to.
    answered: int = 0

    @property
    def on_time(self) -> bool:
        """Every call started on schedule and answered as offered (within 5 %)."""
        return self.dropped == 0 and self.answered_per_s >= 0.95 * self.offered_per_s


class Timed(Protocol):
    """A run at one offered rate that kept its schedule or not: an OpenRun, a tidy row."""

    @property
    def on_time(self) -> bool: ...


R = TypeVar("R", bound=Timed)


def knee(runs: Iterable[R]) -> R | None:
    """The highest offered rate served on time before the first that was not (runs ascending)."""
    last = None
    for run in runs:
        if not run.on_time:
            break
        last = run
    return last


@dataclass(frozen=True)
class ClosedRun:
    """One closed-loop run: ``users`` each sending the next order once the last is answered.

    ``confirmed_per_s`` counts the orders answered within the threshold; ``failed`` those
    answered with an error plus those answered later than it (``late``), as the order-chain
    study counted failed orders. Percentiles are of every answered call.
    """

    users: int
    answered_per_s: float
    confirmed_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    failed: int
    late: int


def open_figures(summary: dict[str, Any]) -> OpenRun:
    """An open-loop run's figures from the generator's summary JSON."""
    seconds = summary["seconds"]
    latency = summary["latency_ms"]
    return OpenRun(
        offered_per_s=summary["offered_per_s"],
        answered_per_s=summary["answered"] / seconds,
        median_ms=latency["p50"],
        mean_ms=latency["mean"],
        p99_ms=latency["p99"],
        dropped=summary["dropped"],
        failed=summary["failed"],
        client_cpu=summary["cpu_seconds"] / seconds,
        start_lag_p99_ms=summary["start_lag_ms"]["p99"],
        answered=summary["answered"],
    )


def closed_figures(summary: dict[str, Any], users: int) -> ClosedRun:
    """A closed-loop run's figures from the generator's summary JSON."""
    seconds = summary["seconds"]
    latency = summary["latency_ms"]
    answered, failed, late = summary["answered"], summary["failed"], summary["late"]
    return ClosedRun(
        users=users,
        answered_per_s=answered / seconds,
        confirmed_per_s=(answered - failed - late) / seconds,
        p50_ms=latency["p50"],
        p95_ms=latency["p95"],
        p99_ms=latency["p99"],
        failed=failed + late,
        late=late,
    )


def run_open(
    binary: str | Path, protocol: str, target: str, body: dict[str, Any], rate: float,
    workers: int, seconds: int, cpu: int | None = None, arrivals: str = "constant", seed: int = 1,
    remote_write: str = "", peer: str = "", http: str = "1.1",
) -> OpenRun:  # fmt: skip
    """``rate`` calls/s against ``target`` (http://host:port or host:port) for ``seconds``,
    arriving evenly spaced or as a Poisson process (``arrivals``), from ``workers`` workers.
    With ``remote_write`` (a Prometheus's /api/v1/write) the run's wirelab_client_* series go
    there too, labelled generator="loadgen", with ``peer`` naming the service called. REST goes
    over HTTP/1.1, or cleartext HTTP/2 with ``http="h2c"``."""
    mode = ["-mode", "open", "-arrivals", arrivals, "-rate", f"{rate:g}", "-seed", str(seed)]
    mode += ["-fail-over-ms", "0"]  # every answer counts; late ones show in the percentiles
    if remote_write:
        mode += ["-remote-write", remote_write]
    if peer:
        mode += ["-peer", peer]
    if http != "1.1":
        mode += ["-http", http]
    return open_figures(_run(binary, protocol, target, body, workers, seconds, mode, cpu))


def run_closed(
    binary: str | Path, protocol: str, target: str, body: dict[str, Any], users: int,
    seconds: int, fail_over_ms: float, cpu: int | None = None,
) -> ClosedRun:  # fmt: skip
    """A closed loop of ``users`` against ``target``; answers slower than ``fail_over_ms`` are
    late (0: none is)."""
    mode = ["-mode", "closed", "-fail-over-ms", f"{fail_over_ms:g}"]
    return closed_figures(_run(binary, protocol, target, body, users, seconds, mode, cpu), users)


def command(
    binary: str | Path, protocol: str, target: str, body: dict[str, Any], workers: int,
    seconds: float, mode: list[str], cpu: int | None = None, proto: str | Path = PROTO_ROOT,
) -> list[str]:  # fmt: skip
    """The generator's command line: the order call to ``target``, ``mode``'s flags (open or
    closed loop and their settings), pinned to ``cpu`` if given; gRPC's from ``proto``."""
    taskset = [] if cpu is None else ["taskset", "--cpu-list", str(cpu)]
    cmd = [*taskset, str(binary), "-protocol", protocol, "-target", target]
    cmd += ["-body", json.dumps(body), "-contract", str(CONTRACT)]
    if protocol == "grpc":
        cmd += ["-proto", str(proto)]
    return [*cmd, *mode, "-workers", str(workers), "-seconds", f"{seconds:g}"]


def _run(
    binary: str | Path, protocol: str, target: str, body: dict[str, Any], workers: int,
    seconds: int, mode: list[str], cpu: int | None,
) -> dict[str, Any]:  # fmt: skip
    """Run the generator with these settings (pinned to ``cpu`` if given); its summary JSON."""
    cmd = command(binary, protocol, target, body, workers, seconds, mode, cpu)
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.json"
        done = subprocess.run([*cmd, "-summary", str(summary)], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"wirelab-loadgen failed ({done.returncode}):\n{done.stderr[-2000:]}"
            )
        result: dict[str, Any] = json.loads(summary.read_text())
        return result

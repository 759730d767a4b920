"""Drive one cell's load in a child process: the project's locustfile, headless, or the lab's
precise generator, wirelab-loadgen (a group's ``generator``)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from wirelab_locust.content import order_request
from wirelab_locust.options import OPTIONS

from wirelab_bench import loadgen
from wirelab_bench.scenario import Cell
from wirelab_bench.scrape import probe as probe_url

# Per kind, the Locust option that carries the cell's payload size.
PAYLOAD_OPTION = {
    "server_stream": "--stream-size",
    "bidi": "--ping-bytes",
    "upload": "--payload-bytes",
    "upload_chunked": "--payload-bytes",
    "upload_json": "--payload-bytes",
    "download": "--payload-bytes",
    "download_chunked": "--payload-bytes",
    "download_json": "--payload-bytes",
}
# Headroom after the measured window before Locust's own run-time limit stops it; the runner
# normally stops it first, the limit only bounds traffic if the runner itself dies.
SAFETY_SECONDS = 60


@dataclass(frozen=True)
class Target:
    """Where the load goes and where the child's client metrics are served."""

    rest_url: str
    grpc_target: str
    locustfile: Path
    metrics_port: int
    extra_args: tuple[str, ...] = ()
    amqp_target: str = ""


def locust_command(cell: Cell, target: Target, csv_prefix: Path) -> list[str]:
    """The headless Locust command line for ``cell`` (one protocol, one kind, one payload)."""
    g, load = cell.group, cell.load
    run_time = int(g.warmup_s + g.duration_s + SAFETY_SECONDS)
    cmd = [
        sys.executable, "-m", "locust",
        "-f", str(target.locustfile),
        "--headless", "--only-summary",
        "--users", str(load.users),
        "--spawn-rate", f"{load.spawn_rate:g}",
        "--run-time", f"{run_time}s",
        "--stop-timeout", "5",
        "--csv", str(csv_prefix), "--csv-full-history",
        "--host", target.rest_url,
        "--rest-host", target.rest_url,
        "--grpc-target", target.grpc_target,
        "--amqp-target", target.amqp_target,
        "--protocols", cell.protocol,
        "--mix", f"{cell.kind}=1",
        "--work-ms", str(g.work_ms),
        "--stream-count", str(g.stream_count),
        "--stream-interval-ms", str(g.stream_interval_ms),
        "--ping-count", str(g.stream_count),
        "--fail-over-ms", f"{g.failure_threshold_ms:g}",
        "--metrics-port", str(target.metrics_port),
        "--metrics-bind", "127.0.0.1",
        "--exit-code-on-error", "0",
        "--loglevel", "WARNING",
    ]  # fmt: skip
    if cell.kind in PAYLOAD_OPTION:
        cmd += [PAYLOAD_OPTION[cell.kind], str(cell.payload_bytes)]
    if load.rate is not None:
        # Paced mode: each user runs `pace` tasks per second, so users x pace = the target rate.
        cmd += ["--pace", f"{load.rate / load.users:g}"]
    if cell.rest_http not in ("", "1.1"):
        cmd += ["--rest-http", cell.rest_http]
    return [*cmd, *target.extra_args]


# The words of the order's note, as Locust's users write it (its --note-words default).
NOTE_WORDS = next(default for flag, _, default, _, _ in OPTIONS if flag == "note-words")


def loadgen_command(
    cell: Cell, target: Target, binary: str, summary: Path, proto: str | Path = loadgen.PROTO_ROOT
) -> list[str]:
    """wirelab-loadgen's command line for a unary ``cell``: the order Locust's users send (same
    work, same note), from ``users`` workers: a closed loop, or with the load's rate an open
    loop at that rate with the group's arrivals (Locust paces its users to it instead). Its
    client series are served on the cell's metrics port, as a Locust child's are; ``summary``
    gets its own figures (the schedule's drops and start lag among them)."""
    g, load = cell.group, cell.load
    body = order_request(g.work_ms, NOTE_WORDS)
    address = target.rest_url if cell.protocol == "rest" else target.grpc_target
    mode = ["-mode", "closed"]
    if load.rate is not None:
        # Each repetition draws its own Poisson schedule, the same in every run of the scenario.
        mode = ["-mode", "open", "-rate", f"{load.rate:g}", "-arrivals", g.arrivals]
        mode += ["-seed", str(cell.repetition + 1)]
        # The schedule's figures for the measured window too (the warm-up's drops left out),
        # by the generator's clock from its start, which the runner sees within a poll.
        window_end = g.warmup_s + g.duration_s
        mode += ["-window-from", f"{g.warmup_s:g}", "-window-to", f"{window_end:g}"]
    if cell.rest_http not in ("", "1.1"):
        mode += ["-http", cell.rest_http]
    mode += ["-fail-over-ms", f"{g.failure_threshold_ms:g}"]
    mode += ["-metrics-addr", f"127.0.0.1:{target.metrics_port}", "-summary", str(summary)]
    seconds = g.warmup_s + g.duration_s + SAFETY_SECONDS
    return loadgen.command(
        binary, cell.protocol, address, body, load.users, seconds, mode, proto=proto
    )


class LoadProcess:
    """A running load generator (headless Locust or wirelab-loadgen); its output goes to a log
    file in the results folder."""

    def __init__(self, cmd: list[str], log_path: Path) -> None:
        self.cmd = cmd
        self.log: IO[bytes] = log_path.open("wb")
        # A new session so a Ctrl-C in the terminal reaches the runner only; the runner then
        # stops Locust itself, in order, and still writes what was measured.
        self.proc = subprocess.Popen(
            cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU time of the Locust process so far (Linux /proc; NaN elsewhere)."""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return math.nan
        # Fields after the parenthesised command name; utime and stime are the 12th and 13th.
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (Locust stops users and writes its CSVs; wirelab-loadgen its summary), then
        SIGKILL after ``timeout``."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def wait_started(proc: LoadProcess, probe: str | None, timeout: float) -> None:
    """Block until the child's client exporter answers (the test has started) or it died."""
    deadline = time.monotonic() + timeout
    while True:
        if not proc.alive():
            raise RuntimeError(f"the load generator exited early with code {proc.proc.returncode}")
        if probe is None or probe_url(probe, "wirelab_client_users") is None:
            return
        if time.monotonic() >= deadline:
            raise RuntimeError(f"the load generator's client metrics at {probe} did not come up")
        time.sleep(0.1)

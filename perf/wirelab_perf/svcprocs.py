"""The benchmarks' one way to start a service as a real process: free ports, CPU pinning, health,
and its CPU time and memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil

# The runner's, re-exported: the benchmarks take ports, pinning and services from here alone.
from wirelab_bench.cell import free_port as free_port
from wirelab_bench.health import wait_healthy

# The machine has two cores: services get one, the load tool the other.
SERVER_CPU, CLIENT_CPU = 0, 1


def pin(cpu: int) -> None:
    """Pin the calling process (and the threads and children it starts later) to ``cpu``."""
    os.sched_setaffinity(0, {cpu})


def pinned(cmd: Sequence[str], cpu: int) -> list[str]:
    """``cmd`` pinned to ``cpu`` by taskset, which execs it: the same pid, the same process.
    Never a ``preexec_fn``: it makes Python fork instead of vfork, and the child runs Python
    before its exec. Forked while a gRPC channel's threads held their locks, it can hang there:
    a CI run on 27 Nov stalled 15 minutes in Popen, the child never reaching its exec."""
    return ["taskset", "--cpu-list", str(cpu), *cmd]


def address_of(protocol: str, port: int, host: str = "127.0.0.1") -> str:
    """How the benchmarks name a server: a base URL for REST, host:port for gRPC."""
    return f"http://{host}:{port}" if protocol == "rest" else f"{host}:{port}"


def process_cpu(process: psutil.Process) -> float:
    """``process``'s CPU seconds so far: the scheduler's own count, read from the process's CPU
    clock (clock_getcpuclockid's id: the pid negated, shifted by 3, CPUCLOCK_SCHED). Not the
    user + system time of /proc/<pid>/stat, which comes in 10 ms ticks: a Node gRPC process at a
    fixed rate used 0.69-0.77 CPU-s a round, so one tick moved its round's ratio by 1.4 %."""
    try:
        return time.clock_gettime((~process.pid << 3) | 2)
    except OSError:  # gone, or a clock this kernel will not read: the ticks, as psutil has them
        times = process.cpu_times()
        return float(times.user + times.system)


@dataclass(frozen=True)
class Service:
    protocol: str
    address: str  # http://127.0.0.1:port for REST, 127.0.0.1:port for gRPC
    process: psutil.Process
    metrics_url: str  # the service's /metrics, on its own port

    def cpu_seconds(self) -> float:
        """CPU time of the whole process (all threads, those gone too) and of its children
        (nginx's worker does its master's work) so far, to the nanosecond (process_cpu)."""
        return sum(process_cpu(p) for p in (self.process, *self.process.children(recursive=True)))

    def rss(self) -> int:
        return int(self.process.memory_info().rss)

    def peak_rss(self) -> int:
        """The kernel's high-water mark of the resident set (VmHWM), in bytes: the true peak,
        however briefly it lasted between two samples."""
        status = (Path("/proc") / str(self.process.pid) / "status").read_text()
        kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
        return int(kib) * 1024

    def open_fds(self) -> int:
        return int(self.process.num_fds())

    def alive(self) -> bool:
        return bool(self.process.is_running()) and self.process.status() != psutil.STATUS_ZOMBIE


def gone(pid: int) -> bool:
    """Whether process ``pid`` has exited: no such process, or a zombie (a killed grandchild may
    be reparented to an init that does not reap it)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def gone_within(procs: Sequence[psutil.Process], seconds: float) -> None:
    """Wait until each of ``procs`` is ``gone``, for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while not all(gone(p.pid) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.05)


@contextmanager
def running(
    cmd: Sequence[str], cpu: int, ready: Callable[[], None], stop_within: float = 30
) -> Iterator[psutil.Process]:
    """``cmd`` pinned to ``cpu``, yielded once ``ready()`` returns; SIGTERM at the end, and the
    tail of its stderr printed if it then exits non-zero. One still running ``stop_within``
    seconds after the SIGTERM is killed with its children, and the run fails saying so: a
    benchmark leaves no service behind."""
    # A file, not a pipe: nobody reads stderr while the service runs, and a full pipe would
    # stall a service that logs under load (an overload or soak run) on its next line.
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(pinned(cmd, cpu), stdout=subprocess.DEVNULL, stderr=err)
        try:
            ready()
            yield psutil.Process(proc.pid)
        finally:
            try:
                family = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:  # gone already
                family = []
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=stop_within)
            except subprocess.TimeoutExpired:
                for left in family:
                    with suppress(psutil.NoSuchProcess):
                        left.kill()
                proc.kill()
                proc.wait()
                gone_within(family, 10)
                raise RuntimeError(
                    f"{' '.join(cmd)} still ran {stop_within:g} s after SIGTERM; killed"
                ) from None
            if proc.returncode:
                err.seek(max(0, err.seek(0, os.SEEK_END) - 1000))
                tail = err.read().decode(errors="replace")
                print(f"{' '.join(cmd)} exited {proc.returncode}: {tail}", file=sys.stderr)


@contextmanager
def service(
    protocol: str,
    cpu: int,
    extra: Sequence[str] = (),
    host: str = "127.0.0.1",
    port: int | None = None,
) -> Iterator[Service]:
    """``python -m wirelab.rest|rpc`` on ``host``, pinned to ``cpu``, healthy; on ``port`` if
    given (replicas sharing one port on several loopback addresses), else on a free one."""
    port = port or free_port()
    module, flag = (
        ("wirelab.rest", "--rest-port") if protocol == "rest" else ("wirelab.rpc", "--grpc-port")
    )
    cmd = [sys.executable, "-m", module, "--host", host, flag, str(port)]
    metrics_port = free_port()
    cmd += ["--metrics-port", str(metrics_port), *extra]
    url = address_of(protocol, port, host)
    with running(cmd, cpu, lambda: wait_healthy(url, url, (protocol,), timeout=30)) as proc:
        yield Service(protocol, url, proc, f"http://{host}:{metrics_port}/metrics")

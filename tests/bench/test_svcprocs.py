"""wirelab_perf.svcprocs.running: a benchmark's service process, stopped by SIGTERM, and killed
with its children when it will not stop."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from wirelab_perf.svcprocs import SERVER_CPU, gone, process_cpu, running

pytestmark = pytest.mark.integration

# A parent and a child that both ignore SIGTERM; each writes its pid once the handler is set.
STUBBORN = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if len(sys.argv) > 2:
    subprocess.Popen([sys.executable, __file__, sys.argv[1]])
with open(os.path.join(sys.argv[1], str(os.getpid())), "w"):
    pass
time.sleep(60)
"""


def pids_in(folder: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 20
    while len(found := [int(p.name) for p in folder.iterdir()]) < count:
        assert time.monotonic() < deadline, f"{found} of {count} started"
        time.sleep(0.05)
    return found


def test_a_service_that_ignores_sigterm_is_killed_with_its_children(tmp_path: Path) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    (started := tmp_path / "started").mkdir()
    cmd = [sys.executable, str(script), str(started), "with-child"]

    def both_ignore_sigterm() -> None:
        pids_in(started, 2)

    with (
        pytest.raises(RuntimeError, match=r"still ran 1 s after SIGTERM; killed"),
        running(cmd, SERVER_CPU, both_ignore_sigterm, stop_within=1),
    ):
        pass
    for pid in pids_in(started, 2):
        assert gone(pid)


def test_a_service_that_stops_on_sigterm_is_waited_for(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]
    with running(cmd, SERVER_CPU, lambda: None) as proc:
        pid = proc.pid
    assert gone(pid)


# A thread burns some CPU and ends, then the process waits: its CPU is all in a thread gone.
BURNS_IN_A_THREAD = """
import sys, threading, time
def burn():
    end = time.thread_time() + 0.237
    while time.thread_time() < end:
        pass
worker = threading.Thread(target=burn)
worker.start()
worker.join()
open(sys.argv[1], "w").close()
time.sleep(60)
"""


def test_a_process_cpu_is_read_to_the_nanosecond_with_its_ended_threads(tmp_path: Path) -> None:
    done = tmp_path / "done"
    cmd = [sys.executable, "-c", BURNS_IN_A_THREAD, str(done)]
    with running(cmd, SERVER_CPU, lambda: None) as proc:
        deadline = time.monotonic() + 20
        while not done.exists():
            assert time.monotonic() < deadline, "the thread never finished"
            time.sleep(0.05)
        ticks, cpu = sum(proc.cpu_times()[:2]), process_cpu(proc)
        # The ended thread's 0.237 s are there, and finer than the 10 ms ticks /proc/<pid>/stat
        # gives, which round the same count down (user and system each).
        assert cpu >= 0.237 and ticks <= cpu < ticks + 0.02
        assert round(cpu * 100) != cpu * 100

"""The saturation watch: one WARNING per episode when a load-generator process is at >= 90 % CPU.

Runs in a child process: importing the plugin imports Locust, which monkey-patches the process
with gevent, and the pytest process must stay unpatched."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import logging, gevent
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    from wirelab_locust import plugin

    class Runner:  # what _watch_cpu reads from a standalone runner: Locust's own CPU sample
        user_count = 3
        current_cpu_usage = 95.0

    plugin.CPU_CHECK_SECONDS = 0.05
    runner = Runner()
    watch = gevent.spawn(plugin._watch_cpu, runner)
    for percent in (95.0, 96.0, 10.0, 97.0):
        runner.current_cpu_usage = percent
        gevent.sleep(0.2)
    watch.kill()
    print("GAUGES", plugin.gauges(runner))
    """
)


def test_one_warning_per_saturated_episode() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    warnings = [line for line in out.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 2, out.stderr  # 95 -> 96 is one episode; 10 ends it; 97 starts one
    assert "load generator standalone at 95% CPU" in warnings[0]
    assert "load generator standalone at 97% CPU" in warnings[1]
    assert "cpu={'standalone': 0.97}" in out.stdout

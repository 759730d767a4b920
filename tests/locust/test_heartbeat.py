"""The master tolerates workers busy with one large call: its heartbeat liveness is a lab option.

Runs in a child process: importing the plugin imports Locust, which monkey-patches the process
with gevent, and the pytest process must stay unpatched."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.locust.conftest import free_port

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import sys
    import locust.runners
    from locust import events
    from locust.argument_parser import parse_options
    from locust.env import Environment
    from wirelab_locust import plugin  # registers the lab's options and init hook

    parsed = parse_options(sys.argv[2:])
    env = Environment(events=events, parsed_options=parsed)
    runner = env.create_master_runner("127.0.0.1", int(sys.argv[1]))
    before = locust.runners.HEARTBEAT_LIVENESS
    events.init.fire(environment=env, runner=runner, web_ui=None)
    print("LIVENESS", before, locust.runners.HEARTBEAT_LIVENESS)
    runner.quit()
    """
)


@pytest.mark.parametrize(("args", "expected"), [((), 30), (("--heartbeat-liveness", "7"), 7)])
def test_master_takes_the_heartbeat_liveness_option(args: tuple[str, ...], expected: int) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(free_port()), "--metrics-port", "0", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert f"LIVENESS 3 {expected}" in out, out

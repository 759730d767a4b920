"""Each stand-in built from source at the pinned release, started with exactly the command line and
config files compose gives it, must parse them, stay up and answer its health endpoint.

The command comes from `compose config` (interpolated as compose does); paths inside the
container become the host paths its bind mounts name, a named volume an empty folder. Each binary
runs in a network namespace of its own (`unshare --net`, loopback only), so it listens on the
very ports compose's command gives it, collides with nothing on the host and reaches nothing
beyond it (Prometheus's scrape targets do not resolve there)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.gobuild import REPO, go_build

pytestmark = pytest.mark.integration

# Started, then checked alive after this long and answering within the probe's own deadline.
STAY_UP_S = 3
PROBE = """
import sys, time, urllib.request
deadline = time.monotonic() + 20
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=2) as reply:
            sys.exit(0 if reply.status == 200 else 1)
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.5)
"""
# Run inside the namespace: loopback up, the binary in the background, alive after STAY_UP_S,
# then its health URL; the binary's exit status is reported when it dies early.
HARNESS = f"""
ip link set lo up
"$@" &
pid=$!
sleep {STAY_UP_S}
if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; echo "exited with status $?" >&2; exit 3; fi
"$PYTHON" -c "$PROBE" "$URL" || {{ echo "no answer from $URL" >&2; kill "$pid"; exit 4; }}
kill "$pid"
wait "$pid" || true
"""


@dataclass(frozen=True)
class Pinned:
    service: str  # compose's service
    component: str  # offline/go-build's component
    entrypoint: tuple[str, ...]  # the upstream image's, binary first (a name in the build folder)
    health: str  # URL inside the namespace
    profile: str = ""


PINNED = (
    Pinned("prometheus", "prometheus", ("prometheus",), "http://127.0.0.1:9090/-/ready"),
    Pinned("node-exporter", "node-exporter", ("node_exporter",), "http://127.0.0.1:9100/metrics"),
    Pinned("cadvisor", "cadvisor", ("cadvisor", "-logtostderr"), "http://127.0.0.1:8080/healthz"),
    Pinned("toxiproxy", "toxiproxy", ("toxiproxy",), "http://127.0.0.1:8474/version", "netem"),
    # No command: the image's all-in-one config; healthy once every component says so.
    Pinned("jaeger", "jaeger", ("jaeger",), "http://127.0.0.1:13133/status", "traces"),
)


def compose_config(profile: str) -> dict[str, Any]:
    """compose.yaml as compose reads it, with no WIRELAB_* override from this environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIRELAB_")}
    env |= {"COMPOSE_PROFILES": profile, "COMPOSE_FILE": "compose.yaml"}
    done = subprocess.run(
        [str(REPO / "offline" / "compose"), "config", "--format", "json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


def host_args(service: dict[str, Any], scratch: Path) -> list[str]:
    """The service's command with each container path under a mount rewritten to the host's."""
    mounts = {}
    for volume in service.get("volumes", []):
        source = volume["source"] if volume["type"] == "bind" else None
        if source is None:
            source = str(scratch / volume["source"])
            Path(source).mkdir(parents=True, exist_ok=True)
        mounts[volume["target"]] = source
    rewritten = []
    for arg in service.get("command") or []:
        prefix, eq, value = arg.rpartition("=")
        for target in sorted(mounts, key=len, reverse=True):
            if value == target or value.startswith(target + "/"):
                value = mounts[target] + value[len(target) :]
                break
        rewritten.append(f"{prefix}{eq}{value}")
    return rewritten


def start(binary_dir: Path, pinned: Pinned, args: list[str]) -> subprocess.CompletedProcess[str]:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("the flag test needs unshare (util-linux) and ip (iproute2)")
    namespace = ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "-rn"]
    command = [str(binary_dir / pinned.entrypoint[0]), *pinned.entrypoint[1:], *args]
    env = {**os.environ, "PYTHON": sys.executable, "PROBE": PROBE, "URL": pinned.health}
    return subprocess.run(
        [*namespace, "bash", "-c", HARNESS, "harness", *command],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize("pinned", PINNED, ids=[p.service for p in PINNED])
def test_the_pinned_release_takes_composes_command_line(pinned: Pinned, tmp_path: Path) -> None:
    service = compose_config(pinned.profile)["services"][pinned.service]
    done = start(go_build(pinned.component), pinned, host_args(service, tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_flag_the_release_does_not_know_fails_the_check(tmp_path: Path) -> None:
    """The check can fail: cAdvisor's metric group `accelerator` (removed in 0.47) stops the
    start, as it stopped the pinned image with compose's old list."""
    pinned = PINNED[2]
    args = host_args(compose_config("")["services"]["cadvisor"], tmp_path)
    args = [a.replace("--disable_metrics=", "--disable_metrics=accelerator,") for a in args]
    done = start(go_build("cadvisor"), pinned, args)
    assert done.returncode == 3, done.stderr[-3000:]
    assert 'unsupported metric "accelerator" specified' in done.stderr


def test_a_flag_prometheus_3_removed_fails_the_check(tmp_path: Path) -> None:
    """`--storage.tsdb.retention` went in Prometheus 3.0 (only `.retention.time` remains)."""
    pinned = PINNED[0]
    args = [*host_args(compose_config("")["services"]["prometheus"], tmp_path)]
    args.append("--storage.tsdb.retention=7d")
    done = start(go_build("prometheus"), pinned, args)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "storage.tsdb.retention" in done.stderr

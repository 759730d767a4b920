"""What a run ran on: git revision, host, Docker engine and the lab's image versions."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

COMPOSE_PROJECT_LABEL = "com.docker.compose.project"
COMPOSE_SERVICE_LABEL = "com.docker.compose.service"


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20, check=True)
    return done.stdout.strip()


def git_info(repo: Path) -> dict[str, Any]:
    """Commit and dirty flag of the checkout the runner came from (null outside a checkout)."""
    try:
        sha = _run(["git", "rev-parse", "HEAD"], repo)
        dirty = bool(_run(["git", "status", "--porcelain", "--untracked-files=no"], repo))
    except (OSError, subprocess.SubprocessError) as exc:
        return {"sha": os.environ.get("WIRELAB_GIT_SHA"), "dirty": None, "reason": str(exc)}
    return {"sha": sha, "dirty": dirty}


def host_info() -> dict[str, Any]:
    return {
        "hostname": platform.node(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def packages(repo: Path) -> dict[str, Any]:
    """Exact versions of every package installed where the runner runs, and which lock pinned
    them (the service and Locust images install from the same requirements.lock)."""
    lock = repo / "requirements.lock"
    installed = {dist.metadata["Name"]: dist.version for dist in importlib.metadata.distributions()}
    return {
        "lock_sha256": hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else None,
        "installed": dict(sorted(installed.items(), key=lambda kv: kv[0].lower())),
    }


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def docker_info(project: str) -> dict[str, Any]:
    """Engine version and, per compose service of ``project``, its image name and id."""
    if shutil.which("docker") is None:
        return {"version": None, "images": None, "reason": "no docker CLI on this machine"}
    try:
        version = _run(["docker", "version", "--format", "{{.Server.Version}}"])
        fmt = f'{{{{.Label "{COMPOSE_SERVICE_LABEL}"}}}}\t{{{{.Image}}}}\t{{{{.ID}}}}'
        rows = _run(
            [
                "docker",
                "ps",
                "--filter",
                f"label={COMPOSE_PROJECT_LABEL}={project}",
                "--format",
                fmt,
            ]
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"version": None, "images": None, "reason": f"docker unreachable: {exc}"}
    images: dict[str, Any] = {}
    for line in filter(None, rows.splitlines()):
        service, image, container = line.split("\t")
        try:
            image_id = _run(["docker", "inspect", "--format", "{{.Image}}", container])
        except (OSError, subprocess.SubprocessError):
            image_id = None
        images[service] = {"image": image, "id": image_id}
    if not images:
        return {
            "version": version,
            "images": None,
            "reason": f"no running containers of compose project {project!r}",
        }
    return {"version": version, "images": images}

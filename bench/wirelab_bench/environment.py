"""What a run ran on: git revision, host, Docker engine and the lab's image versions."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from wirelab.contract.table import value

COMPOSE_PROJECT_LABEL = "com.docker.compose.project"
COMPOSE_SERVICE_LABEL = "com.docker.compose.service"
# The runner's compose project names a Swarm stack when the lab runs as one (make swarm).
TASK_FORMAT = "{{.Name}}\t{{.Image}}\t{{.Node}}"
NODE_FORMAT = (
    "{{.Description.Hostname}}\t{{.Description.Resources.NanoCPUs}}\t"
    "{{.Description.Resources.MemoryBytes}}\t{{json .Spec.Labels}}"
)


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20, check=True)
    return done.stdout.strip()


DIRTY = "-dirty"


def git_info(repo: Path) -> dict[str, Any]:
    """Commit and dirty flag of the checkout the runner came from (null outside a checkout)."""
    try:
        sha = _run(["git", "rev-parse", "HEAD"], repo)
        dirty = bool(_run(["git", "status", "--porcelain", "--untracked-files=no"], repo))
    except (OSError, subprocess.SubprocessError) as exc:
        # As offline/bench-in-lab gives it to the bench image: the commit, "-dirty" appended
        # when the checkout the image was built from had changes.
        given: str = value("WIRELAB_GIT_SHA")
        flag = given.endswith(DIRTY) if given else None
        return {"sha": given.removesuffix(DIRTY) or None, "dirty": flag, "reason": str(exc)}
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
        stack = stack_info(project)
        if stack is not None:
            return {"version": version, **stack}
        return {
            "version": version,
            "images": None,
            "reason": f"no running containers of compose project {project!r}",
        }
    return {"version": version, "images": images}


def service_env(project: str, service: str) -> dict[str, str] | None:
    """The environment of a running container of compose service ``service`` of ``project``
    (what it was started with: WIRELAB_TRACES, ...); None where no docker CLI or container can
    tell, as inside the lab's own network."""
    if shutil.which("docker") is None:
        return None
    try:
        found = _run(["docker", "ps", "-q",
                      "--filter", f"label={COMPOSE_PROJECT_LABEL}={project}",
                      "--filter", f"label={COMPOSE_SERVICE_LABEL}={service}"]).split()  # fmt: skip
        if not found:
            return None
        env = json.loads(_run(["docker", "inspect", "--format", "{{json .Config.Env}}", found[0]]))
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return dict(item.split("=", 1) for item in env or [] if "=" in item)


def stack_info(stack: str) -> dict[str, Any] | None:
    """Per service of Swarm stack ``stack`` (make swarm), its image and the nodes its running
    tasks are on, and each node's cores, memory and wirelab roles; None when there is no such
    stack (or this engine is no swarm manager)."""
    try:
        tasks = _run(["docker", "stack", "ps", stack, "--filter", "desired-state=running",
                      "--format", TASK_FORMAT])  # fmt: skip
        hosts = _run(["docker", "node", "ls", "--format", "{{.ID}}"]).split()
        nodes = _run(["docker", "node", "inspect", "--format", NODE_FORMAT, *hosts])
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_stack(stack, tasks, nodes) if tasks else None


def parse_stack(stack: str, tasks: str, nodes: str) -> dict[str, Any]:
    """stack_info from ``docker stack ps`` and ``docker node inspect`` lines (TASK_FORMAT,
    NODE_FORMAT)."""
    images: dict[str, Any] = {}
    for line in filter(None, tasks.splitlines()):
        name, image, node = line.split("\t")
        # <stack>_<service>.<slot or node id>
        service = name.removeprefix(f"{stack}_").split(".")[0]
        entry = images.setdefault(service, {"image": image.split("@")[0], "id": None, "nodes": []})
        entry["nodes"] = sorted({*entry["nodes"], node})
    hosts: dict[str, Any] = {}
    for line in filter(None, nodes.splitlines()):
        host, nano_cpus, memory, labels = line.split("\t")
        roles = sorted(
            k.removeprefix("wirelab.role.")
            for k, v in json.loads(labels or "{}").items()
            if k.startswith("wirelab.role.") and v == "true"
        )
        hosts[host] = {"cores": int(nano_cpus) / 1e9, "memory_bytes": int(memory), "roles": roles}
    return {"stack": stack, "images": images, "nodes": hosts}

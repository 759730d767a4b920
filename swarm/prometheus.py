"""prometheus/prometheus.yml for a Swarm stack: every job that finds its targets by a service's
name (static or DNS) finds the stack's tasks through the engine instead (dockerswarm_sd_configs,
role tasks), with the same job names and labels, one `instance` per task, plus the `node` it
runs on. Written at deploy time, since it keeps only the named stack's tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SOCKET = "unix:///var/run/docker.sock"
# What compose's static names and DNS lookups meant, as Swarm's discovery labels say it: the
# service name (the label swarm.stack sets on every task's container), the stack, its network.
SERVICE = "__meta_dockerswarm_container_label_com_docker_compose_service"
STACK = "__meta_dockerswarm_service_label_com_docker_stack_namespace"


def _discovery(stack: str, services: list[str], port: int) -> tuple[dict[str, Any], list[Any]]:
    """One SD config for ``services``' tasks of ``stack`` on ``port``, and the relabelling that
    keeps exactly those (running, on the stack's network) with their address on that port."""
    sd = {"host": SOCKET, "role": "tasks", "port": port, "refresh_interval": "5s"}
    relabel: list[dict[str, Any]] = [
        {"source_labels": [STACK], "regex": stack, "action": "keep"},
        {"source_labels": ["__meta_dockerswarm_task_desired_state"], "regex": "running",
         "action": "keep"},
        # A task has an address per network; the stack's own is the one its peers use.
        {"source_labels": ["__meta_dockerswarm_network_name"], "regex": f"{stack}_default",
         "action": "keep"},
        {"source_labels": [SERVICE], "regex": "|".join(services), "action": "keep"},
        # Discovery gives a target per published port (or the SD's port): the metrics port.
        {"source_labels": ["__address__"], "regex": r"(.+):\d+", "target_label": "__address__",
         "replacement": f"${{1}}:{port}"},
        # Where each task ran: one label, so a figure can be read per node.
        {"source_labels": ["__meta_dockerswarm_node_hostname"], "target_label": "node"},
    ]  # fmt: skip
    return sd, relabel


def _split(target: str) -> tuple[str, int]:
    host, _, port = target.rpartition(":")
    return host, int(port)


def swarm_job(job: dict[str, Any], stack: str) -> dict[str, Any]:
    """``job`` of prometheus.yml as the stack's Prometheus runs it (unchanged when it scrapes
    only itself)."""
    out = {k: v for k, v in job.items() if k not in ("static_configs", "dns_sd_configs")}
    sds: list[dict[str, Any]] = []
    relabels: list[list[dict[str, Any]]] = []
    for group in job.get("static_configs", []):
        targets = [_split(t) for t in group["targets"]]
        if all(host == "localhost" for host, _ in targets):
            out.setdefault("static_configs", []).append(group)
            continue
        for host, port in targets:
            sd, relabel = _discovery(stack, [host], port)
            sds.append(sd)
            # The static group's labels, on its service's targets.
            relabel += [
                {"source_labels": [SERVICE], "regex": host, "target_label": name,
                 "replacement": str(value)}
                for name, value in (group.get("labels") or {}).items()
            ]  # fmt: skip
            relabels.append(relabel)
    for dns in job.get("dns_sd_configs", []):
        sd, relabel = _discovery(stack, list(dns["names"]), int(dns["port"]))
        # The job's own rules read the name DNS was asked for; the service's name is that name.
        relabel.append({"source_labels": [SERVICE], "target_label": "__meta_dns_name"})
        sds.append(sd)
        relabels.append(relabel + list(job.get("relabel_configs", [])))
    if not sds:
        return out
    if len(relabels) > 1:
        raise ValueError(f"job {job['job_name']}: one discovered target group per job, not more")
    out["dockerswarm_sd_configs"] = sds
    out["relabel_configs"] = relabels[0]
    return out


def swarm_config(stack: str, source: Path) -> dict[str, Any]:
    """prometheus.yml at ``source``, every job rewritten for stack ``stack``."""
    config: dict[str, Any] = yaml.safe_load(source.read_text())
    config["scrape_configs"] = [swarm_job(job, stack) for job in config["scrape_configs"]]
    return config

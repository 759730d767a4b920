"""Benchmark: the monitoring stack's CPU during the lab's default mixed Locust run (cAdvisor)."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from wirelab_bench.knobs import parser

MONITORING = ("prometheus", "cadvisor", "node-exporter")
SERVICE_LABEL = "container_label_com_docker_compose_service"
PROJECT_LABEL = "container_label_com_docker_compose_project"
# Compose service and project names are [a-z0-9_-]: none of it is special in a PromQL string
# or a regex, so names go into the query as they are and anything else is refused.
NAME = re.compile(r"[A-Za-z0-9_-]+")
# After the window ends the load goes on this long, so that cAdvisor's last housekeeping tick of
# the window (5 s, stretched up to 15 s when a container is idle) has been scraped when the query
# is evaluated at the window's end.
SETTLE_SECONDS = 20


def cpu_query(project: str, services: Sequence[str], window_s: int) -> str:
    """CPU of each compose service of ``project`` as % of one core, averaged over the window."""
    for name in (project, *services):
        if not NAME.fullmatch(name):
            raise ValueError(f"not a compose name: {name!r}")
    selector = f'{PROJECT_LABEL}="{project}", {SERVICE_LABEL}=~"{"|".join(services)}"'
    return (
        f"100 * sum by ({SERVICE_LABEL}) "
        f"(rate(container_cpu_usage_seconds_total{{{selector}}}[{window_s}s]))"
    )


def scrape_query(metric: str, window_s: int) -> str:
    """A per-scrape figure Prometheus records for every target, averaged per job over the window."""
    return f"avg by (job) (avg_over_time({metric}[{window_s}s]))"


def appended_query(window_s: int) -> str:
    """Samples Prometheus appended to its head block per second over the window."""
    return f"sum(rate(prometheus_tsdb_head_samples_appended_total[{window_s}s]))"


def by_label(data: Any, label: str) -> dict[str, float]:
    """An instant-vector answer of the query API as {value of ``label``: sample value}."""
    return {s["metric"].get(label, ""): float(s["value"][1]) for s in data["result"]}


@dataclass(frozen=True)
class Verdict:
    total: float
    missing: tuple[str, ...]
    goal: float

    @property
    def ok(self) -> bool:
        return not self.missing and self.total <= self.goal

    def line(self) -> str:
        if self.missing:
            return f"no cAdvisor CPU series for {', '.join(self.missing)}: no verdict"
        state = "meets" if self.ok else "misses"
        return f"total {self.total:.2f} % of one core: {state} the goal (<= {self.goal:g} %)"


def verdict(cpu: dict[str, float], services: Sequence[str], goal: float) -> Verdict:
    """Sum of the services' CPU against the goal; a service without a series fails the verdict,
    since its cost is unknown rather than zero."""
    missing = tuple(s for s in services if s not in cpu)
    return Verdict(sum(cpu.get(s, 0.0) for s in services), missing, goal)


class Lab:
    """The two HTTP APIs the benchmark talks to: Prometheus's query API and the Locust master's."""

    def __init__(self, prometheus_url: str, locust_url: str) -> None:
        self.prometheus = prometheus_url.rstrip("/")
        self.locust = locust_url.rstrip("/")

    def query(self, expr: str, at: float) -> Any:
        params = {"query": expr, "time": f"{at:.3f}"}
        response = httpx.get(f"{self.prometheus}/api/v1/query", params=params, timeout=30)
        response.raise_for_status()
        body = response.json()
        if body.get("status") != "success":
            raise RuntimeError(f"{expr}: {body.get('error')}")
        return body["data"]

    def locust_call(self, path: str, form: dict[str, str] | None = None) -> Any:
        url = f"{self.locust}{path}"
        response = httpx.post(url, data=form, timeout=30) if form is not None else httpx.get(url)
        response.raise_for_status()
        return response.json()

    def wait_for_workers(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.locust_call("/stats/requests").get("workers"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no Locust worker connected to {self.locust} in {timeout:g} s")
            time.sleep(1)

    def swarm(self, users: int, run_time_s: int) -> None:
        """The master's own options (the default --mix on a fresh lab); the run time
        bounds the traffic even if this process dies."""
        form = {"user_count": str(users), "spawn_rate": str(users), "run_time": f"{run_time_s}s"}
        reply = self.locust_call("/swarm", form)
        if not reply.get("success"):
            raise RuntimeError(f"Locust refused the swarm: {reply}")


def report(lab: Lab, project: str, window_s: int, end: float, goal: float) -> Verdict:
    cpu_expr = cpu_query(project, MONITORING, window_s)
    print(f"CPU, % of one core (cAdvisor, rate over the {window_s} s window):\n  {cpu_expr}")
    cpu = by_label(lab.query(cpu_expr, end), SERVICE_LABEL)
    for service in MONITORING:
        figure = f"{cpu[service]:6.2f} %" if service in cpu else "   no series"
        print(f"  {service:14} {figure}")
    result = verdict(cpu, MONITORING, goal)
    print(result.line())
    samples = by_label(lab.query(scrape_query("scrape_samples_scraped", window_s), end), "job")
    durations = by_label(lab.query(scrape_query("scrape_duration_seconds", window_s), end), "job")
    print(f"\nper target, window averages:\n  {'job':14} {'samples/scrape':>14} {'duration':>10}")
    for job in sorted(samples):
        print(f"  {job:14} {samples[job]:14.0f} {1000 * durations.get(job, 0.0):7.1f} ms")
    appended = lab.query(appended_query(window_s), end)["result"]
    if appended:
        print(f"samples appended/s: {float(appended[0]['value'][1]):.0f}")
    return result


def main(argv: list[str] | None = None) -> int:
    prog = "wirelab perf monitoring"
    args = parser(prog, __doc__, "WIRELAB_MONITORING").parse_args(argv)
    lab = Lab(args.prometheus_url, args.locust_url)
    lab.wait_for_workers()
    lab.swarm(args.users, args.warmup + args.seconds + SETTLE_SECONDS + 30)
    try:
        time.sleep(args.warmup)
        start = time.time()
        time.sleep(args.seconds)
        end = time.time()
        time.sleep(SETTLE_SECONDS)
        stats = lab.locust_call("/stats/requests")
    finally:
        lab.locust_call("/stop", {})
    print(f"load: {args.users} users, {stats.get('total_rps', 0):.0f} requests/s at the end, "
          f"fail ratio {stats.get('fail_ratio', 0):.3f}")  # fmt: skip
    result = report(lab, args.project, round(end - start), end, args.goal)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the order chain over REST, gRPC and AMQP at the study's loads (docs/broker.md).

Against a running lab with the three arms (`make lab TOPOLOGY=order-chain PROFILES=amqp`):
at each load (10 / 100 / 300 concurrent orders: a closed loop, as the study ran it), each arm in
turn, the arms' order rotating from one load to the next, wirelab-loadgen in closed mode
(wirelab_bench.loadgen) sends orders with 100 ms of work per service, a 400 ms floor, for
--seconds. An order answered with an error or later than 900 ms is failed. Per run it prints
confirmed orders/s, p50/p95/p99, failed orders, the CPU of the arm's four services per confirmed
order and, for the AMQP arm, the broker's, each from cAdvisor above the idle rate measured first;
then writes the rows as CSV.

The fire-and-forget shape (start the lab with WIRELAB_AMQP_SHAPE=fire-and-forget): the AMQP
arm's edge then answers once every queue has the order, so the generator's figures are
acceptances; the confirmations (all three replies in) are read from the edge's /metrics after
each run, once they stand still, and printed beside them: confirmed orders/s, confirmation
p50/p95/p99 from the order's arrival, and how many were slower than the threshold (at the
histogram's next bound).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from wirelab_bench.knobs import parser
from wirelab_bench.loadgen import ClosedRun, run_closed
from wirelab_bench.promql import SERVICE_LABEL
from wirelab_locust.content import order_request

from wirelab_perf import write_rows
from wirelab_perf.confirmations import NONE, Confirmations, between, read, settled
from wirelab_perf.locust_overhead import exit_on_sigterm

ARMS = ("rest", "grpc", "amqp")
CONFIRMATION_COLUMNS = tuple(f"confirmation_{f}" for f in Confirmations.__dataclass_fields__)
HOPS = ("product", "customer", "shipping")
BROKER = "rabbitmq"
# cAdvisor refreshes every 5 s (up to 15 s when idle) and Prometheus scrapes it every 5 s.
FRESH_SAMPLE_TIMEOUT = 40.0


def services(arm: str) -> tuple[str, ...]:
    """The compose services of an arm: its edge and its three hops."""
    return (arm, *(f"{arm}-{hop}" for hop in HOPS))


@dataclass(frozen=True)
class CpuSample:
    """Each service's containers' CPU seconds so far (service -> cAdvisor's container id ->
    seconds) and the time cAdvisor measured them (per service)."""

    seconds: dict[str, dict[str, float]]
    at: dict[str, float]

    def increase(self, later: CpuSample, name: str) -> float:
        """CPU seconds ``name``'s containers spent from this sample to ``later``: each
        container's own increase, summed. A service's sum would fall when a container is
        recreated (cAdvisor drops the old one's counter) and read as negative CPU; a container
        that started in between counts whole, and one that is gone counts nothing."""
        before = self.seconds.get(name, {})
        return sum(s - before.get(c, 0.0) for c, s in later.seconds.get(name, {}).items())


class Cpu:
    """Container CPU from cAdvisor through Prometheus, per compose service.

    cAdvisor stamps each sample with the time it measured it, so a window is the span between
    two such stamps, not between two reads: a run's CPU is the counter's increase over a window
    that contains the run, less the idle rate over the rest of that window.
    """

    def __init__(self, prometheus: str, names: Sequence[str]) -> None:
        self.prometheus = prometheus.rstrip("/")
        self.names = tuple(names)
        self.idle: dict[str, float] = {}

    def _query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        url = f"{self.prometheus}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.load(response)
        return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]

    def sample(self) -> CpuSample:
        selector = f'container_cpu_usage_seconds_total{{{SERVICE_LABEL}=~"{"|".join(self.names)}"}}'
        seconds: dict[str, dict[str, float]] = {}
        for labels, value in self._query(f"sum by ({SERVICE_LABEL}, id) ({selector})"):
            seconds.setdefault(labels.get(SERVICE_LABEL, ""), {})[labels.get("id", "")] = value
        at_query = f"max by ({SERVICE_LABEL}) (timestamp({selector}))"
        at = {labels.get(SERVICE_LABEL, ""): value for labels, value in self._query(at_query)}
        missing = set(self.names) - set(seconds)
        if missing:
            raise RuntimeError(f"cAdvisor has no CPU for {sorted(missing)} in {self.prometheus}")
        return CpuSample(seconds, at)

    def after(self, ended: float) -> CpuSample:
        """The first sample of every service measured after ``ended`` (epoch seconds)."""
        deadline = time.monotonic() + FRESH_SAMPLE_TIMEOUT
        while True:
            now = self.sample()
            if all(now.at[name] > ended for name in self.names):
                return now
            if time.monotonic() > deadline:
                raise RuntimeError(f"no fresh cAdvisor sample within {FRESH_SAMPLE_TIMEOUT:g} s")
            time.sleep(1)

    def measure_idle(self, seconds: float) -> None:
        first = self.sample()
        time.sleep(seconds)
        last = self.after(max(first.at.values()) + seconds / 2)
        self.idle = {n: _rate(first, last, n) for n in self.names}

    def used(self, first: CpuSample, last: CpuSample, name: str) -> float:
        """CPU seconds ``name`` spent between two samples above its idle rate."""
        span = last.at[name] - first.at[name]
        return first.increase(last, name) - self.idle.get(name, 0.0) * span


def _rate(first: CpuSample, last: CpuSample, name: str) -> float:
    span = last.at[name] - first.at[name]
    return first.increase(last, name) / span if span > 0 else 0.0


def per_order(cpu_seconds: float, run: ClosedRun, seconds: int) -> float:
    """Milliseconds of CPU per confirmed order (NaN when none was confirmed)."""
    confirmed = run.confirmed_per_s * seconds
    return 1000 * cpu_seconds / confirmed if confirmed > 0 else float("nan")


def rotation(arms: Sequence[str], index: int) -> list[str]:
    """The arms starting with the ``index``-th: each arm leads one load in three."""
    shift = index % len(arms)
    return [*arms[shift:], *arms[:shift]]


def main(argv: list[str] | None = None) -> int:
    args = parser("wirelab perf orderchain", __doc__, "WIRELAB_ORDERCHAIN")
    ns = args.parse_args(argv)
    try:
        loads = [int(x) for x in ns.loads.split(",")]
    except ValueError:
        args.error(f"--loads must be whole numbers, got {ns.loads!r}")
    if not loads or min(loads) <= 0:
        args.error(f"--loads must be positive, got {ns.loads!r}")
    arms = [a for a in ns.arms.split(",") if a]
    if not arms or set(arms) - set(ARMS):
        args.error(f"--arms must be some of {', '.join(ARMS)}, got {ns.arms!r}")
    if shutil.which(ns.loadgen) is None:
        print(f"no wirelab-loadgen at {ns.loadgen}: make tools")
        return 2
    exit_on_sigterm()
    body = order_request(ns.work_ms)
    targets = {"rest": ns.rest, "grpc": ns.grpc, "amqp": ns.amqp}
    # The generator speaks HTTP to the REST edge and gRPC to the other two.
    protocol_of = {"rest": "rest", "grpc": "grpc", "amqp": "grpc"}
    # The broker only with the AMQP arm: without it the lab may run no broker at all.
    broker = [BROKER] if "amqp" in arms else []
    cpu = Cpu(ns.prometheus, [s for arm in arms for s in services(arm)] + broker)
    print(f"idle CPU over {ns.idle_seconds} s ...", flush=True)
    cpu.measure_idle(ns.idle_seconds)
    rows = []
    print(f"{'arm':5} {'users':>5} {'confirmed/s':>11} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
          f" {'failed':>6} {'arm CPU ms/order':>16} {'broker CPU ms/order':>19}")  # fmt: skip
    for i, users in enumerate(loads):
        for arm in rotation(arms, i):
            first = cpu.sample()
            before = read(ns.amqp_metrics) if arm == "amqp" else []
            run = run_closed(
                ns.loadgen, protocol_of[arm], targets[arm], body, users, ns.seconds, ns.fail_over_ms
            )
            confirmed = NONE
            if before and read(ns.amqp_metrics) != before:  # fire-and-forget: they moved
                confirmed = between(before, settled(ns.amqp_metrics), ns.fail_over_ms)
            last = cpu.after(time.time())
            arm_cpu = sum(cpu.used(first, last, s) for s in services(arm))
            broker_cpu = cpu.used(first, last, BROKER) if arm == "amqp" else float("nan")
            row = {
                "arm": arm,
                **asdict(run),
                "arm_cpu_ms_per_order": per_order(arm_cpu, run, ns.seconds),
                "broker_cpu_ms_per_order": per_order(broker_cpu, run, ns.seconds),
                **dict(zip(CONFIRMATION_COLUMNS, asdict(confirmed).values(), strict=True)),
            }
            rows.append(row)
            print(
                f"{arm:5} {users:5d} {run.confirmed_per_s:11.1f} {run.p50_ms:8.1f}"
                f" {run.p95_ms:8.1f} {run.p99_ms:8.1f} {run.failed:6d}"
                f" {row['arm_cpu_ms_per_order']:16.2f} {row['broker_cpu_ms_per_order']:19.2f}",
                flush=True,
            )
            if confirmed.confirmed > 0:
                print(
                    f"{'':5} {'':5} fire-and-forget: the line above counts acceptances;"
                    f" confirmed {confirmed.confirmed / ns.seconds:.1f}/s, confirmation p50"
                    f" {confirmed.p50_ms:.1f} p95 {confirmed.p95_ms:.1f} p99"
                    f" {confirmed.p99_ms:.1f} ms, {confirmed.over_bound:.0f} over"
                    f" {confirmed.bound_ms:.0f} ms",
                    flush=True,
                )
    write_rows(Path(ns.csv), rows)
    for users in loads:
        at = {r["arm"]: r for r in rows if r["users"] == users}
        ratios = ", ".join(
            f"gRPC/{other} {at['grpc']['confirmed_per_s'] / at[other]['confirmed_per_s']:.2f}"
            for other in ("rest", "amqp")
            if "grpc" in at and other in at and at[other]["confirmed_per_s"] > 0
        )
        print(f"{users} users: confirmed orders {ratios or '(no gRPC arm to compare with)'}")
    print(f"rows in {ns.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

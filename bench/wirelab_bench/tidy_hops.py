"""A unary cell's figures against its topology: the work floor, and the edge's outgoing calls."""

from __future__ import annotations

import math
from typing import Any

from wirelab_bench.histo import Snapshot, buckets, quantile, total
from wirelab_bench.promql import SERVICE_LABEL
from wirelab_bench.scenario import Cell
from wirelab_bench.topology import ONE_HOP, work_floor_ms

NAN = math.nan
HOP_COLUMNS = (
    "hop_peers",
    "hop_calls",
    "hop_calls_per_order",
    "hop_error_pct",
    "hop_mean_ms",
    "hop_p50_ms",
    "hop_p99_ms",
)


def mean_ms(snap: Snapshot | None, histogram: str, **match: str) -> float:
    """Sum over count of a histogram's window (count from its +Inf bucket, read in the same
    scrape as its sum); NaN without calls."""
    cum = buckets(snap, histogram, **match) if snap is not None else []
    if snap is None or not cum or cum[-1][1] <= 0:
        return NAN
    return 1000 * total(snap, f"{histogram}_sum", **match) / cum[-1][1]


def floor_columns(
    cell: Cell, topology: str, client: Snapshot | None, fanout: str = "sequential"
) -> dict[str, Any]:
    """``client_mean_ms`` (Locust's, end to end), ``work_floor_ms`` (the work an order waits
    for, topology.work_floor_ms, given the edge's ``fanout``) and ``overhead_above_floor_ms``:
    the client-side MEAN minus the floor, what the protocols, the hops and queueing add; and
    ``fanout`` itself. Unary cells only."""
    pk = {"protocol": cell.protocol, "kind": cell.kind}
    client_mean = mean_ms(client, "client_duration", **pk)
    if cell.kind != "unary":
        return {
            "client_mean_ms": client_mean,
            "fanout": fanout,
            "work_floor_ms": NAN,
            "overhead_above_floor_ms": NAN,
        }
    floor = work_floor_ms(topology, cell.group.work_ms, fanout)
    return {
        "client_mean_ms": client_mean,
        "fanout": fanout,
        "work_floor_ms": floor,
        "overhead_above_floor_ms": client_mean - floor,
    }


def hop_columns(cell: Cell, topology: str, edge: Snapshot | None, orders: float) -> dict[str, Any]:
    """The edge's calls to its downstreams over the window, summed over them: how many
    (``hop_calls``, per order the edge served), how many failed, their mean, p50 and p99 as the
    edge timed them. NaN (and no peers) outside a topology's unary cells or without the edge's
    metrics; ``orders`` is the edge's served count."""
    out: dict[str, Any] = dict.fromkeys(HOP_COLUMNS, NAN)
    out["hop_peers"] = ""
    if topology == ONE_HOP or cell.kind != "unary" or edge is None:
        return out
    pk = {"protocol": cell.protocol, "kind": cell.kind}
    calls = total(edge, "hop_requests", **pk)
    ok = total(edge, "hop_requests", outcome="ok", **pk)
    cum = buckets(edge, "hop_duration", **pk)
    peers = {dict(labels).get("peer", "") for name, labels in edge if name == "hop_requests"}
    out |= {
        "hop_peers": ",".join(sorted(peers - {""})),
        "hop_calls": calls,
        "hop_calls_per_order": calls / orders if orders > 0 else NAN,
        "hop_error_pct": 100 * (calls - ok) / calls if calls > 0 else NAN,
        "hop_mean_ms": mean_ms(edge, "hop_duration", **pk),
        "hop_p50_ms": quantile(0.5, cum) * 1000,
        "hop_p99_ms": quantile(0.99, cum) * 1000,
    }
    return out


# The AMQP arm's broker (compose service rabbitmq): its CPU is part of what an order costs there.
BROKER = "rabbitmq"
# The cluster's load balancer, shared by the arms of one runtime (compose service lb, lb-node).
BALANCER = "lb"


def in_arm(cell: Cell, service: str) -> bool:
    """Whether compose service ``service`` is one of the cell's arm: its edge (``rest``,
    ``grpc-node``) or a hop of that edge's (``rest-b``, ``grpc-node-shipping``); never the
    other runtime's (``rest-node-b`` is not the Python REST arm's)."""
    edge = cell.protocol if cell.runtime == "python" else f"{cell.protocol}-{cell.runtime}"
    if service == edge:
        return True
    if not service.startswith(f"{edge}-"):
        return False
    return cell.runtime != "python" or not service.startswith(f"{edge}-node")


def _per_service(containers: Snapshot, name: str) -> dict[str, float]:
    got: dict[str, float] = {}
    for (metric, labels), v in containers.items():
        if metric == name:  # one delta (or peak) per container: a service sums them
            svc = dict(labels).get(SERVICE_LABEL, "")
            got[svc] = got.get(svc, 0.0) + v
    return got


def container_rows(
    cell: Cell, topology: str, containers: Snapshot | None, seconds: float, orders: float
) -> list[dict[str, Any]]:
    """What each container on the cell's path used over the window (rows of containers.csv):
    CPU per order the edge served, cores (CPU-seconds per second), the share of its CPU limit's
    periods in which the limit held it back, and its peak memory. The path is the arm's own
    services, the AMQP arm's broker and the cluster's balancer, so a report can say which
    container ran out of what when an arm collapses. None outside a topology or without a
    cAdvisor scrape in the window."""
    if topology == ONE_HOP or containers is None or seconds <= 0:
        return []
    cpu = _per_service(containers, "container_cpu_seconds")
    periods = _per_service(containers, "container_cpu_periods")
    throttled = _per_service(containers, "container_cpu_throttled_periods")
    memory = _per_service(containers, "container_memory")
    balancer = BALANCER if cell.runtime == "python" else f"{BALANCER}-{cell.runtime}"
    rows = []
    for svc in sorted(cpu):
        if in_arm(cell, svc) or svc == balancer or (cell.protocol == "amqp" and svc == BROKER):
            rows.append(
                {
                    "cell_id": cell.cell_id,
                    "service": svc,
                    "cpu_ms_per_order": 1000 * cpu[svc] / orders if orders > 0 else NAN,
                    "cores": cpu[svc] / seconds,
                    "throttled_pct": (
                        100 * throttled.get(svc, 0.0) / periods[svc] if periods.get(svc) else NAN
                    ),
                    "memory_peak_mib": memory[svc] / 2**20 if svc in memory else NAN,
                }
            )
    return rows


def chain_columns(
    cell: Cell, topology: str, containers: Snapshot | None, orders: float
) -> dict[str, float]:
    """Container CPU per order the edge served, for the whole arm (``chain_cpu_s_per_request``:
    the edge, its own hop services, named ``<arm>-*``, and for the AMQP arm the broker) and for
    the broker alone. A service the arms share (the cluster's lb) is in neither. NaN outside a
    topology, or when no cAdvisor scrape landed in the window."""
    out = {"chain_cpu_s_per_request": NAN, "broker_cpu_s_per_request": NAN}
    if topology == ONE_HOP or containers is None or orders <= 0:
        return out
    cpu = _per_service(containers, "container_cpu_seconds")
    mine = [v for svc, v in cpu.items() if in_arm(cell, svc)]
    broker = cpu.get(BROKER, 0.0) if cell.protocol == "amqp" else 0.0
    if sum(mine) > 0:
        out["chain_cpu_s_per_request"] = (sum(mine) + broker) / orders
    if broker > 0:
        out["broker_cpu_s_per_request"] = broker / orders
    return out


def replica_rows(cell: Cell, replicas: Snapshot | None) -> list[dict[str, Any]]:
    """Orders each hop service's replica served over the window, on the cell's protocol (rows
    of replicas.csv; from Prometheus, which scrapes every replica as its own instance)."""
    rows = []
    for (name, labels), served in sorted((replicas or {}).items()):
        d = dict(labels)
        if name == "replica_requests" and d.get("protocol") == cell.protocol:
            rows.append(
                {
                    "cell_id": cell.cell_id,
                    "service": d.get("service", ""),
                    "instance": d.get("instance", ""),
                    "requests": served,
                }
            )
    return rows

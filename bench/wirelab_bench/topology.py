"""Topologies a scenario can need: each one's work floor, and the edges' downstreams read live."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpx

from wirelab_bench.prom import Prometheus
from wirelab_bench.promql import TOPOLOGY_EXPORTS, Sample
from wirelab_bench.scrape import scrape

ONE_HOP = "one-hop"
# An edge with downstreams pre-initialises this family for each of them (peer = host called).
PEERS_METRIC = "wirelab_client_requests_total"


@dataclass(frozen=True)
class Topology:
    """What a topology file (topologies/<name>.yaml) wires behind each edge."""

    downstreams: int  # services each edge calls
    works: int  # services whose work_ms one order waits for, one after another


# The floor of an order is works x work_ms: what the wiring makes an order wait for with zero
# protocol cost. Taken from the topology files' knobs (docs/topologies.md), not measured.
TOPOLOGIES: dict[str, Topology] = {
    # Locust -> the edge, which does work_ms itself.
    ONE_HOP: Topology(downstreams=0, works=1),
    # A relays (WIRELAB_LOCAL_WORK=off), B does work_ms.
    "a-to-b": Topology(downstreams=1, works=1),
    # A relays to lb (or, client-side balanced, to grpc-b), one replica of B does work_ms.
    "cluster": Topology(downstreams=1, works=1),
    # The order service's own work_ms, then product, customer and shipping in turn: the study's
    # 4 x 100 ms (the file's default WIRELAB_FANOUT=sequential).
    "order-chain": Topology(downstreams=3, works=4),
}


class TopologyError(Exception):
    """The lab runs another topology than the scenario needs; the message says how to start it."""


# Fan-out modes whose work all runs at once (services/wirelab/hops/relay.py): the hop's own
# work and every downstream's together, so an order waits for one work_ms, not each in turn.
AT_ONCE = frozenset({"parallel", "split"})


def work_floor_ms(topology: str, work_ms: int, fanout: str = "sequential") -> float:
    """What an order waits for with zero protocol cost: each work_ms in turn, or one when the
    edge's ``fanout`` runs them all at once (its wirelab_server_info says which)."""
    works = TOPOLOGIES[topology].works
    return float((min(works, 1) if fanout in AT_ONCE else works) * work_ms)


def peers_in(samples: Iterable[Sample]) -> list[str]:
    """The downstreams an edge's /metrics names (peer values of its outgoing-call counter)."""
    return sorted({lb["peer"] for n, lb, _ in samples if n == PEERS_METRIC and lb.get("peer")})


@dataclass
class Peers:
    """Each edge's downstreams (None: unknown) and where that was read, or why it could not be."""

    found: dict[str, list[str] | None]
    source: dict[str, str]


def edge_peers(
    protocols: Iterable[str], urls: Mapping[str, str], prometheus: Prometheus | None
) -> Peers:
    """Read each edge's downstreams from its /metrics, else from Prometheus (the same series)."""
    out = Peers({}, {})
    for proto in protocols:
        out.found[proto], out.source[proto] = None, "no direct scrape and no Prometheus"
        if proto in urls:
            try:
                out.found[proto] = peers_in(scrape(urls[proto], proto, names=(PEERS_METRIC,)))
                out.source[proto] = "scrape"
                continue
            except (httpx.HTTPError, ValueError) as exc:
                out.source[proto] = f"{urls[proto]}: {type(exc).__name__}: {exc}"
        if prometheus is not None:
            try:
                series = prometheus.instant(TOPOLOGY_EXPORTS["hop_requests"].promql)
            except (httpx.HTTPError, ValueError, KeyError) as exc:
                out.source[proto] += f"; Prometheus: {type(exc).__name__}: {exc}"
                continue
            # The export sums by protocol: an edge calls downstreams of its own protocol only.
            mine = [lb for lb in series if lb.get("protocol") == proto]
            out.found[proto] = sorted({lb["peer"] for lb in mine if lb.get("peer")})
            out.source[proto] = "prometheus"
    return out


def refusal(scenario: str, topology: str, peers: Peers) -> str | None:
    """Why ``scenario`` must not run on this lab (its figures would be labelled with the wrong
    topology), or None. An edge whose downstreams are unknown is not held against it."""
    want = TOPOLOGIES[topology].downstreams
    for proto, found in peers.found.items():
        if found is None:
            continue
        profile = " PROFILES=amqp" if proto == "amqp" else ""
        profile = " PROFILES=node" if proto.endswith("-node") else profile
        start = f"start it with `make lab TOPOLOGY={topology}{profile}`"
        names = ", ".join(found)
        if topology == ONE_HOP and found:
            return (
                f"scenario {scenario} measures one hop, but the {proto} edge calls downstreams"
                f" ({names}): its figures would be labelled one-hop. Start the plain lab with"
                " `make lab` (TOPOLOGY=one-hop), or run the scenario of the running topology"
            )
        if topology != ONE_HOP and not found:
            return (
                f"scenario {scenario} needs topology {topology}, but the {proto} edge calls no"
                f" downstream (the plain lab): {start}"
            )
        if len(found) != want:
            return (
                f"scenario {scenario} needs topology {topology} ({want} downstream(s) per edge),"
                f" but the {proto} edge calls {len(found)} ({names}): {start}"
            )
    return None

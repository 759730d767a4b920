"""A benchmark scenario as values: groups of load levels, kinds and payloads, and its cells."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path

from wirelab.contract import KINDS_BY_PROTOCOL

# Per cell beyond its phases (Locust start and stop, health and parity checks, the export delay
# and the Prometheus export) when the scenario has no complete run in the results folder to
# measure it from (wirelab_bench.cellcost): `make bench SCENARIO=smoke` three times on an idle
# lab on this project's 2-core machine took 1:15-1:22 for 16 cells of 2 s (three runs, 28 Nov),
# (75..82 s - 32 s) / 16 = 2.7..3.1 s a cell; 8.8 s was measured before Locust's stop stopped
# hanging (docs/measurements.md). A run corrects it from its own cells (progress.Estimate).
CELL_OVERHEAD_S = 3.0
# What a scenario is for (its key ``purpose``): a comparison of the protocols, or a check that
# the pipeline runs end to end, whose report states no comparison (its windows are too short).
COMPARISON, PIPELINE_CHECK = "comparison", "pipeline-check"
PURPOSES = (COMPARISON, PIPELINE_CHECK)
# The services' runtimes a scenario can measure (the compose profile node adds the Node.js ones).
RUNTIMES = ("python", "node")
# Unary orders carry no sized payload: one cell per load level, payload column 0.
UNSIZED_KINDS = frozenset({"unary"})
# The load generators a group can run on: Locust (every kind), or wirelab-loadgen, the precise
# one (loadgen/; the small order call only), which times the same call without Python's cost.
GENERATORS = ("locust", "loadgen")
GENERATOR_KINDS = {"locust": None, "loadgen": frozenset({"unary"})}


@dataclass(frozen=True)
class Load:
    """One load level: closed-loop users, optionally paced to a total target rate."""

    label: str
    users: int
    spawn_rate: float
    rate: float | None = None


@dataclass(frozen=True)
class Group:
    """Settings shared by a block of cells; a scenario without [[groups]] has one implicit group."""

    name: str
    kinds: tuple[str, ...]
    protocols: tuple[str, ...]
    loads: tuple[Load, ...]
    payload_sizes: tuple[int, ...]
    warmup_s: float
    duration_s: float
    cooldown_s: float
    failure_threshold_ms: float
    stream_count: int
    stream_interval_ms: int
    work_ms: int
    # A profile of toxiproxy/profiles.toml between the load generator and the services, or
    # "direct" (no proxy); wirelab_bench.network.
    network: str = "direct"
    # The profile on a topology's hops (edge -> downstream), when it differs from ``network``'s
    # (a client beside its edge, the edge a region away from its downstreams); "" = network's.
    hop_network: str = ""
    # The services' runtimes, each measured on the same cells: python, node (compose profile
    # node; docs/node.md).
    runtimes: tuple[str, ...] = ("python",)
    # Which load generator drives the group's cells (GENERATORS): its users are Locust's users or
    # wirelab-loadgen's workers. With a load's rate Locust paces its users (a closed loop still);
    # wirelab-loadgen starts calls on a schedule whatever the service does (an open loop).
    generator: str = "locust"
    # wirelab-loadgen's open-loop arrivals (wirelab_bench.loadgen.ARRIVALS): evenly spaced, or a
    # Poisson process; Locust has no schedule to shape.
    arrivals: str = "constant"
    # How the group's REST cells reach the REST service (wirelab_locust.options.REST_HTTP):
    # HTTP/1.1, or h2c, cleartext HTTP/2 with prior knowledge, which the REST service speaks on
    # Granian (WIRELAB_REST_HTTP=2; docs/http2.md). The group's other protocols ignore it.
    rest_http: str = "1.1"

    @property
    def hops_network(self) -> str:
        """The profile the hop links carry: ``hop_network``, else the edge's ``network``."""
        return self.hop_network or self.network


@dataclass(frozen=True)
class Gates:
    """Pass/fail thresholds evaluated per measured cell."""

    max_error_ratio: float = 0.01
    max_p99_ms: float | None = None


@dataclass(frozen=True)
class Cell:
    """One measured window: runtime x protocol x kind x load x payload x repetition."""

    index: int
    group: Group
    protocol: str
    kind: str
    load: Load
    payload_bytes: int
    repetition: int
    runtime: str = "python"

    @property
    def cell_id(self) -> str:
        g = self.group
        network = "" if g.network == "direct" else f"_{g.network}"
        if g.hops_network != g.network:
            network += f"_hops-{g.hops_network}"
        # The Python services' cells keep the names they had before runtimes were a dimension.
        runtime = "" if self.runtime == "python" else f"_{self.runtime}"
        generator = "" if g.generator == "locust" else f"_{g.generator}"
        if self.rest_http not in ("", "1.1"):
            generator = f"_{self.rest_http}{generator}"
        if g.arrivals != "constant":
            generator += f"-{g.arrivals}"
        return (
            f"{self.index:03d}_{self.protocol}{runtime}_{self.kind}_{self.load.label}"
            f"_{self.payload_bytes}b{network}{generator}_r{self.repetition}"
        )

    @property
    def rest_http(self) -> str:
        """The HTTP a REST cell speaks (its group's ``rest_http``); empty for other protocols."""
        return self.group.rest_http if self.protocol == "rest" else ""

    @property
    def seconds(self) -> float:
        g = self.group
        return g.warmup_s + g.duration_s + g.cooldown_s


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario file."""

    name: str
    description: str
    path: Path
    repetitions: int
    groups: tuple[Group, ...]
    gates: Gates = field(default_factory=Gates)
    topology: str = "one-hop"  # the wiring the lab must run (wirelab_bench.topology)
    purpose: str = COMPARISON
    # The odd runs of a series (`wirelab bench --runs`) start with the order reversed, so a
    # scenario of one repetition does not always run the same protocol first.
    reversed_order: bool = False

    def cells(self) -> list[Cell]:
        """The run order; odd repetitions reverse the protocol and the runtime order, so neither
        always leads."""
        cells: list[Cell] = []
        for rep in range(self.repetitions):
            ahead = (rep % 2 == 1) == self.reversed_order
            for group in self.groups:
                protocols = group.protocols if ahead else group.protocols[::-1]
                runtimes = group.runtimes if ahead else group.runtimes[::-1]
                for load in group.loads:
                    for kind in group.kinds:
                        sizes = (0,) if kind in UNSIZED_KINDS else group.payload_sizes
                        for size, runtime, proto in product(sizes, runtimes, protocols):
                            if kind in KINDS_BY_PROTOCOL[proto]:
                                at = len(cells)
                                cells.append(Cell(at, group, proto, kind, load, size, rep, runtime))
        return cells

    def runtimes(self) -> tuple[str, ...]:
        """The runtimes the cells need, in run order."""
        return tuple(dict.fromkeys(r for g in self.groups for r in g.runtimes))

    def networks(self) -> tuple[str, ...]:
        """The network profiles the cells need, on the edge or the hop links, in run order
        (``direct`` needs no proxy)."""
        named = (n for g in self.groups for n in (g.network, g.hops_network))
        return tuple(dict.fromkeys(n for n in named if n != "direct"))

    def with_network(self, network: str) -> Scenario:
        """Every group under ``network`` on every link (a run's --network overrides the
        file's, hop links included)."""
        groups = tuple(replace(g, network=network, hop_network="") for g in self.groups)
        return replace(self, groups=groups)

    def with_loads(self, labels: tuple[str, ...]) -> Scenario:
        """Only the load levels named ``labels`` (a run's --loads, e.g. the iit study's Light
        level alone; scenario_file.select_loads checks the names)."""
        groups = tuple(
            replace(g, loads=tuple(x for x in g.loads if x.label in labels)) for g in self.groups
        )
        return replace(self, groups=tuple(g for g in groups if g.loads))

    def estimated_seconds(self, overhead_s: float = CELL_OVERHEAD_S) -> float:
        """The cells' phases plus ``overhead_s`` per cell (wirelab_bench.cellcost measures it)."""
        return sum(c.seconds + overhead_s for c in self.cells())

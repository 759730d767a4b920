"""Scenario files (scenarios/*.toml): parsing, validation with clear errors, and the cell matrix."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from wirelab.metrics import KINDS_BY_PROTOCOL, PROTOCOLS

ALL_KINDS = tuple(dict.fromkeys(k for p in PROTOCOLS for k in KINDS_BY_PROTOCOL[p]))
# Starting and stopping Locust, health and parity checks: measured at about 2.5 s per cell here.
CELL_OVERHEAD_S = 2.5
# Unary orders carry no sized payload: one cell per load level, payload column 0.
UNSIZED_KINDS = frozenset({"unary"})


class ScenarioError(ValueError):
    """A scenario file that cannot be run; the message names the file and the key."""


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


@dataclass(frozen=True)
class Gates:
    """Pass/fail thresholds evaluated per measured cell."""

    max_error_ratio: float = 0.01
    max_p99_ms: float | None = None


@dataclass(frozen=True)
class Cell:
    """One measured window: protocol x kind x load x payload x repetition."""

    index: int
    group: Group
    protocol: str
    kind: str
    load: Load
    payload_bytes: int
    repetition: int

    @property
    def cell_id(self) -> str:
        return (
            f"{self.index:03d}_{self.protocol}_{self.kind}_{self.load.label}"
            f"_{self.payload_bytes}b_r{self.repetition}"
        )

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

    def cells(self) -> list[Cell]:
        """The run order; odd repetitions reverse the protocol order, so neither always leads."""
        cells: list[Cell] = []
        for rep in range(self.repetitions):
            for group in self.groups:
                protocols = group.protocols if rep % 2 == 0 else group.protocols[::-1]
                for load in group.loads:
                    for kind in group.kinds:
                        sizes = (0,) if kind in UNSIZED_KINDS else group.payload_sizes
                        for size in sizes:
                            for proto in protocols:
                                if kind in KINDS_BY_PROTOCOL[proto]:
                                    cells.append(
                                        Cell(len(cells), group, proto, kind, load, size, rep)
                                    )
        return cells

    def estimated_seconds(self) -> float:
        return sum(c.seconds + CELL_OVERHEAD_S for c in self.cells())


_GROUP_KEYS = {
    "name": str,
    "kinds": list,
    "protocols": list,
    "loads": list,
    "payload_sizes": list,
    "warmup_s": (int, float),
    "duration_s": (int, float),
    "cooldown_s": (int, float),
    "failure_threshold_ms": (int, float),
    "stream_count": int,
    "stream_interval_ms": int,
    "work_ms": int,
}
_TOP_KEYS = {"description": str, "repetitions": int, "groups": list, "gates": dict, **_GROUP_KEYS}
_DEFAULTS: dict[str, Any] = {
    "name": "main",
    "protocols": list(PROTOCOLS),
    "payload_sizes": [1024],
    "warmup_s": 5,
    "duration_s": 30,
    "cooldown_s": 2,
    "failure_threshold_ms": 0,
    "stream_count": 100,
    "stream_interval_ms": 0,
    "work_ms": 0,
}


def load_scenario(path: Path) -> Scenario:
    """Read and validate ``path``; every problem raises :class:`ScenarioError` naming the key."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc}") from exc
    return parse_scenario(data, path)


def parse_scenario(data: dict[str, Any], path: Path) -> Scenario:
    where = str(path)
    _check_keys(data, _TOP_KEYS, where)
    base = {**_DEFAULTS, **{k: v for k, v in data.items() if k in _GROUP_KEYS}}
    raw_groups = data.get("groups") or [{}]
    groups = []
    for i, raw in enumerate(raw_groups):
        at = f"{where}: groups[{i}]" if "groups" in data else where
        if not isinstance(raw, dict):
            raise ScenarioError(f"{at}: must be a table")
        _check_keys(raw, _GROUP_KEYS, at)
        merged = {**base, **raw}
        if "groups" in data and "name" not in raw:
            merged["name"] = f"g{i}"
        groups.append(_group(merged, at))
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{where}: group names must be unique, got {names}")
    reps = data.get("repetitions", 1)
    if reps < 1:
        raise ScenarioError(f"{where}: repetitions must be >= 1, got {reps}")
    return Scenario(
        name=path.stem,
        description=data.get("description", ""),
        path=path,
        repetitions=reps,
        groups=tuple(groups),
        gates=_gates(data.get("gates", {}), f"{where}: [gates]"),
    )


def _check_keys(data: dict[str, Any], allowed: dict[str, Any], where: str) -> None:
    for key, value in data.items():
        if key not in allowed:
            raise ScenarioError(f"{where}: unknown key {key!r} (allowed: {', '.join(allowed)})")
        if not isinstance(value, allowed[key]) or isinstance(value, bool):
            raise ScenarioError(f"{where}: {key} has the wrong type ({type(value).__name__})")


def _group(m: dict[str, Any], at: str) -> Group:
    if "kinds" not in m:
        raise ScenarioError(f"{at}: missing key 'kinds' (any of {', '.join(ALL_KINDS)})")
    if "loads" not in m:
        raise ScenarioError(f"{at}: missing key 'loads' (e.g. loads = [{{users = 10}}])")
    kinds = _choices(m["kinds"], ALL_KINDS, "kinds", at)
    protocols = _choices(m["protocols"], PROTOCOLS, "protocols", at)
    sizes = m["payload_sizes"]
    if not sizes or not all(isinstance(s, int) and s > 0 for s in sizes):
        raise ScenarioError(f"{at}: payload_sizes must be a non-empty list of positive integers")
    for key in ("warmup_s", "cooldown_s", "failure_threshold_ms", "stream_interval_ms", "work_ms"):
        if m[key] < 0:
            raise ScenarioError(f"{at}: {key} must be >= 0, got {m[key]}")
    if m["duration_s"] <= 0:
        raise ScenarioError(f"{at}: duration_s must be > 0, got {m['duration_s']}")
    if m["stream_count"] < 1:
        raise ScenarioError(f"{at}: stream_count must be >= 1, got {m['stream_count']}")
    loads = tuple(_load(raw, f"{at}: loads[{i}]") for i, raw in enumerate(m["loads"]))
    if not loads:
        raise ScenarioError(f"{at}: loads must not be empty")
    labels = [ld.label for ld in loads]
    if len(set(labels)) != len(labels):
        raise ScenarioError(f"{at}: load labels must be unique, got {labels}")
    return Group(
        name=m["name"],
        kinds=kinds,
        protocols=protocols,
        loads=loads,
        payload_sizes=tuple(sizes),
        warmup_s=float(m["warmup_s"]),
        duration_s=float(m["duration_s"]),
        cooldown_s=float(m["cooldown_s"]),
        failure_threshold_ms=float(m["failure_threshold_ms"]),
        stream_count=m["stream_count"],
        stream_interval_ms=m["stream_interval_ms"],
        work_ms=m["work_ms"],
    )


def _choices(values: list[Any], allowed: tuple[str, ...], key: str, at: str) -> tuple[str, ...]:
    if not values:
        raise ScenarioError(f"{at}: {key} must not be empty")
    for v in values:
        if v not in allowed:
            raise ScenarioError(f"{at}: unknown {key} value {v!r} (allowed: {', '.join(allowed)})")
    return tuple(dict.fromkeys(values))


def _load(raw: Any, at: str) -> Load:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{at}: must be a table like {{users = 10, spawn_rate = 5}}")
    _check_keys(
        raw, {"label": str, "users": int, "spawn_rate": (int, float), "rate": (int, float)}, at
    )
    users = raw.get("users")
    if not isinstance(users, int) or users < 1:
        raise ScenarioError(f"{at}: users must be an integer >= 1")
    spawn_rate = float(raw.get("spawn_rate", users))
    rate = raw.get("rate")
    if spawn_rate <= 0 or (rate is not None and rate <= 0):
        raise ScenarioError(f"{at}: spawn_rate and rate must be > 0")
    default_label = f"u{users}" if rate is None else f"u{users}r{rate:g}"
    return Load(raw.get("label", default_label), users, spawn_rate, rate)


def _gates(raw: dict[str, Any], at: str) -> Gates:
    _check_keys(raw, {"max_error_ratio": (int, float), "max_p99_ms": (int, float)}, at)
    gates = replace(Gates(), **raw)
    if not 0 <= gates.max_error_ratio <= 1:
        raise ScenarioError(f"{at}: max_error_ratio must be within 0..1")
    if gates.max_p99_ms is not None and gates.max_p99_ms <= 0:
        raise ScenarioError(f"{at}: max_p99_ms must be > 0")
    return gates


def resolve(name_or_path: str, scenarios_dir: Path) -> Path:
    """A scenario name (``smoke``) maps to scenarios/<name>.toml; anything else is a path."""
    direct = Path(name_or_path)
    if direct.suffix == ".toml" or direct.exists():
        return direct
    candidate = scenarios_dir / f"{name_or_path}.toml"
    if not candidate.exists():
        known = sorted(p.stem for p in scenarios_dir.glob("*.toml"))
        raise ScenarioError(f"no scenario {name_or_path!r} in {scenarios_dir} (known: {known})")
    return candidate

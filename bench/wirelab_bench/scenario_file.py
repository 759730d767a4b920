"""Scenario files (scenarios/*.toml): parsing and validation with errors that name the key."""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from wirelab.contract import ALL_KINDS, ARMS, EDGE_PROTOCOLS
from wirelab_locust.options import REST_HTTP

from wirelab_bench.knobs import NETWORK_PROFILES
from wirelab_bench.loadgen import ARRIVALS
from wirelab_bench.network import DIRECT, NetworkError, load_profiles
from wirelab_bench.scenario import (
    COMPARISON,
    GENERATOR_KINDS,
    GENERATORS,
    PURPOSES,
    RUNTIMES,
    Gates,
    Group,
    Load,
    Scenario,
)
from wirelab_bench.topology import ONE_HOP, TOPOLOGIES


class ScenarioError(ValueError):
    """A scenario file that cannot be run; the message names the file and the key."""


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
    "network": str,
    "hop_network": str,
    "runtimes": list,
    "generator": str,
    "arrivals": str,
    "rest_http": str,
}
_TOP_KEYS = {
    "description": str,
    "purpose": str,
    "repetitions": int,
    "topology": str,
    "groups": list,
    "gates": dict,
    **_GROUP_KEYS,
}
_DEFAULTS: dict[str, Any] = {
    "name": "main",
    "protocols": list(EDGE_PROTOCOLS),
    "payload_sizes": [1024],
    "warmup_s": 5,
    "duration_s": 30,
    "cooldown_s": 2,
    "failure_threshold_ms": 0,
    "stream_count": 100,
    "stream_interval_ms": 0,
    "work_ms": 0,
    "network": DIRECT,
    "hop_network": "",
    "runtimes": ["python"],
    "generator": "locust",
    "arrivals": "constant",
    "rest_http": "1.1",
}


def load_scenario(path: Path, networks: Collection[str] | None = None) -> Scenario:
    """Read and validate ``path``; every problem raises :class:`ScenarioError` naming the key.

    ``networks``: the profile names a group may use (default: those of toxiproxy/profiles.toml,
    docs/network.md).
    """
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read scenario: {exc}") from exc
    if networks is None:
        try:
            networks = load_profiles(Path(NETWORK_PROFILES)).keys()
        except NetworkError as exc:
            raise ScenarioError(str(exc)) from exc
    return parse_scenario(data, path, networks)


def parse_scenario(data: dict[str, Any], path: Path, networks: Collection[str] = ()) -> Scenario:
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
        groups.append(_group(merged, at, networks))
    names = [g.name for g in groups]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{where}: group names must be unique, got {names}")
    reps = data.get("repetitions", 1)
    if reps < 1:
        raise ScenarioError(f"{where}: repetitions must be >= 1, got {reps}")
    purpose = data.get("purpose", COMPARISON)
    if purpose not in PURPOSES:
        raise ScenarioError(f"{where}: unknown purpose {purpose!r} (known: {', '.join(PURPOSES)})")
    topology = data.get("topology", ONE_HOP)
    if topology not in TOPOLOGIES:
        known = ", ".join(TOPOLOGIES)
        raise ScenarioError(f"{where}: unknown topology {topology!r} (known: {known})")
    scenario = Scenario(
        name=path.stem,
        description=data.get("description", ""),
        path=path,
        repetitions=reps,
        groups=tuple(groups),
        gates=_gates(data.get("gates", {}), f"{where}: [gates]"),
        topology=topology,
        purpose=purpose,
    )
    check_routes(scenario)
    return scenario


# The AMQP arm runs in this topology only (topologies/order-chain.yaml, profile amqp).
AMQP_TOPOLOGY = "order-chain"


def check_routes(scenario: Scenario) -> None:
    """Refuse a scenario with cells the lab cannot run as labelled. The AMQP arm exists in the
    order chain only (with a network, its edge and broker link go through Toxiproxy: the
    runner checks their proxies are there); the Node.js services run in every topology (each
    file wires them too, with PROFILES=node), without the AMQP arm (Toxiproxy fronts them as it
    fronts the Python ones). A hop_network needs hops: a topology."""
    for g in scenario.groups:
        if g.hop_network and scenario.topology == ONE_HOP:
            raise ScenarioError(
                f"{scenario.path}: group {g.name}: hop_network {g.hop_network!r} needs a topology"
                f" (topology {ONE_HOP} has no hop links; set topology, or use network)"
            )
        if "node" in g.runtimes:
            _check_node(scenario, g)
        if "amqp" in g.protocols and scenario.topology != AMQP_TOPOLOGY:
            raise ScenarioError(
                f"{scenario.path}: group {g.name}: protocol amqp runs in topology"
                f" {AMQP_TOPOLOGY} only (this scenario's is {scenario.topology})"
            )


def _check_keys(data: dict[str, Any], allowed: dict[str, Any], where: str) -> None:
    for key, value in data.items():
        if key not in allowed:
            raise ScenarioError(f"{where}: unknown key {key!r} (allowed: {', '.join(allowed)})")
        if not isinstance(value, allowed[key]) or isinstance(value, bool):
            raise ScenarioError(f"{where}: {key} has the wrong type ({type(value).__name__})")


def _group(m: dict[str, Any], at: str, networks: Collection[str]) -> Group:
    if "kinds" not in m:
        raise ScenarioError(f"{at}: missing key 'kinds' (any of {', '.join(ALL_KINDS)})")
    if "loads" not in m:
        raise ScenarioError(f"{at}: missing key 'loads' (e.g. loads = [{{users = 10}}])")
    kinds = _choices(m["kinds"], ALL_KINDS, "kinds", at)
    protocols = _choices(m["protocols"], ARMS, "protocols", at)
    runtimes = _choices(m["runtimes"], RUNTIMES, "runtimes", at)
    sizes = m["payload_sizes"]
    if not sizes or not all(isinstance(s, int) and s > 0 for s in sizes):
        raise ScenarioError(f"{at}: payload_sizes must be a non-empty list of positive integers")
    for key in ("warmup_s", "cooldown_s", "failure_threshold_ms", "stream_interval_ms", "work_ms"):
        if m[key] < 0:
            raise ScenarioError(f"{at}: {key} must be >= 0, got {m[key]}")
    if m["duration_s"] <= 0:
        raise ScenarioError(f"{at}: duration_s must be > 0, got {m['duration_s']}")
    for key in ("network", "hop_network"):
        if m[key] not in (DIRECT, *networks) and (key == "network" or m[key]):
            known = ", ".join([DIRECT, *networks])
            raise ScenarioError(f"{at}: unknown {key} {m[key]!r} (known: {known})")
    if m["generator"] not in GENERATORS:
        known = ", ".join(GENERATORS)
        raise ScenarioError(f"{at}: unknown generator {m['generator']!r} (known: {known})")
    only = GENERATOR_KINDS[m["generator"]]
    if only is not None and not set(kinds) <= only:
        raise ScenarioError(
            f"{at}: generator {m['generator']} sends the small order call only"
            f" (kinds {', '.join(sorted(only))}); got {', '.join(kinds)}"
        )
    if m["arrivals"] not in ARRIVALS:
        known = ", ".join(ARRIVALS)
        raise ScenarioError(f"{at}: unknown arrivals {m['arrivals']!r} (known: {known})")
    if m["arrivals"] != "constant" and m["generator"] != "loadgen":
        raise ScenarioError(
            f"{at}: arrivals {m['arrivals']} needs generator loadgen (an open loop); Locust paces"
            " its users evenly"
        )
    if m["rest_http"] not in REST_HTTP:
        known = ", ".join(REST_HTTP)
        raise ScenarioError(f"{at}: unknown rest_http {m['rest_http']!r} (known: {known})")
    if m["rest_http"] != "1.1" and "node" in runtimes and "rest" in protocols:
        raise ScenarioError(
            f"{at}: rest_http {m['rest_http']}: the Node.js REST service speaks HTTP/1.1 only"
        )
    if m["generator"] == "loadgen" and "amqp" in protocols:
        raise ScenarioError(f"{at}: generator loadgen calls the rest and grpc arms, not amqp")
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
        network=m["network"],
        hop_network=m["hop_network"],
        runtimes=runtimes,
        generator=m["generator"],
        arrivals=m["arrivals"],
        rest_http=m["rest_http"],
    )


def _check_node(scenario: Scenario, g: Group) -> None:
    where = f"{scenario.path}: group {g.name}: runtime node"
    if "amqp" in g.protocols:
        raise ScenarioError(f"{where} has no AMQP arm (protocols rest and grpc)")


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


def select_loads(scenario: Scenario, labels: str) -> Scenario:
    """``scenario`` with only the comma-separated load ``labels`` (`wirelab bench --loads`); a
    label no group has is an error, not an empty run."""
    wanted = tuple(x.strip() for x in labels.split(",") if x.strip())
    known = {load.label for g in scenario.groups for load in g.loads}
    unknown = [x for x in wanted if x not in known]
    if unknown or not wanted:
        raise ScenarioError(
            f"unknown --loads {labels!r} (the scenario's levels: {', '.join(sorted(known))})"
        )
    return scenario.with_loads(wanted)

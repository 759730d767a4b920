"""The metric contract (the top-level contract/metrics.json) as typed constants: one vocabulary
for the services, Locust, the dashboards generator, the runner and the report notebook."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from wirelab.contract.folder import read

FamilyType = Literal["counter", "gauge", "histogram"]
# Which zero series a family exposes before the first call (the file's "about" says what each is).
Preinitialise = Literal["kind", "stream_kind", "kind_outcome"]
Bounds = tuple[float, ...]


@dataclass(frozen=True)
class Family:
    """One metric family: a counter's name without ``_total``, as prometheus_client takes it."""

    name: str
    type: FamilyType
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()
    preinitialise: Preinitialise | None = None


def _families(
    raw: list[dict[str, Any]], buckets: dict[str, tuple[float, ...]]
) -> dict[str, Family]:
    found = {}
    for f in raw:
        if f["type"] not in ("counter", "gauge", "histogram"):
            raise ValueError(f"{f['name']}: unknown type {f['type']!r}")
        if f.get("preinitialise") not in (None, "kind", "stream_kind", "kind_outcome"):
            raise ValueError(f"{f['name']}: unknown preinitialise {f['preinitialise']!r}")
        found[f["name"]] = Family(
            f["name"],
            f["type"],
            f["help"],
            tuple(f["labels"]),
            buckets[f["buckets"]] if "buckets" in f else (),
            f.get("preinitialise"),
        )
    return found


_DATA: dict[str, Any] = read("metrics.json")

PROTOCOLS: tuple[str, ...] = tuple(_DATA["protocols"])
# The protocols a load generator calls: the edge services' (amqp only runs between services).
EDGE_PROTOCOLS: tuple[str, ...] = tuple(_DATA["edge_protocols"])
# What a load generator can measure (its calls' protocol label), and the protocol each arm's edge
# serves: amqp is measured through a gRPC edge whose downstreams are queues (docs/broker.md).
ARM_EDGES: dict[str, str] = dict(_DATA["arms"])
ARMS: tuple[str, ...] = tuple(ARM_EDGES)
KINDS_BY_PROTOCOL: dict[str, tuple[str, ...]] = {p: tuple(_DATA["kinds"][p]) for p in PROTOCOLS}
# Every kind once, in the order REST lists them (REST has every kind).
ALL_KINDS: tuple[str, ...] = tuple(
    dict.fromkeys(k for p in PROTOCOLS for k in KINDS_BY_PROTOCOL[p])
)
OTHER_KIND: str = _DATA["other_kind"]
# Kinds whose responses are a stream of messages: they also get a time-to-first-message histogram.
STREAM_KINDS: frozenset[str] = frozenset(_DATA["stream_kinds"])
# The RPC each kind calls; the client's REST rows use the same names as its gRPC rows.
CALLS: dict[str, str] = dict(_DATA["calls"])
# One outcome label for both protocols; the raw HTTP status or gRPC status name goes in `code`.
OUTCOMES: tuple[str, ...] = tuple(_DATA["outcomes"])
CANONICAL_CODES: dict[str, dict[str, str]] = {
    p: dict(_DATA["canonical_codes"][p]) for p in PROTOCOLS
}
# A gRPC call abandoned this close to its deadline, or later, timed out (kinds.abandoned).
DEADLINE_SLACK_S: float = _DATA["deadline_slack_ms"] / 1000
GRPC_CLIENT_ERROR_CODES: frozenset[str] = frozenset(_DATA["grpc_client_error_codes"])
# What only a client sees: a failure its own code raised, or no connection at all.
CLIENT_OUTCOMES: tuple[str, ...] = (*OUTCOMES, *_DATA["client_only_outcomes"])
_BUCKETS = {
    name: tuple(float(b) for b in bounds)
    for name, bounds in _DATA["buckets"].items()
    if isinstance(bounds, list)
}
DURATION_BUCKETS: tuple[float, ...] = _BUCKETS["duration"]
SIZE_BUCKETS: tuple[float, ...] = _BUCKETS["size"]
SERVER: dict[str, Family] = _families(_DATA["server"], _BUCKETS)
CLIENT: dict[str, Family] = _families(_DATA["client"], _BUCKETS)


# A pooled HTTP/1.1 connection idle this long is closed by the lab's clients, not reused: the
# servers close one idle for 5 s (the contract's client_idle_note says why).
CLIENT_IDLE_SECONDS: float = _DATA["client_idle_ms"] / 1000


def http_outcome(status: int) -> str:
    """Map an HTTP status (101 for an accepted WebSocket) to the shared outcome label."""
    if status < 400:
        return "ok"
    if status == 499:
        return "cancelled"
    if status in (408, 504):
        return "timeout"
    # 503 is the REST service refusing a call for load (payload budget, concurrency limit):
    # counted as gRPC counts its RESOURCE_EXHAUSTED for the same refusal, so one event reads
    # alike on both sides; the raw code tells a refusal for load from a refusal for size (413).
    if status < 500 or status == 503:
        return "client_error"
    return "server_error"


def grpc_outcome(code_name: str) -> str:
    """Map a gRPC status name (``grpc.StatusCode.X.name``) to the shared outcome label."""
    if code_name == "OK":
        return "ok"
    if code_name == "CANCELLED":
        return "cancelled"
    if code_name == "DEADLINE_EXCEEDED":
        return "timeout"
    if code_name in GRPC_CLIENT_ERROR_CODES:
        return "client_error"
    return "server_error"


def address_of(target: str) -> str:
    """``target`` without its ``#peer`` name (see peer_of): what is actually dialled."""
    return target.partition("#")[0]


def peer_of(address: str) -> str:
    """The ``peer`` label of calls to ``address``: its host name, from a URL
    (``http://rest-b:8000``), a gRPC target (``grpc-b:50051``, ``dns:///grpc-b:50051``,
    ``[::1]:50051``) or a bare host; or the name after ``#`` when the address has one
    (``http://toxiproxy:8101#rest-b``: a hop reached through a proxy keeps the name of the
    service it reaches, docs/network.md)."""
    address, _, named = address.partition("#")
    if named:
        return named
    rest = address.split("://", 1)[-1].lstrip("/")
    host = rest.split("/", 1)[0]
    if host.startswith("["):
        return host[1 : host.index("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


_LAB_KNOBS: list[dict[str, Any]] = [
    k for k in read("knobs-lab.json")["knobs"] if k["part"] == "lab"
]
# Where `make lab` publishes each service on the host by default: the defaults of the knob
# table's WIRELAB_<NAME>_HOST_PORT knobs (compose.yaml's ${WIRELAB_<NAME>_HOST_PORT-<port>}), on
# WIRELAB_BIND's address. The one place Locust's and the runner's default targets come from.
HOST_PORTS: dict[str, int] = {
    k["name"].removesuffix("_host_port"): int(k["default"])
    for k in _LAB_KNOBS
    if k["name"].endswith("_host_port")
}
_BIND: str = next(k["default"] for k in _LAB_KNOBS if k["name"] == "bind")


def host_address(name: str) -> str:
    """``host:port`` where the lab publishes ``name`` (a key of HOST_PORTS) by default."""
    return f"{_BIND}:{HOST_PORTS[name]}"


def host_url(name: str, path: str = "") -> str:
    """``http://host:port`` plus ``path`` where the lab publishes ``name`` by default."""
    return f"http://{host_address(name)}{path}"

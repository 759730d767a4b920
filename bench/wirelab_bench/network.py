"""Network profiles (toxiproxy/profiles.toml) and applying one to the lab's Toxiproxy."""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    import pandas as pd

# A scenario's default: the load generator calls the services, no proxy between them.
DIRECT = "direct"
# The proxies in front of the edges (toxiproxy/toxiproxy.json), one per protocol under test.
# Under a topology Toxiproxy also carries its hops (toxiproxy/<topology>.json): a profile goes on
# every proxy Toxiproxy has, so each hop pays it as the edge does, unless a group gives its hop
# links a profile of their own (hop_network).
PROXIES = ("rest", "grpc")
# The AMQP arm's (toxiproxy/order-chain.json): its gRPC edge's, and the hop link from its order
# service to the broker, which carries all three of its hops (docs/network.md).
AMQP_PROXIES = ("amqp", "amqp-broker")
# Every edge's proxy (toxiproxy/toxiproxy.json: the Node.js services' too; the AMQP arm's in the
# order chain); a proxy of another name carries a hop of a topology (toxiproxy/<topology>.json).
EDGE_PROXIES = (*PROXIES, "rest-node", "grpc-node", "amqp")
_KEYS = {"description": str, "rtt_ms": int, "jitter_ms": int, "bandwidth_kbps": int}


class NetworkError(ValueError):
    """A profile file or profile that cannot be used; the message names the file and key."""


@dataclass(frozen=True)
class Profile:
    """What a profile adds: a round trip (± jitter) and optionally a bandwidth cap."""

    name: str
    description: str
    rtt_ms: int
    jitter_ms: int = 0
    bandwidth_kbps: int | None = None

    def toxics(self) -> list[dict[str, Any]]:
        """Toxiproxy toxics giving this profile on one proxy.

        The round trip is split between the directions (Toxiproxy delays each chunk by its
        latency ± jitter, in whole ms), so a request-response call pays it once and each
        direction of a stream pays its share.
        """
        up_ms, up_jitter = self.rtt_ms // 2, self.jitter_ms // 2
        shares = {
            "upstream": (up_ms, up_jitter),
            "downstream": (self.rtt_ms - up_ms, self.jitter_ms - up_jitter),
        }
        found: list[dict[str, Any]] = []
        for stream, (ms, jitter) in shares.items():
            if ms or jitter:
                found.append(_toxic("latency", stream, latency=ms, jitter=jitter))
            if self.bandwidth_kbps is not None:
                found.append(_toxic("bandwidth", stream, rate=self.bandwidth_kbps))
        return found


def _toxic(kind: str, stream: str, **attributes: int) -> dict[str, Any]:
    return {
        "name": f"wirelab_{kind}_{stream}",
        "type": kind,
        "stream": stream,
        "toxicity": 1.0,
        "attributes": attributes,
    }


def load_profiles(path: Path) -> dict[str, Profile]:
    """Every profile of ``path``; a problem raises :class:`NetworkError` naming the key."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise NetworkError(f"{path}: cannot read network profiles: {exc}") from exc
    profiles = {}
    for name, raw in data.items():
        at = f"{path}: [{name}]"
        if name == DIRECT:
            raise NetworkError(f"{at}: '{DIRECT}' means no proxy and cannot be a profile")
        if not isinstance(raw, dict):
            raise NetworkError(f"{at}: must be a table")
        for key, value in raw.items():
            if key not in _KEYS:
                raise NetworkError(f"{at}: unknown key {key!r} (allowed: {', '.join(_KEYS)})")
            if not isinstance(value, _KEYS[key]) or isinstance(value, bool):
                raise NetworkError(f"{at}: {key} must be {_KEYS[key].__name__}, got {value!r}")
        if "rtt_ms" not in raw:
            raise NetworkError(f"{at}: missing key 'rtt_ms'")
        profile = Profile(name, **{"description": "", **raw})
        if profile.rtt_ms < 0 or not 0 <= profile.jitter_ms <= profile.rtt_ms:
            raise NetworkError(f"{at}: needs rtt_ms >= 0 and 0 <= jitter_ms <= rtt_ms")
        if profile.bandwidth_kbps is not None and profile.bandwidth_kbps <= 0:
            raise NetworkError(f"{at}: bandwidth_kbps must be > 0")
        profiles[name] = profile
    return profiles


def describe(profile: Profile | None) -> dict[str, Any]:
    """A profile as the manifest and the tidy table record it (``direct``: no proxy)."""
    if profile is None:
        return {"name": DIRECT, "rtt_ms": 0, "jitter_ms": 0, "bandwidth_kbps": None}
    return asdict(profile)


class Toxiproxy:
    """The lab's Toxiproxy API: which proxies exist, and the toxics that make a profile."""

    def __init__(self, url: str, client: httpx.Client | None = None) -> None:
        self.url = url.rstrip("/")
        self.http = client or httpx.Client(timeout=5.0)

    def proxies(self) -> list[str]:
        """The names of every proxy Toxiproxy has: the edges' and, under a topology, its hops'."""
        response = self.http.get(f"{self.url}/proxies")
        response.raise_for_status()
        return sorted(response.json())

    def unreachable(self, needed: tuple[str, ...] = PROXIES) -> str | None:
        """Why the proxies cannot carry a profile, or None when every one ``needed`` is there
        (by default both edges')."""
        try:
            proxies = self.proxies()
        except (httpx.HTTPError, ValueError) as exc:
            return f"no Toxiproxy answers at {self.url} ({type(exc).__name__}: {exc})"
        missing = [name for name in needed if name not in proxies]
        if missing:
            return f"Toxiproxy at {self.url} has no proxy {', '.join(missing)}"
        return None

    def apply(
        self, profile: Profile | None, hops: Profile | bool | None = True
    ) -> dict[str, list[dict[str, Any]]]:
        """Replace every toxic with ``profile``'s on the edges' proxies and ``hops``' on the
        hops' (True: ``profile``'s too, every proxy alike; None: no toxic, a direct link);
        returns what the proxies report afterwards (for the manifest: what was applied, not
        what was meant)."""
        self.reset()
        on_hops = profile if hops is True else hops
        for proxy in self.proxies():
            chosen = profile if proxy in EDGE_PROXIES else on_hops
            for toxic in chosen.toxics() if isinstance(chosen, Profile) else ():
                response = self.http.post(f"{self.url}/proxies/{proxy}/toxics", json=toxic)
                response.raise_for_status()
        return self.toxics()

    def reset(self) -> None:
        """No toxics on any proxy, every proxy enabled (Toxiproxy's own reset)."""
        self.http.post(f"{self.url}/reset").raise_for_status()

    def toxics(self) -> dict[str, list[dict[str, Any]]]:
        found = {}
        for proxy in self.proxies():
            response = self.http.get(f"{self.url}/proxies/{proxy}/toxics")
            response.raise_for_status()
            found[proxy] = sorted(response.json(), key=lambda t: str(t.get("name")))
        return found


class NetworkUnavailable(Exception):
    """A run needs a network profile and the lab's Toxiproxy cannot carry it."""


class Network:
    """A run's network conditions: its profiles, applied to the lab's Toxiproxy as cells need."""

    def __init__(
        self, profiles_file: Path, toxiproxy_url: str, needed: tuple[str, ...], amqp: bool = False
    ) -> None:
        """``needed``: the profiles the cells name; ``amqp``: some of those cells are the AMQP
        arm's, whose proxies only the order chain's overlay with PROFILES=amqp,netem has."""
        self.profiles = load_profiles(profiles_file)
        self.proxy = Toxiproxy(toxiproxy_url)
        # (edge links' profile, hop links' profile) now on the proxies.
        self.current = (DIRECT, DIRECT)
        proxies: tuple[str, ...] = PROXIES
        start = "make lab PROFILES=netem"
        if amqp:
            proxies = PROXIES + AMQP_PROXIES
            start = "make lab TOPOLOGY=order-chain PROFILES=amqp,netem"
        if why := self.proxy.unreachable(proxies):
            raise NetworkUnavailable(
                f"{why}; cells need network {', '.join(needed)}:"
                f" start the lab with `{start}` (docs/network.md)"
            )

    def use(self, name: str, hops: str | None = None) -> dict[str, Any] | None:
        """Profile ``name`` on the edges' links and ``hops`` (None: the same) on a topology's
        hop links, unless they are on already; what was applied (None: nothing changed, or
        both direct, which clears what an earlier cell left on the hops' proxies)."""
        wanted = (name, name if hops is None else hops)
        if wanted == self.current:
            return None
        try:
            if wanted == (DIRECT, DIRECT):
                self.proxy.reset()
                self.current = wanted
                return None
            edge, hop = (self.profiles.get(n) for n in wanted)
            toxics = self.proxy.apply(edge, hop)
        except httpx.HTTPError as exc:
            raise NetworkUnavailable(f"applying network {label(*wanted)}: {exc}") from exc
        self.current = wanted
        applied = {**describe(edge), "toxics": toxics}
        return applied if wanted[0] == wanted[1] else {**applied, "hops": describe(hop)}

    def reset(self) -> str:
        """Leave the proxies as the lab started them (no toxics); says how that went."""
        try:
            self.proxy.reset()
        except httpx.HTTPError as exc:
            return f"failed: {exc}"
        self.current = (DIRECT, DIRECT)
        return "ok"


def label(network: str, hops: str) -> str:
    """A cell's network conditions in one word: the profile, or ``edge+hops-profile`` when a
    topology's hop links carry another one than the edge's."""
    return network if hops == network else f"{network}+hops-{hops}"


def with_links(tidy: pd.DataFrame) -> pd.DataFrame:
    """A tidy table with each row's network conditions as ``label`` names them (``links``) and
    the round trip they add (``links_rtt_ms``: the edge link's plus one hop link's). A run from
    before hop links had a profile of their own has no ``hop_network``: its hops had the edge's."""
    edge = tidy["network"]
    # An empty cell reads back as NaN, a column of them as float64, which pandas 3 warns of
    # filling with text (the report printed a Pandas4Warning): no hop profile is the edge's.
    hops = tidy.get("hop_network", edge)
    names = [
        label(e, h) if isinstance(h, str) and h else e for e, h in zip(edge, hops, strict=True)
    ]
    hop_rtt = tidy["hop_network_rtt_ms"].fillna(0) if "hop_network_rtt_ms" in tidy else 0
    return tidy.assign(links=names, links_rtt_ms=tidy["network_rtt_ms"] + hop_rtt)

"""Network profiles: the file's parser, the toxics a profile becomes, the Toxiproxy client, and
how scenarios, cells and tidy rows carry the profile (docs/network.md)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest
from wirelab_bench.cli import main
from wirelab_bench.knobs import NETWORK_PROFILES
from wirelab_bench.network import (
    DIRECT,
    Network,
    NetworkError,
    NetworkUnavailable,
    Profile,
    Toxiproxy,
    label,
    load_profiles,
    with_links,
)
from wirelab_bench.scenario import Gates
from wirelab_bench.scenario_file import ScenarioError, load_scenario
from wirelab_bench.tidy import Window, build_row

SCENARIO = """
kinds = ["unary"]
loads = [{ users = 1 }]
duration_s = 1
"""


def _profiles(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return path


def test_the_lab_profiles_load_and_grow_in_round_trip() -> None:
    profiles = load_profiles(Path(NETWORK_PROFILES))
    assert list(profiles) == ["lan", "zone", "region", "intercontinental"]
    rtts = [p.rtt_ms for p in profiles.values()]
    assert rtts == sorted(rtts) and rtts[0] == 0
    assert all(p.description for p in profiles.values())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[wan]\nrtt = 3", "unknown key 'rtt'"),
        ("[wan]\njitter_ms = 1", "missing key 'rtt_ms'"),
        ("[wan]\nrtt_ms = 1.5", "rtt_ms must be int"),
        ("[wan]\nrtt_ms = 10\njitter_ms = 11", "0 <= jitter_ms <= rtt_ms"),
        ("[wan]\nrtt_ms = -1", "rtt_ms >= 0"),
        ("[wan]\nrtt_ms = 10\nbandwidth_kbps = 0", "bandwidth_kbps must be > 0"),
        ("[direct]\nrtt_ms = 0", "'direct' means no proxy"),
        ("wan = 3", "[wan]: must be a table"),
        ("[wan", "cannot read network profiles"),
    ],
)
def test_a_bad_profile_file_names_the_profile_and_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _profiles(tmp_path, text)
    with pytest.raises(NetworkError) as caught:
        load_profiles(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_round_trip_is_split_between_the_directions_in_whole_milliseconds() -> None:
    toxics = {t["stream"] + "/" + t["type"]: t for t in Profile("x", "", 41, 5, 100).toxics()}
    up, down = toxics["upstream/latency"], toxics["downstream/latency"]
    assert up["attributes"] == {"latency": 20, "jitter": 2}
    assert down["attributes"] == {"latency": 21, "jitter": 3}
    assert toxics["upstream/bandwidth"]["attributes"] == {"rate": 100}
    assert toxics["downstream/bandwidth"]["attributes"] == {"rate": 100}
    assert len({t["name"] for t in toxics.values()}) == 4
    # 1 ms cannot be halved: the whole of it goes one way; nothing added means no toxic at all.
    assert [t["stream"] for t in Profile("zone", "", 1).toxics()] == ["downstream"]
    assert Profile("lan", "", 0).toxics() == []


class FakeToxiproxy:
    """Toxiproxy's API as far as the client uses it: proxies, their toxics, reset."""

    def __init__(self, proxies: tuple[str, ...] = ("rest", "grpc")) -> None:
        self.toxics: dict[str, list[dict[str, Any]]] = {p: [] for p in proxies}
        self.calls: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(f"{request.method} {request.url.path}")
        parts = request.url.path.strip("/").split("/")
        if request.url.path == "/proxies":
            return httpx.Response(200, json={p: {"name": p} for p in self.toxics})
        if request.url.path == "/reset":
            self.toxics = {p: [] for p in self.toxics}
            return httpx.Response(204)
        if parts[0] == "proxies" and parts[2:] == ["toxics"] and parts[1] in self.toxics:
            if request.method == "POST":
                self.toxics[parts[1]].append(json.loads(request.content))
                return httpx.Response(200, json=json.loads(request.content))
            return httpx.Response(200, json=self.toxics[parts[1]])
        return httpx.Response(404, text="proxy not found")

    def client(self) -> Toxiproxy:
        return Toxiproxy(
            "http://toxiproxy:8474/", httpx.Client(transport=httpx.MockTransport(self.handle))
        )


def test_applying_a_profile_replaces_every_toxic_on_both_proxies_alike() -> None:
    fake = FakeToxiproxy()
    proxy = fake.client()
    assert proxy.unreachable() is None
    fake.toxics["rest"].append({"name": "left over"})
    applied = proxy.apply(Profile("region", "", 40, 5))
    assert fake.calls[1] == "POST /reset"
    assert (
        applied["rest"] == applied["grpc"] == sorted(fake.toxics["grpc"], key=lambda t: t["name"])
    )
    assert [t["attributes"]["latency"] for t in applied["rest"]] == [20, 20]
    proxy.reset()
    assert fake.toxics == {"rest": [], "grpc": []}


def test_a_topologys_hop_proxies_get_the_profile_too() -> None:
    """Under a topology Toxiproxy also fronts the hops (toxiproxy/<topology>.json): the profile
    goes on each of them as on the edges, and the manifest's record lists them."""
    fake = FakeToxiproxy(("rest", "grpc", "rest-b", "grpc-b"))
    applied = fake.client().apply(Profile("region", "", 40, 5))
    assert sorted(applied) == ["grpc", "grpc-b", "rest", "rest-b"]
    assert all(len(fake.toxics[p]) == 2 for p in applied)
    assert applied["rest-b"] == applied["rest"]


def test_a_toxiproxy_without_a_protocols_proxy_or_none_at_all_is_refused() -> None:
    assert "no proxy grpc" in str(FakeToxiproxy(("rest",)).client().unreachable())
    nobody = Toxiproxy("http://127.0.0.1:9", httpx.Client(timeout=1))
    assert "no Toxiproxy answers at http://127.0.0.1:9" in str(nobody.unreachable())


def test_a_run_applies_each_profile_once_while_it_lasts(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeToxiproxy()
    monkeypatch.setattr("wirelab_bench.network.Toxiproxy", lambda url: fake.client())
    network = Network(Path(NETWORK_PROFILES), "http://toxiproxy:8474", ("region",))
    assert network.use(DIRECT) is None
    applied = network.use("region")
    assert applied is not None and applied["rtt_ms"] == 40 and len(applied["toxics"]["rest"]) == 2
    assert network.use("region") is None  # still on: not applied again
    assert network.use("lan") is not None and fake.toxics == {"rest": [], "grpc": []}
    assert network.reset() == "ok" and network.current == (DIRECT, DIRECT)


def test_a_direct_cell_after_a_profile_clears_the_hop_proxies() -> None:
    """A direct cell sends the load generator straight to the edge, but a topology's hops still
    pass through Toxiproxy: what an earlier cell left on them must go."""
    fake = FakeToxiproxy(("rest", "grpc", "rest-b", "grpc-b"))
    network = _network(fake)
    assert network.use("region") is not None and len(fake.toxics["rest-b"]) == 2
    assert network.use(DIRECT) is None
    assert all(toxics == [] for toxics in fake.toxics.values())


def test_hop_links_can_carry_a_profile_of_their_own() -> None:
    """hop_network: the edges' proxies get the group's network, the hops' their own (a client
    beside its edge, the edge a region away from its downstream)."""
    fake = FakeToxiproxy(("rest", "grpc", "rest-node", "grpc-node", "rest-b", "grpc-node-b"))
    network = _network(fake)
    applied = network.use(DIRECT, "region")
    assert applied is not None and applied["name"] == DIRECT
    assert applied["hops"]["name"] == "region" and applied["hops"]["rtt_ms"] == 40
    assert {p: len(t) for p, t in fake.toxics.items()} == {
        "rest": 0, "grpc": 0, "rest-node": 0, "grpc-node": 0, "rest-b": 2, "grpc-node-b": 2
    }  # fmt: skip
    assert network.use(DIRECT, "region") is None  # still on
    applied = network.use("zone", DIRECT)
    assert applied is not None and applied["hops"]["name"] == DIRECT
    zone = len(network.profiles["zone"].toxics())
    assert [len(fake.toxics[p]) for p in ("rest", "rest-node", "rest-b")] == [zone, zone, 0]
    assert network.use("zone") is not None and len(fake.toxics["rest-b"]) == zone
    assert label("zone", "zone") == "zone" and label(DIRECT, "region") == "direct+hops-region"


def _network(fake: FakeToxiproxy) -> Network:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("wirelab_bench.network.Toxiproxy", lambda url: fake.client())
        return Network(Path(NETWORK_PROFILES), "http://toxiproxy:8474", ("region",))


def test_a_run_needing_a_profile_without_toxiproxy_names_the_command() -> None:
    with pytest.raises(NetworkUnavailable, match=r"make lab PROFILES=netem"):
        Network(Path(NETWORK_PROFILES), "http://127.0.0.1:9", ("region",))


def test_scenarios_name_a_network_per_group_and_unknown_ones_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "wan.toml"
    path.write_text(
        SCENARIO + '[[groups]]\nname = "near"\n[[groups]]\nname = "far"\nnetwork = "region"\n'
    )
    scenario = load_scenario(path)
    assert [g.network for g in scenario.groups] == [DIRECT, "region"]
    assert scenario.networks() == ("region",)
    ids = [c.cell_id for c in scenario.cells()]
    assert ids[0].endswith("_r0") and "_region_" not in ids[0] and "_region_r0" in ids[-1]
    assert scenario.with_network("lan").networks() == ("lan",)
    path.write_text(SCENARIO + 'network = "moon"\n')
    with pytest.raises(ScenarioError, match=r"unknown network 'moon' \(known: direct, lan"):
        load_scenario(path)


def test_a_group_may_give_a_topologys_hop_links_a_profile_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "hops.toml"
    path.write_text(
        'topology = "a-to-b"\n' + SCENARIO
        + '[[groups]]\nname = "near"\n[[groups]]\nname = "split"\nhop_network = "region"\n'
    )  # fmt: skip
    scenario = load_scenario(path)
    assert [(g.network, g.hops_network) for g in scenario.groups] == [
        (DIRECT, DIRECT),
        (DIRECT, "region"),
    ]
    assert scenario.networks() == ("region",)  # Toxiproxy is needed for the hops alone
    ids = [c.cell_id for c in scenario.cells()]
    assert "_hops-" not in ids[0] and ids[-1].endswith("_hops-region_r0")
    # --network puts one profile on every link, the hops' included.
    assert {g.hops_network for g in scenario.with_network("lan").groups} == {"lan"}
    path.write_text('topology = "a-to-b"\n' + SCENARIO + 'hop_network = "moon"\n')
    with pytest.raises(ScenarioError, match=r"unknown hop_network 'moon'"):
        load_scenario(path)
    path.write_text(SCENARIO + 'hop_network = "region"\n')
    with pytest.raises(ScenarioError, match=r"needs a topology \(topology one-hop has no hop"):
        load_scenario(path)


def test_the_tidy_row_says_which_network_a_cell_ran_under(tmp_path: Path) -> None:
    path = tmp_path / "wan.toml"
    path.write_text(SCENARIO + 'network = "intercontinental"\n')
    cell = load_scenario(path).cells()[0]
    profile = load_profiles(Path(NETWORK_PROFILES))["intercontinental"]
    row = build_row(Window(cell, 0.0, 1.0), Gates(), network=profile)
    assert (row["network"], row["network_rtt_ms"], row["network_jitter_ms"]) == (
        "intercontinental",
        80,
        10,
    )
    assert row["network_bandwidth_kbps"] == 12500
    direct = build_row(Window(cell, 0.0, 1.0), Gates())
    assert (direct["network"], direct["network_rtt_ms"]) == (DIRECT, 0)
    assert direct["hop_network"] == ""  # one hop: no hop links
    region = load_profiles(Path(NETWORK_PROFILES))["region"]
    hops = build_row(Window(cell, 0.0, 1.0), Gates(), "a-to-b", None, "sequential", region)
    assert (hops["network"], hops["hop_network"], hops["hop_network_rtt_ms"]) == (
        DIRECT,
        "region",
        40,
    )


@pytest.mark.filterwarnings("error")
def test_the_report_names_each_rows_links_from_tidy_csv_without_a_warning() -> None:
    """A one-hop run's tidy.csv has an empty hop_network on every row, which reads back as a
    float64 column of NaN: filling that with text printed a Pandas4Warning into the report."""
    head = "network,network_rtt_ms,hop_network,hop_network_rtt_ms\n"
    one_hop = with_links(pd.read_csv(StringIO(head + "direct,0,,\nwan,30,,\n")))
    assert list(one_hop["links"]) == ["direct", "wan"]
    assert list(one_hop["links_rtt_ms"]) == [0, 30]
    hops = with_links(pd.read_csv(StringIO(head + "direct,0,region,40\nregion,40,region,40\n")))
    assert list(hops["links"]) == ["direct+hops-region", "region"]
    assert list(hops["links_rtt_ms"]) == [40, 80]
    before_hop_network = with_links(pd.read_csv(StringIO("network,network_rtt_ms\nwan,30\n")))
    assert list(before_hop_network["links"]) == ["wan"]
    assert list(before_hop_network["links_rtt_ms"]) == [30]


def test_bench_refuses_an_unknown_network_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO)
    code = main(["bench", str(path), "--network", "moon", "--results-dir", str(tmp_path / "r")])
    assert code == 2
    assert "unknown --network 'moon' (known: direct, lan" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()

"""Scenario files: the shipped ones parse, bad ones fail with a message naming the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from wirelab_bench.cli import main
from wirelab_bench.knobs import KNOBS, REPO, env_name, flag
from wirelab_bench.scenario_file import ScenarioError, load_scenario, resolve, select_loads

SCENARIOS = REPO / "scenarios"


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIOS.glob("*.toml")))
def test_shipped_scenarios_parse(name: str) -> None:
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    assert scenario.cells(), name


def test_the_required_scenarios_exist_with_their_study_parameters() -> None:
    smoke = load_scenario(SCENARIOS / "smoke.toml")
    kinds = {(c.protocol, c.kind) for c in smoke.cells()}
    assert len(kinds) == 16  # 7 gRPC kinds + 9 REST kinds, each once
    # What --dry-run promises, the measured per-cell overhead included.
    assert smoke.estimated_seconds() < 4 * 60
    assert load_scenario(SCENARIOS / "quick.toml").estimated_seconds() < 20 * 60
    iit = load_scenario(SCENARIOS / "iit.toml")
    loads = {(ld.label, ld.users, ld.spawn_rate) for g in iit.groups for ld in g.loads}
    assert loads == {("light", 500, 5), ("medium", 1000, 10), ("heavy", 5000, 50)}
    ramp = load_scenario(SCENARIOS / "event-loop.toml")
    assert max(ld.users for g in ramp.groups for ld in g.loads) == 2000
    chain = load_scenario(SCENARIOS / "order-chain.toml")
    assert sorted(ld.users for ld in chain.groups[0].loads) == [10, 100, 300]
    assert chain.groups[0].failure_threshold_ms == 900


def test_repetitions_alternate_protocol_order(tmp_path: Path) -> None:
    path = tmp_path / "alt.toml"
    path.write_text('repetitions = 2\nkinds = ["unary"]\nloads = [{users = 1}]\n')
    cells = load_scenario(path).cells()
    assert [(c.repetition, c.protocol) for c in cells] == [
        (0, "rest"),
        (0, "grpc"),
        (1, "grpc"),
        (1, "rest"),
    ]
    assert len({c.cell_id for c in cells}) == 4


def test_rest_only_kinds_get_no_grpc_cell_and_unary_no_payload(tmp_path: Path) -> None:
    path = tmp_path / "k.toml"
    path.write_text(
        'kinds = ["upload_json", "unary"]\nloads = [{users = 1}]\npayload_sizes = [1, 2]\n'
    )
    cells = load_scenario(path).cells()
    assert {(c.protocol, c.kind, c.payload_bytes) for c in cells} == {
        ("rest", "upload_json", 1),
        ("rest", "upload_json", 2),
        ("rest", "unary", 0),
        ("grpc", "unary", 0),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('kinds = ["unary"]\nloads = [{users = 1}]\nduraton_s = 3\n', "unknown key 'duraton_s'"),
        ('kinds = ["unray"]\nloads = [{users = 1}]\n', "unknown kinds value 'unray'"),
        ('kinds = ["unary"]\n', "missing key 'loads'"),
        ("loads = [{users = 1}]\n", "missing key 'kinds'"),
        ('kinds = ["unary"]\nloads = [{users = 0}]\n', "loads[0]: users must be an integer >= 1"),
        ('kinds = ["unary"]\nloads = [{users = 1}]\nduration_s = 0\n', "duration_s must be > 0"),
        ('kinds = ["unary"]\nloads = [{users = 1}]\nduration_s = "30"\n', "wrong type"),
        ('kinds = ["unary"]\nloads = [{users = 1}]\nprotocols = ["soap"]\n', "'soap'"),
        ('kinds = ["unary"]\nloads = [{users = 1}]\npayload_sizes = [-1]\n', "payload_sizes"),
        ('kinds = ["unary"]\nloads = [{users = 1}, {users = 1}]\n', "load labels must be unique"),
        ('kinds = ["unary"]\nloads = [{users = 1}]\n[gates]\nmax_error_ratio = 2\n', "0..1"),
        ('kinds = ["unary"]\nloads = [{users = 1}]\n[[groups]]\nkinds = ["bidy"]\n', "groups[0]"),
        ("kinds = [\n", "cannot read scenario"),
        ('kinds = ["unary"]\nloads = [{users = 1}]\ngenerator = "k6"\n', "unknown generator 'k6'"),
        (
            'kinds = ["unary", "download"]\nloads = [{users = 1}]\ngenerator = "loadgen"\n',
            "generator loadgen sends the small order call only (kinds unary)",
        ),
        (
            'topology = "order-chain"\nkinds = ["unary"]\nloads = [{users = 1}]\n'
            'protocols = ["grpc", "amqp"]\ngenerator = "loadgen"\n',
            "generator loadgen calls the rest and grpc arms, not amqp",
        ),
        (
            'kinds = ["unary"]\nloads = [{users = 1}]\ngenerator = "loadgen"\narrivals = "burst"\n',
            "unknown arrivals 'burst' (known: constant, poisson)",
        ),
        (
            'kinds = ["unary"]\nloads = [{users = 1, rate = 5}]\narrivals = "poisson"\n',
            "arrivals poisson needs generator loadgen",
        ),
        (
            'kinds = ["unary"]\nloads = [{users = 1}]\nrest_http = "h3"\n',
            "unknown rest_http 'h3' (known: 1.1, h2c)",
        ),
        (
            'kinds = ["unary"]\nloads = [{users = 1}]\nrest_http = "h2c"\nruntimes = ["node"]\n',
            "the Node.js REST service speaks HTTP/1.1 only",
        ),
    ],
)
def test_bad_scenarios_say_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_a_groups_generator_names_its_cells_and_defaults_to_locust() -> None:
    scenario = load_scenario(SCENARIOS / "generators.toml")
    cells = scenario.cells()
    by = {c.group.generator for c in cells}
    assert by == {"loadgen", "locust"}
    assert all(c.kind == "unary" for c in cells)
    ids = [c.cell_id for c in cells]
    assert ids[0] == "000_rest_unary_one_0b_loadgen_r0" and len(set(ids)) == len(ids)
    assert sum("_loadgen_" in i for i in ids) == len(ids) // 2
    assert load_scenario(SCENARIOS / "smoke.toml").groups[0].generator == "locust"


def test_the_open_loop_sweep_offers_ascending_rates_to_both_protocols_each_process() -> None:
    cells = load_scenario(SCENARIOS / "openloop.toml").cells()
    assert {c.group.generator for c in cells} == {"loadgen"}
    assert {c.group.arrivals for c in cells} == {"constant", "poisson"}
    for arrivals in ("constant", "poisson"):
        for protocol in ("rest", "grpc"):
            rates = [
                c.load.rate or 0.0
                for c in cells
                if c.protocol == protocol and c.group.arrivals == arrivals and c.repetition == 0
            ]
            assert len(rates) >= 5 and rates == sorted(rates) and min(rates) > 0, rates


def test_the_light_load_scenario_is_one_open_loop_rate_repeated_on_both_protocols() -> None:
    cells = load_scenario(SCENARIOS / "lowrate.toml").cells()
    assert {(c.group.generator, c.group.arrivals, c.load.rate) for c in cells} == {
        ("loadgen", "constant", 250)
    }
    assert sorted((c.protocol, c.repetition) for c in cells) == [
        (p, r) for p in ("grpc", "rest") for r in range(3)
    ]


def test_resolve_by_name_or_path(tmp_path: Path) -> None:
    assert resolve("smoke", SCENARIOS) == SCENARIOS / "smoke.toml"
    with pytest.raises(ScenarioError, match=r"known: .*smoke"):
        resolve("nope", SCENARIOS)


def test_every_knob_is_documented_with_its_variable() -> None:
    doc = (REPO / "docs" / "bench.md").read_text()
    for name, *_ in KNOBS:
        assert f"`{env_name(name)}`" in doc and f"`{flag(name)}`" in doc, name


def test_help_lists_every_knob_and_its_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, *_ in KNOBS:
        assert flag(name) in text and env_name(name) in text, name
    assert "exit codes" in text


def test_bad_scenario_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('kinds = ["unary"]\n')
    assert main(["bench", str(bad), "--results-dir", str(tmp_path / "r")]) == 2
    assert "missing key 'loads'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_the_http2_scenario_times_rest_over_both_https_and_grpc_with_loadgen() -> None:
    cells = load_scenario(SCENARIOS / "http2.toml").cells()
    arms = {(c.protocol, c.group.rest_http) for c in cells}
    assert arms == {("rest", "1.1"), ("rest", "h2c"), ("grpc", "1.1")}
    assert {c.group.generator for c in cells} == {"loadgen"}
    assert len({c.cell_id for c in cells}) == len(cells)


def test_loads_selects_levels_by_label_and_refuses_an_unknown_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    iit = load_scenario(SCENARIOS / "iit.toml")
    light = select_loads(iit, "light")
    assert {c.load.label for c in light.cells()} == {"light"}
    assert len(light.cells()) * 3 == len(iit.cells())
    assert {c.load.label for c in select_loads(iit, "light, heavy").cells()} == {"light", "heavy"}
    with pytest.raises(ScenarioError, match=r"'lite'.*heavy, light, medium"):
        select_loads(iit, "lite")
    assert main(["bench", "iit", "--loads", "lite", "--results-dir", str(tmp_path / "r")]) == 2
    assert "unknown --loads" in capsys.readouterr().err
    assert main(["bench", "iit", "--loads", "light", "--dry-run"]) == 0
    assert "8 cells" in capsys.readouterr().out

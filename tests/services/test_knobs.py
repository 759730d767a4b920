"""The knob table both runtimes read (contract/knobs.json): every knob this
runtime honours reaches Settings from its variable and its flag, every default is the table's,
and each type refuses what it should, naming the variable."""

from __future__ import annotations

import dataclasses
import json

import pytest
from wirelab import settings
from wirelab.contract.knobs import DEFAULTS, KNOBS, TABLE, Knob
from wirelab.core import Limits

from tests.config.queries import REPO

PYTHON = [k for k in KNOBS if "python" in k.runtimes]


def other_value(knob: Knob) -> str:
    """A valid value other than the default."""
    if knob.type == "int":
        return str(max(int(knob.default), knob.minimum, 1) + 1)
    if knob.type == "seconds":
        return "2.5"
    if knob.type == "ratio":
        return "0.5"
    if knob.type == "choice":
        return next(c for c in knob.choices if c != knob.default)
    return "127.0.0.2" if knob.name == "host" else "x-wirelab-test"


@pytest.mark.parametrize("knob", PYTHON, ids=lambda k: k.name)
def test_each_knob_reaches_settings_from_its_variable_and_its_flag(knob: Knob) -> None:
    value = other_value(knob)
    by_env = settings.load([], environ={knob.env: value})
    assert by_env != settings.Settings(), f"{knob.env}={value} changed nothing"
    assert settings.load([knob.flag, value], environ={}) == by_env
    # The flag wins over the variable.
    assert settings.load([knob.flag, value], environ={knob.env: str(knob.default)}) == by_env


def test_every_default_is_the_tables() -> None:
    assert settings.load([], environ={}) == settings.Settings()
    limits = dataclasses.asdict(Limits())
    assert limits == {name: DEFAULTS[name] for name in limits}
    assert [k.name for k in settings.KNOBS] == [k.name for k in PYTHON]


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"WIRELAB_REST_PORT": "x"}, "WIRELAB_REST_PORT must be a non-negative integer"),
        ({"WIRELAB_GRPC_PORT": "-1"}, "WIRELAB_GRPC_PORT must be a non-negative integer"),
        ({"WIRELAB_REST_PORT": "٣"}, "WIRELAB_REST_PORT must be a non-negative integer"),
        ({"WIRELAB_GRACE_SECONDS": "soon"}, "WIRELAB_GRACE_SECONDS must be a non-negative number"),
        ({"WIRELAB_METRICS": "maybe"}, "WIRELAB_METRICS must be one of on, off"),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(
    env: dict[str, str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        settings.load([], environ=env)
    assert exited.value.code == 2
    assert said in capsys.readouterr().err


def test_seconds_may_be_fractional() -> None:
    loaded = settings.load([], environ={"WIRELAB_REST_BODY_TIMEOUT_SECONDS": "0.25"})
    assert loaded.rest_body_timeout_seconds == 0.25


def test_the_table_is_whole_and_each_default_valid() -> None:
    raw = json.loads((REPO / "contract/knobs.json").read_text())
    assert raw == TABLE
    names = [k["name"] for k in raw["knobs"]]
    assert len(names) == len(set(names))
    keys = {"name", "type", "default", "runtimes", "help", "choices", "minimum", "limits", "why"}
    for k in raw["knobs"]:
        assert set(k) <= keys, k
        assert k["help"] and set(k["runtimes"]) <= {"python", "node"} and k["runtimes"], k

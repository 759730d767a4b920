"""Option parsing: the task mix, protocol choice and the typed knobs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from wirelab_locust.options import OPTIONS, Knobs, env_name, parse_mix, parse_protocols


def test_mix_keeps_the_protocols_kinds_and_drops_zero_weights() -> None:
    text = "unary=10, upload_json=3, bidi=0, download"
    assert parse_mix(text, "rest") == {"unary": 10, "upload_json": 3, "download": 1}
    assert parse_mix(text, "grpc") == {"unary": 10, "download": 1}


@pytest.mark.parametrize("text", ["unray=1", "unary=-1"])
def test_mix_refuses_typos_and_negative_weights(text: str) -> None:
    with pytest.raises(ValueError):
        parse_mix(text, "rest")


def test_protocols() -> None:
    assert parse_protocols("grpc, rest") == ("grpc", "rest")
    assert parse_protocols("amqp") == ("amqp",)  # the order chain's AMQP arm
    for bad in ("", "soap", "rest,http"):
        with pytest.raises(ValueError):
            parse_protocols(bad)


def test_knobs_from_defaults_use_the_host_and_parse_flags() -> None:
    defaults = {flag.replace("-", "_"): default for flag, _, default, _, _ in OPTIONS}
    options = SimpleNamespace(**{**defaults, "count_words": "True"})
    knobs = Knobs.from_options(options, "http://rest:8000/")
    assert knobs.rest_host == "http://rest:8000"
    assert knobs.grpc_target == "127.0.0.1:50051"
    assert knobs.targets == {"grpc": "127.0.0.1:50051", "amqp": "127.0.0.1:50052"}
    assert knobs.peers == {"rest": "rest", "grpc": "127.0.0.1", "amqp": "127.0.0.1"}
    assert knobs.count_words is True
    assert (
        Knobs.from_options(SimpleNamespace(**defaults), None).rest_host == "http://127.0.0.1:8000"
    )


def test_every_option_has_a_locust_env_variable_and_help() -> None:
    for flag, _, _, text, _ in OPTIONS:
        assert env_name(flag) == "LOCUST_" + flag.upper().replace("-", "_")
        assert text

"""locust/locust.conf sets only what the compose lab needs besides the options' defaults: a lab
option's default is the knob table's (part locust, which wirelab_locust.options registers), so a
line giving one that default is a second copy to keep in sync, and a key that is neither
Locust's option nor the table's is a typo that Locust refuses only when it starts."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import configargparse
import pytest
from wirelab.contract.table import of

CONF = Path(__file__).resolve().parents[2] / "locust" / "locust.conf"
LAB = {e.flag.removeprefix("--"): e for e in of("locust")}
# Locust's own options from its parser, in a child: importing locust gevent-patches the process.
OWN = """
import json
from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
parser = get_empty_argument_parser(default_config_files=[])
setup_parser_arguments(parser)
print(json.dumps([s for a in parser._actions for s in a.option_strings if s.startswith("--")]))
"""


@pytest.fixture(scope="module")
def locust_own() -> set[str]:
    env = {**os.environ, "LOCUST_SKIP_MONKEY_PATCH": "1"}
    out = subprocess.run(
        [sys.executable, "-c", OWN], capture_output=True, text=True, check=True, env=env
    ).stdout
    return {flag.removeprefix("--") for flag in json.loads(out)}


def misplaced(text: str, locust_own: set[str]) -> list[str]:
    """The keys of a Locust config file (read by the parser Locust reads it with) that give a lab
    option its table default or name an option neither Locust nor the table declares."""
    found = []
    for key, value in configargparse.DefaultConfigFileParser().parse(io.StringIO(text)).items():
        entry = LAB.get(key)
        if entry is None and key not in locust_own:
            found.append(f"{key}: no such option")
        elif entry is not None and entry.python_type(value) == entry.value:
            found.append(f"{key}: the table's default {entry.value!r}")
    return found


def test_locust_conf_repeats_no_default_and_names_only_options(locust_own: set[str]) -> None:
    assert not misplaced(CONF.read_text(), locust_own), "docs/knobs.md#locust has these defaults"


def test_a_repeated_default_and_an_unknown_key_are_found(locust_own: set[str]) -> None:
    text = (
        "# a comment\nlocustfile = locustfile.py\nhost = http://rest:8000\n"
        "payload-bytes = 65536\ncall-timeout = 60\nstream-count = 12\npayload-byte = 1\nshape =\n"
        "grpc-target = grpc:50051\n"
    )
    assert [f.split(":")[0] for f in misplaced(text, locust_own)] == [
        "payload-bytes",
        "call-timeout",
        "payload-byte",
        "shape",
    ]

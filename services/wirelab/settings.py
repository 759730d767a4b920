"""The WIRELAB_* knobs this runtime honours, from the table both runtimes read (knobs.json)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wirelab.contract.knobs import KNOBS as ALL_KNOBS
from wirelab.contract.knobs import Knob
from wirelab.core import Limits
from wirelab.knobfields import Fields

# The knobs this runtime honours, from the table both runtimes read (contract/knobs.json). Each is
# a field of Settings, or of its Limits, by the same name: wirelab/knobfields.py, generated from
# the table (python -m wirelab.contract.fieldgen).
KNOBS: tuple[Knob, ...] = tuple(k for k in ALL_KNOBS if "python" in k.runtimes)


@dataclass(frozen=True)
class Settings(Fields):
    """Every knob resolved; the fields and their defaults are the table's."""

    @property
    def grpc_max_message_bytes(self) -> int:
        # Room for the protobuf framing around the largest blob.
        return self.limits.max_payload_bytes + 1024 * 1024


def parser(
    prog: str, description: str, environ: Mapping[str, str] | None = None
) -> argparse.ArgumentParser:
    """Command-line parser whose defaults come from the environment, then from the knob table."""
    env = os.environ if environ is None else environ
    p = argparse.ArgumentParser(prog=prog, description=description)
    for knob in KNOBS:
        p.add_argument(
            knob.flag,
            default=env.get(knob.env, str(knob.default)),
            choices=knob.choices or None,
            help=f"{knob.help} (env {knob.env}, default {knob.default})",
        )
    return p


def load(
    argv: Sequence[str] | None = None,
    *,
    prog: str = "wirelab",
    description: str = "",
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve every knob from argv, then WIRELAB_* variables, then defaults."""
    p = parser(prog, description, environ)
    ns = vars(p.parse_args(argv))
    k: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for knob in KNOBS:
        try:
            value: Any = knob.parse(ns[knob.name])
        except ValueError as exc:
            p.error(str(exc))
        if knob.switch:
            value = value == "on"
        elif knob.type == "list":
            value = tuple(item.strip() for item in str(value).split(",") if item.strip())
        (limits if knob.limits else k)[knob.name] = value
    k["grpc_threads"] = max(1, k["grpc_threads"])
    k["amqp_prefetch"] = max(1, k["amqp_prefetch"])
    return Settings(limits=Limits(**limits), **k)

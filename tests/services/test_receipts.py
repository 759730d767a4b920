"""How many Upload messages the gRPC service receives at once, and the bound that gives the lab's
defaults against the container's memory limit (tests/services/test_grpc_memory.py measures it)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from wirelab.rpc.intake import UPLOAD_HOLDS
from wirelab.rpc.receipts import receipt_options, receipts_for
from wirelab.settings import Settings

REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
# What a gRPC process holds besides the budget and the messages in receipt: the interpreter,
# grpc and the metrics (65-70 MiB idle), grpc's windows and the allocator's slack. The measured
# figures (docs/services.md): twelve 256 MiB Uploads peaked at ~1.5 GiB with the defaults.
ALLOWANCE = 128 * MIB


def test_as_many_receipts_as_the_budget_holds_of_the_largest_message() -> None:
    largest = 257 * MIB
    assert receipts_for(UPLOAD_HOLDS * largest * 3 + 1, largest) == 3
    assert receipts_for(1280 * MIB, largest) == 1
    # A budget smaller than one largest message still lets one message in at a time (the
    # budget then refuses it once its length is known).
    assert receipts_for(MIB, largest) == 1
    assert receipts_for(0, largest) == 0  # admission off: grpc's own behaviour


def test_bandwidth_probing_is_off_while_admission_is_on() -> None:
    assert receipt_options(1) == [("grpc.http2.bdp_probe", 0)]
    assert receipt_options(0) == []


def _container_limit() -> int:
    """The services' memory limit in compose.yaml at its default (``${WIRELAB_SUT_MEMORY:-2g}``)."""
    raw = yaml.safe_load((REPO / "compose.yaml").read_text())["x-service-under-test"]
    value = re.fullmatch(r"\$\{WIRELAB_SUT_MEMORY:-(\d+)([gm])\}", raw["mem_limit"])
    assert value is not None, raw["mem_limit"]
    return int(value[1]) * {"g": 1024, "m": 1}[value[2]] * MIB


def test_the_defaults_bound_a_burst_within_the_container() -> None:
    """Admitted calls hold at most the budget, messages in receipt at most twice their limit
    each (grpc's buffer and the bytes it hands over), whatever the size of the burst."""
    settings = Settings()
    budget = settings.limits.payload_budget_bytes
    largest = settings.grpc_max_message_bytes
    receipts = receipts_for(budget, largest)
    assert receipts >= 1
    bound = budget + receipts * 2 * largest + ALLOWANCE
    assert bound <= _container_limit(), (bound / MIB, _container_limit() / MIB)

"""The healthcheck benchmark (wirelab_perf.probes): it runs compose's own healthchecks,
mapped onto the checkout, against real services, and prints what each check costs."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from wirelab_bench.knobs import REPO
from wirelab_perf import probes

NODE = shutil.which("node")


def test_each_checked_service_runs_its_compose_healthcheck_from_the_checkout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WIRELAB_HEALTHCHECK_INTERVAL", raising=False)
    checks = probes.healthchecks()
    assert set(checks) == set(probes.CHECKED)
    for name, (runtime, protocol) in probes.CHECKED.items():
        check = checks[name]
        assert check.interval_s == 10.0
        if runtime == "python":
            assert check.command == [sys.executable, "-m", "wirelab.probe", protocol]
        else:
            script = Path(check.command[1])
            assert check.command[0] == "node" and script.is_file(), check.command
            assert script.is_relative_to(REPO) and check.command[2] == protocol


@pytest.mark.parametrize("argv", [["--services", "soap"], ["--services", ""]])
def test_unknown_services_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        probes.main(argv)
    assert exited.value.code == 2
    assert "unknown or no service" in capsys.readouterr().err


@pytest.mark.integration
def test_it_prints_a_cost_per_check_for_each_service(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WIRELAB_HEALTHCHECK_INTERVAL", raising=False)
    services = ["rest", "grpc", *(["rest-node", "grpc-node"] if NODE else [])]
    assert probes.main(["--checks", "2", "--services", ",".join(services)]) == 0
    out = capsys.readouterr().out
    for name in services:
        row = re.search(rf"^{re.escape(name)} +(\S.*?) +(\d+) +(\d+)-(\d+) +([\d.]+) at 10s$",
                        out, re.MULTILINE)  # fmt: skip
        assert row, out
        median, low, high, share = (float(row[i]) for i in (2, 3, 4, 5))
        assert 0 < low <= median <= high
        assert share == pytest.approx(median / 100, abs=0.06)


def test_the_interval_is_composes_own_variable_or_its_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert probes._seconds("10s") == 10.0 and probes._seconds("1m") == 60.0
    variable = "${WIRELAB_HEALTHCHECK_INTERVAL:-10s}"
    monkeypatch.delenv("WIRELAB_HEALTHCHECK_INTERVAL", raising=False)
    assert probes._seconds(variable) == 10.0
    monkeypatch.setenv("WIRELAB_HEALTHCHECK_INTERVAL", "3s")
    assert probes._seconds(variable) == 3.0

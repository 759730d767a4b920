"""promtool of the pinned Prometheus release (prometheus/get-promtool) checks the config, the rules
and their tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.config.queries import REPO

PROMETHEUS = REPO / "prometheus"


@pytest.fixture(scope="module")
def promtool() -> Path:
    found = subprocess.run(
        [PROMETHEUS / "get-promtool"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return Path(found)


def run(promtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Relative paths, as in the repository: rule_files and test rule_files resolve against them.
    return subprocess.run([promtool, *args], cwd=PROMETHEUS, capture_output=True, text=True)


def test_config_is_valid_and_loads_both_rule_files(promtool: Path) -> None:
    done = run(promtool, "check", "config", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    # A glob that matches nothing is not an error for promtool: insist both files were found.
    assert "SUCCESS: 2 rule files found" in done.stdout, done.stdout


def test_rules_are_valid(promtool: Path) -> None:
    files = sorted(str(p.relative_to(PROMETHEUS)) for p in (PROMETHEUS / "rules").glob("*.yml"))
    assert len(files) == 2
    done = run(promtool, "check", "rules", *files)
    assert done.returncode == 0, done.stdout + done.stderr


def test_rule_unit_tests_pass(promtool: Path) -> None:
    tests = sorted(str(p.relative_to(PROMETHEUS)) for p in (PROMETHEUS / "tests").glob("*.yml"))
    assert tests, "no promtool rule tests in prometheus/tests"
    done = run(promtool, "test", "rules", *tests)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_wrong_expectation_fails(promtool: Path, tmp_path: Path) -> None:
    # The unit tests can fail: the same down-target test expecting no alert must not pass.
    broken = tmp_path / "broken_test.yml"
    broken.write_text(
        f"rule_files: [{PROMETHEUS / 'rules' / 'wirelab.alerts.yml'}]\n"
        "evaluation_interval: 1s\n"
        "tests:\n"
        "  - interval: 1s\n"
        "    input_series:\n"
        '      - series: \'up{job="rest", instance="rest:9100"}\'\n'
        "        values: 0x30\n"
        "    alert_rule_test:\n"
        "      - eval_time: 20s\n"
        "        alertname: WirelabTargetDown\n"
        "        exp_alerts: []\n"
    )
    done = run(promtool, "test", "rules", str(broken))
    assert done.returncode != 0, done.stdout

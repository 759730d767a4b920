"""A run through a real Toxiproxy on loopback: the profile adds its round trip on both protocols,
the manifest records what was applied, and the proxy is left as it was found (docs/network.md)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pandas as pd
import pytest
from wirelab_bench.cli import main
from wirelab_bench.report import render
from wirelab_bench.runner import EXIT_LAB_NOT_READY

from tests.bench.lab import Services, direct_then, free_ports, running_services
from tests.gobuild import go_build

pytestmark = pytest.mark.integration

RTT_MS = 30
SCENARIO = direct_then("wan")


@pytest.fixture(scope="module")
def toxiproxy_binary() -> Path:
    """Toxiproxy at compose.yaml's version, built once from the Go module proxy."""
    return go_build("toxiproxy") / "toxiproxy"


@pytest.fixture(scope="module")
def lab(
    toxiproxy_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Services, str, str, str]]:
    """Both services, and a Toxiproxy in front of each as toxiproxy/toxiproxy.json wires the
    lab's; yields the services, the API URL and the proxied REST URL and gRPC target."""
    logs = tmp_path_factory.mktemp("network-logs")
    with running_services(logs) as services:
        api, rest, grpc = free_ports(3)
        config = logs / "toxiproxy.json"
        proxies = [
            {"name": "rest", "listen": f"127.0.0.1:{rest}", "upstream": services.rest_url[7:]},
            {"name": "grpc", "listen": f"127.0.0.1:{grpc}", "upstream": services.grpc_target},
        ]
        config.write_text(json.dumps(proxies))
        proxy = subprocess.Popen(
            [str(toxiproxy_binary), "-host=127.0.0.1", f"-port={api}", f"-config={config}"],
            stdout=(logs / "toxiproxy.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{api}"
            deadline = time.monotonic() + 20
            while True:
                try:
                    if len(httpx.get(f"{url}/proxies", timeout=1).json()) == 2:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, (logs / "toxiproxy.log").read_text()
                time.sleep(0.2)
            yield services, url, f"http://127.0.0.1:{rest}", f"127.0.0.1:{grpc}"
        finally:
            proxy.terminate()
            proxy.wait(10)


def _bench(lab: tuple[Services, str, str, str], root: Path, *extra: str) -> tuple[int, Path]:
    services, api, rest, grpc = lab
    (root / "wan.toml").write_text(SCENARIO)
    profiles = root / "profiles.toml"
    profiles.write_text(f'[wan]\ndescription = "test"\nrtt_ms = {RTT_MS}\n')
    results = root / "results"
    args = [
        *services.args(results),
        *("--network-profiles", str(profiles), "--toxiproxy-url", api),
        *("--net-rest-url", rest, "--net-grpc-target", grpc, "--progress", "off"),
    ]
    code = main(["bench", str(root / "wan.toml"), *args, *extra])
    (run,) = results.glob("*_wan")
    return code, run


@pytest.fixture(scope="module")
def finished(
    lab: tuple[Services, str, str, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[int, Path]:
    return _bench(lab, tmp_path_factory.mktemp("bench"))


def test_the_profile_adds_its_round_trip_on_both_protocols(finished: tuple[int, Path]) -> None:
    code, run = finished
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == 0, manifest.get("interrupted") or manifest.get("gates")
    tidy = pd.read_csv(run / "tidy.csv")
    # The mean, not p50: the contract's buckets are 30, 50 and 75 ms around a WAN's round trip,
    # so a quantile there is interpolated over 20 ms; the mean is the histogram's exact sum.
    mean = tidy.pivot_table(index="protocol", columns="network", values="client_mean_ms")
    added = mean["wan"] - mean["direct"]
    # A whole round trip on each call, not half (one direction) nor two (delays stacking);
    # the upper side leaves room for a busy machine's scheduling.
    assert ((added > RTT_MS * 0.9) & (added < RTT_MS * 1.5)).all(), mean
    assert set(tidy.network_rtt_ms) == {0, RTT_MS}


def test_the_manifest_records_what_the_proxy_applied_and_the_reset(
    finished: tuple[int, Path], lab: tuple[Services, str, str, str]
) -> None:
    _, run = finished
    manifest = json.loads((run / "manifest.json").read_text())
    wan = manifest["network"]["wan"]
    assert (wan["rtt_ms"], wan["jitter_ms"]) == (RTT_MS, 0)
    latencies = {
        proxy: sorted(t["attributes"]["latency"] for t in toxics)
        for proxy, toxics in wan["toxics"].items()
    }
    assert latencies == {"rest": [15, 15], "grpc": [15, 15]}
    assert manifest["network_reset"] == "ok"
    api = lab[1]
    assert all(httpx.get(f"{api}/proxies/{p}/toxics").json() == [] for p in ("rest", "grpc"))


def test_without_toxiproxy_a_network_run_is_refused_before_measuring(
    lab: tuple[Services, str, str, str], tmp_path: Path
) -> None:
    code, run = _bench(lab, tmp_path, "--toxiproxy-url", "http://127.0.0.1:9")
    manifest = json.loads((run / "manifest.json").read_text())
    assert code == EXIT_LAB_NOT_READY and manifest["cells_done"] == []
    assert "make lab PROFILES=netem" in manifest["interrupted"]["reason"]


def test_wirelab_network_puts_a_lab_profile_on_and_takes_it_off(
    lab: tuple[Services, str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    api = lab[1]
    assert main(["network", "region", "--toxiproxy-url", api]) == 0
    shown = json.loads(capsys.readouterr().out)
    jitter = {p: sum(t["attributes"]["jitter"] for t in shown[p]) for p in ("rest", "grpc")}
    assert jitter == {"rest": 5, "grpc": 5}
    assert main(["network", "show", "--toxiproxy-url", api]) == 0
    assert json.loads(capsys.readouterr().out) == shown
    assert main(["network", "direct", "--toxiproxy-url", api]) == 0
    assert json.loads(capsys.readouterr().out) == {"rest": [], "grpc": []}
    assert main(["network", "moon", "--toxiproxy-url", api]) == 2
    # --hops puts a profile on the hop links only: this lab has the edges' proxies alone.
    assert main(["network", "direct", "--hops", "region", "--toxiproxy-url", api]) == 0
    assert json.loads(capsys.readouterr().out) == {"rest": [], "grpc": []}
    assert main(["network", "zone", "--hops", "direct", "--toxiproxy-url", api]) == 0
    assert all(json.loads(capsys.readouterr().out).values())
    for bad in (["direct", "--hops", "moon"], ["show", "--hops", "region"]):
        assert main(["network", *bad, "--toxiproxy-url", api]) == 2
    assert main(["network", "direct", "--toxiproxy-url", api]) == 0


def test_the_report_compares_the_protocols_across_networks(finished: tuple[int, Path]) -> None:
    _, run = finished
    html = render(run).read_text()
    nb = json.loads((run / "report.ipynb").read_text())
    errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    assert not errors
    assert "REST against gRPC as the round trip grows" in html
    assert "Applied, as Toxiproxy reported it: wan (30 ms ± 0)" in html
    assert (run / "network_ratio.png").is_file()

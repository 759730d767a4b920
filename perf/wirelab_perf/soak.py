"""Soak: each service held at 70 % of its saturation rate of small order calls for 10 minutes.

Each service runs alone on one core (metrics on, as in the lab), the load tool (wrk for REST,
ghz for gRPC) on the other, from --connections connections or workers. The saturation rate is
found first, closed-loop at a few concurrencies, after a quiet baseline of the probe (one small
call every 0.1 s throughout). The service's RSS and open file descriptors are sampled during the
load; growth compares the median of the last tenth of the samples with that of the first tenth,
after --warmup-seconds. Prints answers by status, RSS and descriptor growth, the probe's median
at the start and end of the load, and whether the service survived. Goals: no crash, growth of
RSS and of open descriptors < 10 %.
"""

from __future__ import annotations

import argparse
import sys
import time

from wirelab_bench.knobs import parser

from wirelab_perf.overhead import find_ghz
from wirelab_perf.prober import between, median_ms, periodic
from wirelab_perf.stress import (
    MIB,
    counts,
    drive,
    growth,
    outcomes,
    saturated,
    verdict,
)
from wirelab_perf.svcprocs import CLIENT_CPU, SERVER_CPU, pin

GROWTH_GOAL = 0.10


def soak(protocol: str, a: argparse.Namespace, ghz_binary: str) -> bool:
    """One protocol's run; prints its figures and returns whether every goal was met."""
    with saturated(protocol, a, ghz_binary) as run:
        svc, probes, baseline, best = run.svc, run.probes, run.baseline_ms, run.best
        rate = a.load * best
        print(f"{protocol:4} offering {rate:,.0f} calls/s ({a.load:.0%}) for {a.duration} s from "
              f"{a.connections} connections", flush=True)  # fmt: skip
        fds_before, served_before = svc.open_fds(), outcomes(svc)
        start = time.monotonic()

        def sample() -> tuple[float, int, int]:
            return time.monotonic(), svc.rss(), svc.open_fds()

        with periodic(a.sample_seconds, sample) as samples:
            load = drive(svc, ghz_binary, rate, a.connections, a.duration, baseline)
        end = time.monotonic()
        time.sleep(2.0)  # let closed connections go
        alive = svc.alive()
        fds_after = svc.open_fds() if alive else 0
        served = outcomes(svc) - served_before
        # The probes of the first and last tenth of the load, after the warm-up.
        warm = start + min(a.warmup_seconds, a.duration / 4)
        tenth = (end - warm) / 10
        early, late = between(probes, warm, warm + tenth), between(probes, end - tenth, end)
    if not alive:
        print(f"{protocol:4} crashed: YES; load tool saw {counts(load.codes)}", flush=True)
        return False
    kept = [(rss, fds) for t, rss, fds in samples if t >= warm]
    rss_growth = growth([rss for rss, _ in kept])
    fds_growth = growth([fds for _, fds in kept])
    print(f"{protocol:4} served {load.ok_per_second:,.0f} calls/s ok "
          f"({load.ok_per_second / best:.0%} of saturation); load tool saw "
          f"{counts(load.codes)}; p50 {load.p50_ms:.1f} ms, p99 {load.p99_ms:.1f} ms")  # fmt: skip
    print(f"{protocol:4} the service counted {counts(served)}")
    print(f"{protocol:4} probe median {median_ms(early):.2f} ms early in the load, "
          f"{median_ms(late):.2f} ms at its end")  # fmt: skip
    rss_ok, fds_ok = rss_growth < GROWTH_GOAL, fds_growth < GROWTH_GOAL
    print(f"{protocol:4} RSS {kept[0][0] / MIB:.1f} -> {kept[-1][0] / MIB:.1f} MiB over "
          f"{len(kept)} samples, growth {rss_growth:+.1%} (goal < {GROWTH_GOAL:.0%}: "
          f"{verdict(rss_ok)})")  # fmt: skip
    print(f"{protocol:4} open fds {fds_before} before the load, {kept[0][1]} -> {kept[-1][1]} "
          f"during it, growth {fds_growth:+.1%} (goal < {GROWTH_GOAL:.0%}: {verdict(fds_ok)}), "
          f"{fds_after} after; crashed: no", flush=True)  # fmt: skip
    return rss_ok and fds_ok


def main(argv: list[str] | None = None) -> int:
    args = parser("wirelab perf soak", __doc__, "WIRELAB_SOAK")
    parsed = args.parse_args(argv)
    protocols = [p for p in parsed.protocols.split(",") if p]
    ghz_binary = find_ghz(parsed.ghz) if "grpc" in protocols else ""
    pin(CLIENT_CPU)  # the probe's and sampler's threads inherit it; the service has the other
    print(f"service on CPU {SERVER_CPU}, load tool, probe and sampler on CPU {CLIENT_CPU}")
    met = [soak(protocol, parsed, ghz_binary) for protocol in protocols]
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())

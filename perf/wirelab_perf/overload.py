"""Overload: each service offered about 3x its saturation rate of small order calls for 60 s.

Each service runs alone on one core (metrics on, as in the lab), the load tool (wrk for REST,
ghz for gRPC) on the other. A probe sends one small call every 0.1 s throughout: its quiet
median before any load is the baseline. The saturation rate is found first, closed-loop at a
few concurrencies. The overload then offers --factor times that rate from as many connections
(wrk) or workers (ghz) as that rate needs when each waits --pause-ms between calls: what the
service cannot serve waits in the clients, up to that many calls in flight at once.

Prints the answers by status as the load tool saw them and as the service counted them, the
service's peak RSS, whether it survived, and the time for the probe's latency to return under
--recovered-factor times the baseline after the load stops. Goals: no crash, peak RSS under the
lab's memory limit of a service, recovery <= 10 s.
"""

from __future__ import annotations

import argparse
import sys
import time

from wirelab_bench.knobs import parser

from wirelab_perf.overhead import find_ghz
from wirelab_perf.prober import between, median_ms, recovery_seconds
from wirelab_perf.stress import (
    MIB,
    counts,
    drive,
    in_flight_for,
    outcomes,
    saturated,
    verdict,
)
from wirelab_perf.svcprocs import CLIENT_CPU, SERVER_CPU, pin

RECOVERY_GOAL_S = 10.0


def overload(protocol: str, a: argparse.Namespace, ghz_binary: str) -> bool:
    """One protocol's run; prints its figures and returns whether every goal was met."""
    with saturated(protocol, a, ghz_binary) as run:
        svc, probes, baseline, best = run.svc, run.probes, run.baseline_ms, run.best
        rate = a.factor * best
        concurrency = in_flight_for(rate, a.pause_ms)
        print(f"{protocol:4} offering {rate:,.0f} calls/s ({a.factor:g}x) for {a.duration} s "
              f"from {concurrency} clients pausing {a.pause_ms:g} ms", flush=True)  # fmt: skip
        rss_before, served_before = svc.rss(), outcomes(svc)
        start = time.monotonic()
        load = drive(svc, ghz_binary, rate, concurrency, a.duration, baseline)
        end = time.monotonic()
        threshold = a.recovered_factor * baseline
        # Watch until recovered for 5 s in a row, or the watch time is up.
        while time.monotonic() < end + a.watch_seconds:
            time.sleep(1.0)
            back = recovery_seconds(probes, end, threshold)
            if back is not None and time.monotonic() - end - back >= 5:
                break
        back = recovery_seconds(probes, end, threshold)
        alive = svc.alive()
        peak, rss_after = (svc.peak_rss(), svc.rss()) if alive else (0, 0)
        served = outcomes(svc) - served_before
        under = between(probes, start, end)
    failed = sum(not p.ok for p in under)
    print(f"{protocol:4} served {load.ok_per_second:,.0f} calls/s ok; load tool saw "
          f"{counts(load.codes)}; p50 {load.p50_ms:.0f} ms, p99 {load.p99_ms:.0f} ms")  # fmt: skip
    print(f"{protocol:4} the service counted {counts(served)}")
    print(f"{protocol:4} probe under overload: median {median_ms(under):.1f} ms, "
          f"{failed} of {len(under)} failed")  # fmt: skip
    recovered = back is not None and back <= RECOVERY_GOAL_S
    rss_ok = alive and peak < a.rss_limit_mib * MIB
    took = f"{back:.0f} s" if back is not None else f"not within {a.watch_seconds} s"
    print(f"{protocol:4} recovery to <= {threshold:.2f} ms ({a.recovered_factor:g}x baseline): "
          f"{took} after the load stopped, goal <= {RECOVERY_GOAL_S:g} s: "
          f"{verdict(recovered)}")  # fmt: skip
    print(f"{protocol:4} RSS {rss_before / MIB:.0f} MiB before, peak {peak / MIB:.0f} MiB "
          f"(goal < {a.rss_limit_mib} MiB: {verdict(rss_ok)}), {rss_after / MIB:.0f} MiB "
          f"after; crashed: {'no' if alive else 'YES'}", flush=True)  # fmt: skip
    return alive and recovered and rss_ok


def main(argv: list[str] | None = None) -> int:
    args = parser("wirelab perf overload", __doc__, "WIRELAB_OVERLOAD")
    parsed = args.parse_args(argv)
    protocols = [p for p in parsed.protocols.split(",") if p]
    ghz_binary = find_ghz(parsed.ghz) if "grpc" in protocols else ""
    pin(CLIENT_CPU)  # the probe's thread inherits it; the service gets the other core
    print(f"service on CPU {SERVER_CPU}, load tool and probe on CPU {CLIENT_CPU}")
    met = [overload(protocol, parsed, ghz_binary) for protocol in protocols]
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())

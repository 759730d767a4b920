"""Benchmark: open-loop latency against offered rate per protocol, up to saturation (the knee).

wirelab-loadgen in open mode (wirelab_bench.loadgen) offers the small order call at each rate
of the sweep on a fixed schedule, whether or not the service keeps up: a closed loop would slow
down with the server and hide its queue. Arrivals are evenly spaced, or a Poisson process
(``--arrivals poisson``: exponential gaps, seeded); ``--arrivals constant,poisson`` runs both at
each rate, so the two compare within one run. Every protocol and arrival process at each rate in
turn (the order alternating), on services pinned to one core and the generator to the other;
prints a row per run and each series' knee, the highest rate still served on time, and writes
the rows as CSV.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import asdict
from pathlib import Path

from wirelab_bench.knobs import parser
from wirelab_bench.loadgen import ARRIVALS, OpenRun, knee, run_open

from wirelab_perf import write_rows
from wirelab_perf.crosscheck import BODY
from wirelab_perf.locust_overhead import exit_on_sigterm, services
from wirelab_perf.svcprocs import CLIENT_CPU

# The dashboards' palette (tests/config/test_palette.py holds every plot to it).
COLORS = {"rest": "tab:blue", "grpc": "tab:orange"}


def plot(runs: dict[tuple[str, str], list[OpenRun]], path: Path) -> None:
    """p50 and p99 against the rate answered, per protocol and arrival process: the curve bends
    up at the knee."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for (protocol, arrivals), series in runs.items():
        answered = [r.answered_per_s for r in series]
        marker = "o" if arrivals == "constant" else "s"
        for stat, style in (("p50", "-"), ("p99", "--")):
            values = [r.median_ms if stat == "p50" else r.p99_ms for r in series]
            ax.plot(answered, values, style, marker=marker, color=COLORS[protocol],
                    label=f"{protocol} {arrivals} {stat}")  # fmt: skip
        if (k := knee(series)) is not None:
            ax.axvline(k.answered_per_s, color=COLORS[protocol], alpha=0.3)
    ax.set_yscale("log")
    ax.set_xlabel("calls/s answered (offered on a fixed schedule)")
    ax.set_ylabel("latency from the scheduled start (ms)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parser("wirelab perf openloop", __doc__, "WIRELAB_OPENLOOP")
    ns = args.parse_args(argv)
    rates = [float(r) for r in ns.rates.split(",")]
    if rates != sorted(rates) or not rates or rates[0] <= 0:
        args.error(f"--rates must be positive and ascending, got {ns.rates!r}")
    processes = [a for a in ns.arrivals.split(",") if a]
    if not processes or set(processes) - set(ARRIVALS):
        args.error(f"--arrivals from {', '.join(ARRIVALS)}, got {ns.arrivals!r}")
    if shutil.which(ns.loadgen) is None:
        print(f"no wirelab-loadgen at {ns.loadgen}: make tools")
        return 2
    exit_on_sigterm()
    runs: dict[tuple[str, str], list[OpenRun]] = {
        (p, a): [] for p in ("rest", "grpc") for a in processes
    }
    rows = []
    print(f"{'protocol':8} {'arrivals':8} {'offered/s':>9} {'answered/s':>10} {'p50 ms':>8} "
          f"{'p99 ms':>8} {'mean ms':>8} {'dropped':>7} {'failed':>6}"
          f" {'loadgen CPU':>11}")  # fmt: skip
    with services() as lab:
        for i, rate in enumerate(rates):
            order = list(runs) if i % 2 == 0 else list(reversed(runs))
            for protocol, arrivals in order:
                target = lab.grpc if protocol == "grpc" else lab.rest
                r = run_open(ns.loadgen, protocol, target, BODY, rate, ns.vus, ns.seconds,
                             CLIENT_CPU, arrivals)  # fmt: skip
                runs[(protocol, arrivals)].append(r)
                rows.append({"protocol": protocol, "arrivals": arrivals, **asdict(r)})
                print(
                    f"{protocol:8} {arrivals:8} {r.offered_per_s:9.0f} {r.answered_per_s:10.1f}"
                    f" {r.median_ms:8.3f} {r.p99_ms:8.3f} {r.mean_ms:8.3f} {r.dropped:7d}"
                    f" {r.failed:6d} {r.client_cpu:11.2f}",
                    flush=True,
                )
    write_rows(Path(ns.csv), rows)
    try:
        plot(runs, Path(ns.plot))
    except ImportError:
        print("no matplotlib: no plot (pip install matplotlib, or the notebook extra)")
    for (protocol, arrivals), series in runs.items():
        k = knee(series)
        where = f"{k.offered_per_s:g} calls/s (p99 {k.p99_ms:.2f} ms)" if k else "below the sweep"
        print(f"{protocol:4} {arrivals:8} knee: {where}; rows in {ns.csv}, plot in {ns.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

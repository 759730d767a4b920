"""The `wirelab` command: the runner, the report, the comparison and the lab's own experiments."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from wirelab.contract.table import value

from wirelab_bench import experiments
from wirelab_bench import knobs as knob_table
from wirelab_bench.cellcost import cell_cost
from wirelab_bench.network import DIRECT, NetworkError, Toxiproxy, load_profiles
from wirelab_bench.report import NOTEBOOK, render, resolve_run
from wirelab_bench.runner import EXIT_GATE_FAILED, EXIT_LAB_NOT_READY, EXIT_USAGE, run
from wirelab_bench.scenario import Scenario
from wirelab_bench.scenario_file import (
    ScenarioError,
    check_routes,
    load_scenario,
    resolve,
    select_loads,
)

EPILOG = """exit codes:
  0  every cell measured and within its gates
  1  every cell measured, at least one over a gate (error ratio or p99)
  2  usage error or invalid scenario file
  3  lab not ready: health check timed out, the protocols answered differently, the lab
     runs another topology than the scenario's (the message names `make lab TOPOLOGY=...`),
     or a network profile is asked for and no Toxiproxy answers (`make lab PROFILES=netem`)
  4  incomplete: interrupted (Ctrl-C, SIGTERM) or the lab/load generator failed mid-run;
     the results folder is kept with status "incomplete" and what was measured
"""


COMPARE_EPILOG = """exit codes (a CI gate):
  0  no regression flagged (changes within the intervals, improvements, or one repetition only)
  1  at least one regression: a figure got worse and the two runs' 95 % intervals do not overlap
  2  usage error (a folder without manifest.json or tidy.csv), or refused: the manifests differ
     in host, images, the runner's knobs, servers, topology, network, scenario shape or, where
     both runs know it, tracing (the message names each field; --force compares anyway)
"""


REPEAT_EPILOG = """exit codes:
  0  the table is written
  2  usage error (under two folders, a folder without manifest.json or tidy.csv), or refused:
     the runs are of other scenarios or differ as `wirelab compare` refuses (--force computes
     anyway)
"""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="wirelab",
        description="wirelab lab commands",
        epilog="the lab's own experiments, `wirelab perf <name> --help` for each one's options:\n"
        + experiments.listing(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(dest="command", required=True)
    bench = sub.add_parser(
        "bench",
        help="run a benchmark scenario against the lab",
        description="Run a scenario (scenarios/<name>.toml or a path) against running REST and "
        "gRPC services and write results/<UTC time>_<scenario>/. Every option can also be set "
        "by its WIRELAB_BENCH_* environment variable.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_argument("scenario", help="scenario name (smoke, quick, full, iit, ...) or file path")
    bench.add_argument(
        "--dry-run", action="store_true", help="print the cells and planned time, measure nothing"
    )
    bench.add_argument(
        "--runs",
        type=int,
        default=1,
        help="run the scenario this many times, one results folder each, then write the "
        "run-to-run spread (repeatability.csv, .html) into the last one (default 1)",
    )
    bench.add_argument(
        "--loads",
        default="",
        help="only these load levels, by label, comma-separated (e.g. light: the iit study's "
        "Light level alone); default every level",
    )
    knob_table.add_arguments(bench)
    report = sub.add_parser(
        "report",
        help="execute the report notebook on a results folder and export it to HTML",
        description="Run notebooks/report.py top to bottom on one results folder (no Prometheus "
        "needed) and write report.ipynb, report.html and the PNGs next to the results.",
    )
    report.add_argument(
        "results", nargs="?", default="", help="results folder (default: the newest one)"
    )
    report.add_argument(
        "--results-dir",
        default=value("WIRELAB_BENCH_RESULTS_DIR"),
        help="where to find the newest folder (default 'results'; env WIRELAB_BENCH_RESULTS_DIR)",
    )
    report.add_argument(
        "--output-dir",
        default=value("WIRELAB_REPORT_OUTPUT"),
        help="where the report goes (default: the results folder; env WIRELAB_REPORT_OUTPUT)",
    )
    report.add_argument(
        "--notebook",
        default=value("WIRELAB_REPORT_NOTEBOOK"),
        help=f"the report notebook (default {NOTEBOOK}; env WIRELAB_REPORT_NOTEBOOK)",
    )
    report.add_argument(
        "--crosscheck",
        default=value("WIRELAB_REPORT_CROSSCHECK"),
        help="a `wirelab perf crosscheck` file: the report says per kind whether the gRPC/REST "
        "ratio depends on the generator (default: the results folder's crosscheck.json, if any; "
        "env WIRELAB_REPORT_CROSSCHECK)",
    )
    compare = sub.add_parser(
        "compare",
        help="compare two results folders cell by cell: B/A ratios, regressions flagged",
        description="Match the cells of run A (the baseline) and run B by topology, network,\n"
        "protocol, kind, load and payload; show B/A ratios of throughput, latency, CPU and\n"
        "bytes per request with 95 % confidence intervals; write compare_<A>.csv and\n"
        "compare_<A>.html next to run B (docs/bench.md, 'Comparing two runs').",
        epilog=COMPARE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("run_a", help="the baseline results folder")
    compare.add_argument("run_b", help="the results folder compared with it")
    compare.add_argument(
        "--force",
        action="store_true",
        help="compare even when the manifests differ in host, images, knobs or scenario shape",
    )
    compare.add_argument(
        "--output-dir",
        default=value("WIRELAB_COMPARE_OUTPUT"),
        help="where the CSV and HTML go (default: run B's folder; env WIRELAB_COMPARE_OUTPUT)",
    )
    repeat = sub.add_parser(
        "repeatability",
        help="the run-to-run spread of results folders of one scenario: per kind and figure",
        description="Per condition (kind, load, payload, ...) and figure (successful calls/s,\n"
        "median and p99 client latency): each run's figure for each protocol and its own\n"
        "gRPC/REST ratio, their mean, 95 % interval and coefficient of variation; writes\n"
        "repeatability.csv and repeatability.html into the last folder (docs/bench.md,\n"
        "'Repeatability').",
        epilog=REPEAT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    repeat.add_argument("runs", nargs="+", help="two or more results folders of one scenario")
    repeat.add_argument(
        "--force",
        action="store_true",
        help="compute even when the manifests differ in host, images, knobs or scenario",
    )
    repeat.add_argument(
        "--output-dir", default="", help="where the CSV and HTML go (default: the last folder)"
    )
    network = sub.add_parser(
        "network",
        help="put a network profile on the running lab's Toxiproxy (compose profile netem)",
        description="Apply a profile of toxiproxy/profiles.toml to both proxies alike, `direct` "
        "to take every toxic off, or `show` what is applied now (docs/network.md). The web "
        "UI's Locust reaches the proxies at http://toxiproxy:8000 and toxiproxy:50051.",
    )
    network.add_argument("profile", help="a profile name, direct, or show")
    network.add_argument(
        "--hops",
        default="",
        help="under a topology, this profile (or direct) on the hop links instead, the edges'"
        " proxies keeping PROFILE (default: PROFILE on every proxy)",
    )
    # The runner's own knobs for these two: one default, one variable each.
    knob_table.add_arguments(network, only=("toxiproxy_url", "network_profiles"))
    perf = sub.add_parser(
        "perf",
        help="run one of the lab's own experiments (listed below)",
        description="The lab's own performance: benchmarks that print figures (docs/perf.md). "
        "Everything after the experiment's name is its own options.",
    )
    names = perf.add_subparsers(dest="experiment", required=True, metavar="<experiment>")
    for name, experiment in experiments.installed().items():
        # No help of its own: `--help` after the name goes to the experiment's parser. argparse
        # formats a help line with %, so a "70 %" in it is escaped.
        line = experiments.summary(experiment).replace("%", "%%")
        names.add_parser(name, help=line, add_help=False)
    return top


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args, rest = cli.parse_known_args(argv)
    if args.command == "perf":
        return experiments.run(args.experiment, rest)
    if rest:
        cli.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "report":
        return _report(args)
    if args.command == "network":
        return _network(args)
    if args.command == "compare":
        return _compare(args)
    if args.command == "repeatability":
        out = Path(args.output_dir) if args.output_dir else None
        return _repeatability([Path(r) for r in args.runs], args.force, out)
    if args.runs < 1:
        cli.error("--runs must be 1 or more")
    knobs = knob_table.from_namespace(args)
    try:
        profiles = load_profiles(Path(knobs.network_profiles))
        scenario = load_scenario(resolve(args.scenario, Path(knobs.scenarios_dir)), profiles)
        if knobs.network:
            if knobs.network != DIRECT and knobs.network not in profiles:
                known = ", ".join([DIRECT, *profiles])
                raise ScenarioError(f"unknown --network {knobs.network!r} (known: {known})")
            scenario = scenario.with_network(knobs.network)
            check_routes(scenario)
        if args.loads:
            scenario = select_loads(scenario, args.loads)
    except (ScenarioError, NetworkError) as exc:
        print(f"wirelab bench: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if any(g.generator == "loadgen" for g in scenario.groups) and not shutil.which(knobs.loadgen):
        print(f"wirelab bench: no wirelab-loadgen at {knobs.loadgen}: make tools", file=sys.stderr)
        return EXIT_USAGE
    if args.dry_run:
        for cell in scenario.cells():
            print(f"{cell.cell_id}\t{cell.seconds:g} s")
        cost = cell_cost(Path(knobs.results_dir), scenario.name)
        minutes = scenario.estimated_seconds(cost.seconds) / 60
        print(f"{len(scenario.cells())} cells, about {minutes:.1f} min")
        print(f"({cost.seconds:.1f} s per cell beyond its phases: {cost.source})")
        if args.runs > 1:
            print(f"{args.runs} runs, about {args.runs * minutes:.1f} min")
        return 0
    if args.runs == 1:
        return run(scenario, knobs)[0]
    return _runs(scenario, knobs, args.runs)


def _runs(scenario: Scenario, knobs: knob_table.Knobs, runs: int) -> int:
    """The scenario ``runs`` times, odd runs in reversed order, then their repeatability; the
    worst exit code. A run that stops short (lab not ready, interrupted) ends the series: the
    next would not repeat it."""
    folders, worst = [], 0
    for i in range(runs):
        print(f"wirelab bench: run {i + 1} of {runs}", file=sys.stderr)
        code, folder = run(replace(scenario, reversed_order=i % 2 == 1), knobs)
        worst = max(worst, code)
        if code > EXIT_GATE_FAILED:
            break
        folders.append(folder)
    if len(folders) < 2:
        print("wirelab bench: under two complete runs, no repeatability table", file=sys.stderr)
        return worst
    # The series' exit code is its runs': a table not written (the bench image has no scipy)
    # says why on stderr, and the folders are there for `wirelab repeatability` later.
    _repeatability(folders, force=False, output=None)
    return worst


def _repeatability(folders: list[Path], force: bool, output: Path | None) -> int:
    # Imported here: scipy comes with the notebook extra, which `wirelab bench` does not need.
    try:
        from wirelab_bench import compare as cmp
        from wirelab_bench import repeatability as rep
    except ImportError as exc:
        later = " ".join(map(str, folders))
        print(f"wirelab repeatability: {exc}; with the notebook extra installed, "
              f"`wirelab repeatability {later}`", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    if len(folders) < 2:
        print("wirelab repeatability: two or more results folders are needed", file=sys.stderr)
        return EXIT_USAGE
    try:
        loaded = [cmp.load_run(folder) for folder in folders]
    except FileNotFoundError as exc:
        print(f"wirelab repeatability: {exc}", file=sys.stderr)
        return EXIT_USAGE
    blocking = rep.differences(folders, [manifest for manifest, _ in loaded])
    if blocking and not force:
        print("wirelab repeatability: refused, the runs differ:", file=sys.stderr)
        for line in blocking:
            print(f"  {line}", file=sys.stderr)
        print("(--force computes anyway)", file=sys.stderr)
        return EXIT_USAGE
    notes = [f"{f}: status {m.get('status')}" for f, (m, _) in zip(folders, loaded, strict=True)
             if m.get("status") != "complete"]  # fmt: skip
    table = rep.table([tidy for _, tidy in loaded])
    moved = rep.movers([tidy for _, tidy in loaded], folders)
    csv, page = rep.write(output or folders[-1], folders, table, [*blocking, *notes, *moved])
    for line in [*rep.summary(table), *moved]:
        print(line)
    print(f"written: {csv}, {page}")
    return 0


def _report(args: argparse.Namespace) -> int:
    try:
        run_dir = resolve_run(args.results, args.results_dir)
    except FileNotFoundError as exc:
        print(f"wirelab report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not Path(args.notebook).is_file():
        print(f"wirelab report: no notebook at {args.notebook}", file=sys.stderr)
        return EXIT_USAGE
    if args.crosscheck and not Path(args.crosscheck).is_file():
        print(f"wirelab report: no cross-check file at {args.crosscheck}", file=sys.stderr)
        return EXIT_USAGE
    output = Path(args.output_dir) if args.output_dir else None
    crosscheck = Path(args.crosscheck) if args.crosscheck else None
    html = render(run_dir, output, Path(args.notebook), crosscheck=crosscheck)
    print(html)
    return 0


def _compare(args: argparse.Namespace) -> int:
    # Imported here: scipy comes with the notebook extra, which `wirelab bench` does not need.
    from wirelab_bench import compare as cmp

    a, b = Path(args.run_a), Path(args.run_b)
    try:
        (manifest_a, tidy_a), (manifest_b, tidy_b) = cmp.load_run(a), cmp.load_run(b)
    except FileNotFoundError as exc:
        print(f"wirelab compare: {exc}", file=sys.stderr)
        return EXIT_USAGE
    blocking, shown = cmp.manifest_differences(manifest_a, manifest_b)
    if blocking and not args.force:
        print("wirelab compare: refused, the runs differ in:", file=sys.stderr)
        for line in blocking:
            print(f"  {line}", file=sys.stderr)
        print("(--force compares them anyway)", file=sys.stderr)
        return cmp.EXIT_REFUSED
    table = cmp.compare(tidy_a, tidy_b)
    only_a, only_b = cmp.unmatched(tidy_a, tidy_b)
    notes = {
        "Differences that invalidate the comparison (compared with --force)": blocking,
        "Other differences": shown,
        "Cells only in A": only_a,
        "Cells only in B": only_b,
    }
    csv, page = cmp.write_report(
        Path(args.output_dir) if args.output_dir else b, a, b, table, notes
    )
    for line in cmp.summary(table):
        print(line)
    print(f"written: {csv}, {page}")
    return cmp.exit_code(table)


def _network(args: argparse.Namespace) -> int:
    try:
        profiles = load_profiles(Path(args.network_profiles))
        if args.profile not in (*profiles, DIRECT, "show"):
            known = ", ".join([*profiles, DIRECT, "show"])
            raise NetworkError(f"unknown profile {args.profile!r} (known: {known})")
        if args.hops and (args.hops not in (*profiles, DIRECT) or args.profile == "show"):
            known = ", ".join([*profiles, DIRECT])
            raise NetworkError(f"--hops takes a profile or {DIRECT} with one (known: {known})")
    except NetworkError as exc:
        print(f"wirelab network: {exc}", file=sys.stderr)
        return EXIT_USAGE
    proxy = Toxiproxy(args.toxiproxy_url)
    if why := proxy.unreachable():
        print(f"wirelab network: {why}; start it with `make lab PROFILES=netem`", file=sys.stderr)
        return EXIT_LAB_NOT_READY
    hops = args.hops or args.profile
    if args.profile == hops == DIRECT:
        proxy.reset()
    elif args.profile != "show":
        proxy.apply(profiles.get(args.profile), profiles.get(hops))
    print(json.dumps(proxy.toxics(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

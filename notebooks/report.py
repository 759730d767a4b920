# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # wirelab report: REST vs gRPC
#
# Reads one results folder written by `wirelab bench <scenario>` (nothing else: no live
# Prometheus) and turns it into tables, plots and a conclusion per interaction kind.
# Every number below comes from that folder; every sentence of the conclusions is generated
# from those numbers. Timings compare protocols **within this one run** only.

# %%
# mypy: disable-error-code="no-untyped-call"
# (IPython's display functions carry no annotations.)
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import Markdown, display  # type: ignore[attr-defined]
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from wirelab.contract import EDGE_PROTOCOLS, STREAM_KINDS
from wirelab.contract.table import value
from wirelab_bench import independence, repeatability, waterfall
from wirelab_bench.claims import (
    confirmed_orders,
    http2_split,
    pipeline_verdict,
    purpose,
    stated,
    verdict,
)
from wirelab_bench.compare import ci
from wirelab_bench.conclusions import compare_kind, latency_ratio, per_rep, throughput_ratio
from wirelab_bench.intervals import Ratio, across_repetitions
from wirelab_bench.loadgen import knee as last_on_time
from wirelab_bench.network import with_links
from wirelab_bench.scenario import PIPELINE_CHECK

# %% tags=["parameters"]
# The results folder to report on; empty = $WIRELAB_REPORT_RESULTS, else the newest folder
# under $WIRELAB_RESULTS_ROOT (default: ./results), then ../results.
results_dir = ""
# Where PNGs go; empty = $WIRELAB_REPORT_OUTPUT, else the results folder (or, if that is
# read-only as in the Jupyter container, <temp dir>/wirelab-report/<run>).
output_dir = ""
# A `wirelab perf crosscheck` file; empty = $WIRELAB_REPORT_CROSSCHECK (`wirelab report
# --crosscheck FILE`), else the results folder's crosscheck.json, if it has one.
crosscheck_file = ""

# %%
pd.set_option("display.width", 160)
pd.set_option("display.max_columns", 30)


def _latest(root: Path) -> Path:
    runs = sorted(p for p in root.iterdir() if (p / "manifest.json").exists())
    if not runs:
        raise FileNotFoundError(f"no results folder under {root}; run `wirelab bench smoke`")
    return runs[-1]


def _find_run() -> Path:
    chosen = results_dir or value("WIRELAB_REPORT_RESULTS")
    if chosen:
        return Path(chosen)
    roots = [value("WIRELAB_RESULTS_ROOT"), "../results"]
    for root in filter(None, roots):
        if Path(root).is_dir():
            return _latest(Path(root))
    raise FileNotFoundError("no results root found; set results_dir or WIRELAB_RESULTS_ROOT")


RUN = _find_run().resolve()
manifest = json.loads((RUN / "manifest.json").read_text())
tidy = pd.read_csv(RUN / "tidy.csv") if (RUN / "tidy.csv").exists() else pd.DataFrame()
hist_path = RUN / "histograms.csv"
hist = pd.read_csv(hist_path) if hist_path.exists() else pd.DataFrame()
if not hist.empty:
    hist["le"] = hist["le"].astype(float)  # "inf" stays text until told otherwise


def _output() -> Path:
    chosen = output_dir or value("WIRELAB_REPORT_OUTPUT")
    if chosen:
        out = Path(chosen)
    elif os.access(RUN, os.W_OK):
        out = RUN
    else:
        out = Path(tempfile.gettempdir()) / "wirelab-report" / RUN.name
    out.mkdir(parents=True, exist_ok=True)
    return out


OUT = _output()
SAVED: list[Path] = []


def save(fig: Figure, name: str) -> None:
    path = OUT / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    SAVED.append(path)
    display(fig)  # embedded in the notebook, so the HTML export carries it too
    plt.close(fig)


def say(text: str) -> None:
    display(Markdown(text))


# The dashboards' palette (REST blue, gRPC orange, the AMQP arm green); tests/config/test_palette.py
# holds them equal.
COLORS = {"rest": "tab:blue", "grpc": "tab:orange", "amqp": "tab:green"}
# REST over h2c (a group's rest_http, docs/http2.md) is an arm of the report only: the server
# counts it as "rest", so the dashboards cannot draw it apart.
COLORS["rest-h2c"] = "tab:cyan"


def grid(n: int, cols: int = 3) -> tuple[Figure, list[Axes]]:
    """One small panel per kind, three to a row."""
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, min(n, cols), figsize=(4.2 * min(n, cols), 3.2 * rows),
                             squeeze=False)  # fmt: skip
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    fig.tight_layout(h_pad=3, w_pad=2)
    return fig, flat[:n]


git = manifest.get("git") or {}
host = manifest.get("host") or {}
say(
    f"**Run** `{RUN.name}` — scenario **{manifest.get('scenario')}**, status "
    f"**{manifest.get('status')}**, {len(tidy)} of {manifest.get('cells_planned')} cells "
    "measured.  \n"
    f"git `{git.get('sha')}`{' (dirty)' if git.get('dirty') else ''}; host {host.get('cpu_count')} "
    f"cores, {host.get('memory_bytes', 0) / 2**30:.1f} GiB, kernel {host.get('kernel')}."
)
# A scenario that declares itself a pipeline check (smoke) gets its verdict, the tables and the
# plots, and no sentence comparing the protocols.
PIPELINE = purpose(manifest) == PIPELINE_CHECK
if PIPELINE:
    say(pipeline_verdict(manifest, len(tidy)))
elif manifest.get("status") != "complete":
    say(f"⚠ This run is **{manifest.get('status')}**: {manifest.get('interrupted')}.")
for what, why in (manifest.get("missing") or {}).items():
    say(f"- not measured: *{what}* — {why}")

# %% [markdown]
# ## The data
# One row per protocol x kind x load x payload x repetition. Cells where the load generator,
# not the service, was saturated are flagged: their throughput is a floor, not a capacity. So
# are cells whose service its CPU limit held back in 10 % of the limit's periods or more (the
# containers dashboard's red line): the limit shaped their throughput and their tail.

# %%
HAVE = not tidy.empty
# The precise generator first: small-call latency leads with its figures.
GENERATOR_NAMES = {"loadgen": "wirelab-loadgen (precise)", "locust": "Locust"}
if not HAVE:
    say("This results folder holds no measured cells; nothing below can be computed.")
else:
    tidy["generator_saturated"] = tidy["generator_saturated"].astype(bool)
    # Folders from before the generator was a group setting were all Locust's.
    tidy["generator"] = tidy.get("generator", "locust")
    # REST cells that spoke h2c are their own arm below, never averaged with HTTP/1.1's.
    if "rest_http" in tidy:
        tidy.loc[(tidy.protocol == "rest") & (tidy.rest_http == "h2c"), "protocol"] = "rest-h2c"
    COND = ["protocol", "kind", "group", "load", "users", "payload_bytes"]
    show = [
        "protocol", "kind", "load", "payload_bytes", "repetition", "requests_per_s",
        "error_pct", "client_p50_ms", "client_p99_ms", "server_p50_ms", "cpu_s_per_request",
        "wire_bytes_per_request", "generator_saturated",
    ]  # fmt: skip
    display(tidy[show].round(4))
    saturated = tidy[tidy["generator_saturated"]]
    if len(saturated):
        say(f"⚠ {len(saturated)} cell(s) had a saturated load generator: {list(saturated.cell_id)}")
    # Folders from before the column have none: nothing to flag.
    if "container_throttled_pct" in tidy:
        throttled = tidy[tidy.container_throttled_pct >= 10]
        held = ", ".join(
            f"{row.cell_id} ({row.container_throttled_pct:.0f} %)" for row in throttled.itertuples()
        )
        if held:
            say(f"⚠ {len(throttled)} cell(s) ran into the service's CPU limit: {held}")


# %% [markdown]
# ## Repetitions and confidence intervals
# Mean and 95 % confidence interval (Student's t) across repetitions of each condition.


# %%
def summarise(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    rows = []
    for keys, part in frame.groupby(COND, dropna=False):
        mean, low, high, _ = ci(part[column])
        rows.append({**dict(zip(COND, keys, strict=True)), "n": len(part), "mean": mean,
                     "ci_low": low, "ci_high": high})  # fmt: skip
    return pd.DataFrame(rows)


if HAVE:
    reps = int(tidy["repetition"].max()) + 1
    if reps < 2:
        say("One repetition per condition: confidence intervals need at least two "
            "(the `quick` and `smoke` scenarios have one; `full` has three).")  # fmt: skip
    for column in ("requests_per_s", "client_p50_ms", "client_p99_ms"):
        if tidy[column].notna().any():
            say(f"**{column}**")
            display(summarise(tidy, column).round(3))

# %% [markdown]
# ## The IIT study's tables, with wirelab's numbers
# Table 6.1: maximum CPU per protocol for the Light / Medium / Heavy workloads. Table 6.2:
# latency and throughput per scenario and workload. The study measured host-wide CPU and gave
# latency without saying which percentile; wirelab reports each service's own peak CPU (its
# container's when cAdvisor data exist, else its process's fastest rate between 1 s samples, in %
# of one core) and the client-side median latency. Its
# "throughput (ms)" column is given here as requests per second.

# %%
IIT_LOADS = ["light", "medium", "heavy"]
IIT_GROUPS = {
    "request_response": "Simple Request Response",
    "large_payload": "Handling Large Payloads",
    "streaming": "Streaming Data",
}
# The IIT study's own figures (docs/studies.md; Tables 6.1 and 6.2), shown beside wirelab's for
# reference only: other hardware, other code, host-wide CPU, unnamed latency statistic.
IIT_CPU = {"light": (56.9, 26.7), "medium": (57.4, 27.5), "heavy": (60.8, 31.8)}
IIT_LAT_THR = {
    ("request_response", "light"): (0.246, 1.75, 121, 229),
    ("request_response", "medium"): (0.681, 1.75, 116, 205),
    ("request_response", "heavy"): (6.19, 1.75, 94, 175),
    ("large_payload", "light"): (1.66, 1.75, 345, 687),
    ("large_payload", "medium"): (3.55, 1.75, 343, 647),
    ("large_payload", "heavy"): (10, 1.75, 309, 536),
    ("streaming", "light"): (0.103, 1.75, 173, 341),
    ("streaming", "medium"): (0.208, 1.75, 183, 324),
    ("streaming", "heavy"): (1.4, 1.75, 134, 261),
}
NAMES = {"rest": "REST", "grpc": "gRPC"}
iit = tidy[tidy["load"].isin(IIT_LOADS)] if HAVE else pd.DataFrame()
if iit.empty:
    say(
        "This results folder has no IIT workloads (load levels light/medium/heavy), so "
        "Tables 6.1 and 6.2 are not reproduced here. Run `wirelab bench iit` for them."
    )
else:
    # The study's CPU was a peak: prefer the container's, else the process's fastest 1 s rate.
    peaks = ("container_cpu_peak_pct", "server_cpu_peak_pct")
    cpu_col = next((c for c in peaks if c in iit and iit[c].notna().any()), "server_cpu_pct")
    rows = []
    for load in [x for x in IIT_LOADS if x in set(iit["load"])]:
        part = iit[iit["load"] == load]
        row = {"workload": load, "users": int(part["users"].max())}
        for proto in EDGE_PROTOCOLS:
            row[f"{NAMES[proto]} max CPU %"] = part[part.protocol == proto][cpu_col].max()
        row["IIT REST %"], row["IIT gRPC %"] = IIT_CPU[load]
        rows.append(row)
    say(f"**Table 6.1 (wirelab)** — peak CPU in % of one core, from `{cpu_col}`")
    display(pd.DataFrame(rows).round(1))
    rows = []
    for (group, kind, load), part in iit.groupby(["group", "kind", "load"]):
        row = {"scenario": f"{IIT_GROUPS.get(group, group)} ({kind})", "workload": load}
        by = {p: part[part.protocol == p] for p in EDGE_PROTOCOLS}
        for proto in EDGE_PROTOCOLS:
            row[f"{NAMES[proto]} latency p50 (ms)"] = by[proto]["client_p50_ms"].mean()
        for proto in EDGE_PROTOCOLS:
            row[f"{NAMES[proto]} throughput (req/s)"] = by[proto]["ok_per_s"].mean()
        published = IIT_LAT_THR.get((group, load), (math.nan,) * 4)
        row |= dict(zip(("IIT REST ms", "IIT gRPC ms", "IIT REST thr", "IIT gRPC thr"),
                        published, strict=True))  # fmt: skip
        rows.append(row)
    t62 = pd.DataFrame(rows)
    t62["order"] = t62["workload"].map(IIT_LOADS.index)
    say("**Table 6.2 (wirelab)** — client median latency, successful calls per second")
    display(t62.sort_values(["scenario", "order"]).drop(columns="order").round(3))

# %% [markdown]
# ## Latency percentiles against load

# %%
if HAVE:
    kinds = sorted(tidy["kind"].unique())
    fig, axes = grid(len(kinds))
    for ax, kind in zip(axes, kinds, strict=True):
        part = tidy[tidy.kind == kind]
        for proto, marker in (("rest", "o"), ("grpc", "s")):
            p = (
                part[part.protocol == proto]
                .groupby("users")[["client_p50_ms", "client_p95_ms", "client_p99_ms"]]
                .mean()
            )
            for col, style in (("client_p50_ms", "-"), ("client_p95_ms", "--")):
                if p[col].notna().any():
                    label = f"{proto} {col[7:10]}"
                    ax.plot(p.index, p[col], style, marker=marker, color=COLORS[proto], label=label)
            if p["client_p99_ms"].notna().any():
                label = f"{proto} p99"
                ax.plot(p.index, p["client_p99_ms"], ":", color=COLORS[proto], label=label)
        ax.set_title(kind)
        ax.set_xlabel("users")
        ax.set_ylabel("client latency (ms)")
        ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    save(fig, "latency_vs_load")
    if tidy["users"].nunique() < 2:
        say("Only one load level in this run: the curves are single points.")

# %% [markdown]
# ## Latency CDFs
# From the histogram bucket counts of each measured window (client side; server side where no
# client histogram exists), summed over repetitions, at each kind's first load and payload.


# %%
def cdf_frame(side: str) -> pd.DataFrame:
    if hist.empty:
        return pd.DataFrame()
    h = hist[(hist.side == side) & (hist.metric == "duration")]
    return h.merge(tidy[["cell_id", *COND]], on="cell_id")


def step_cdf(ax: Axes, p: pd.DataFrame, label: str, color: str, style: str = "-") -> None:
    """One CDF line from cumulative bucket counts (summed over the cells in ``p``)."""
    b = p.groupby("le")["count"].sum().sort_index()
    b = b[np.isfinite(b.index)]
    top = p[np.isinf(p["le"])]["count"].sum()
    if top > 0:
        # Stop one bucket after the last call: empty buckets up to 300 s say nothing.
        b = b.iloc[: int(np.searchsorted(b.to_numpy(), top)) + 2]
        ax.step(b.index * 1000, b.to_numpy() / top, style, where="post", label=label,
                color=color)  # fmt: skip


if HAVE:
    frame = cdf_frame("client")
    side = "client"
    if frame.empty or frame["count"].sum() == 0:
        frame, side = cdf_frame("server"), "server"
    if frame.empty or frame["count"].sum() == 0:
        say("No histogram buckets in this results folder: no CDFs.")
    else:
        kinds = sorted(frame["kind"].unique())
        fig, axes = grid(len(kinds))
        for ax, kind in zip(axes, kinds, strict=True):
            part = frame[frame.kind == kind]
            first = part.sort_values(["users", "payload_bytes"]).iloc[0]
            part = part[(part.users == first.users) & (part.payload_bytes == first.payload_bytes)]
            for proto, p in part.groupby("protocol"):
                step_cdf(ax, p, str(proto), COLORS[str(proto)])
            ax.set_xscale("log")
            ax.set_title(f"{kind} ({int(first.users)} users, {int(first.payload_bytes)} B)")
            ax.set_xlabel(f"{side} latency (ms)")
            ax.set_ylabel("fraction of calls")
            ax.legend(fontsize=7)
        save(fig, "latency_cdf")

# %% [markdown]
# ## Throughput at saturation
# The highest requests/s each protocol reached for each kind over this run's load levels.

# %%
if HAVE:
    best = tidy.groupby(["kind", "protocol"])["requests_per_s"].max().unstack("protocol")
    display(best.round(1))
    fig, ax = plt.subplots(figsize=(8, 3.4))
    best.plot.bar(ax=ax, color=COLORS)
    ax.set_ylabel("requests/s (max over loads)")
    save(fig, "throughput_max")

# %% [markdown]
# ## CPU-seconds and bytes per request (JSON vs protobuf)

# %%
if HAVE:
    per_req = tidy.groupby(["kind", "protocol"])[
        ["cpu_s_per_request", "request_bytes_per_request", "response_bytes_per_request",
         "wire_bytes_per_request"]
    ].mean()  # fmt: skip
    display(per_req.round(6))
    if per_req["cpu_s_per_request"].notna().any():
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
        (per_req["cpu_s_per_request"] * 1000).unstack("protocol").plot.bar(ax=axes[0], color=COLORS)
        axes[0].set_ylabel("server CPU ms per request")
        per_req["wire_bytes_per_request"].unstack("protocol").plot.bar(
            ax=axes[1], logy=True, color=COLORS
        )
        axes[1].set_ylabel("body bytes per request (both ways)")
        save(fig, "cpu_and_bytes_per_request")
    else:
        say("No server metrics in this folder: no CPU or bytes per request.")
    # The encodings side by side: JSON vs protobuf orders, base64 JSON vs raw binary blobs.
    pairs = (
        ("unary", "rest", "unary", "grpc", "request_bytes_per_request", "JSON order",
         "protobuf order"),
        ("upload", "rest", "upload_json", "rest", "request_bytes_per_request", "raw upload body",
         "base64 JSON upload body"),
        ("download", "rest", "download_json", "rest", "response_bytes_per_request",
         "raw download body", "base64 JSON download body"),
    )  # fmt: skip
    for kind_a, proto_a, kind_b, proto_b, column, name_a, name_b in pairs:
        if (kind_a, proto_a) in per_req.index and (kind_b, proto_b) in per_req.index:
            a, b = per_req.loc[(kind_a, proto_a), column], per_req.loc[(kind_b, proto_b), column]
            # Counted, not timed, so no interval; a pipeline check still compares nothing.
            if a > 0 and b > 0 and not PIPELINE:
                say(f"{name_b}: {b:.0f} bytes vs {name_a}: {a:.0f} bytes ({b / a:.2f}x).")

# %% [markdown]
# ## Streams: time to first message

# %%
streams = (
    tidy[tidy["client_ttfm_p50_ms"].notna() | tidy["server_ttfm_p50_ms"].notna()] if HAVE else tidy
)
if streams.empty:
    say(f"No stream kinds ({', '.join(sorted(STREAM_KINDS))}) in this run.")
else:
    ttfm = streams.groupby(["kind", "protocol", "payload_bytes"])[
        ["client_ttfm_p50_ms", "client_ttfm_p95_ms", "server_ttfm_p50_ms", "messages_per_s"]
    ].mean()
    display(ttfm.round(3))
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ttfm["client_ttfm_p50_ms"].unstack("protocol").plot.bar(ax=ax, color=COLORS)
    ax.set_ylabel("client time to first message p50 (ms)")
    save(fig, "stream_ttfm")

# %% [markdown]
# ## Payload throughput against size

# %%
blobs = tidy[tidy["kind"].str.contains("load")] if HAVE else tidy
if blobs.empty:
    say("No upload or download kinds in this run.")
else:
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for (kind, proto), p in blobs.groupby(["kind", "protocol"]):
        m = p.groupby("payload_bytes")["payload_bytes_per_s"].mean()
        ax.plot(m.index, m / 1e6, marker="o", label=f"{proto} {kind}")
    ax.set_xscale("log")
    ax.set_xlabel("payload size (bytes)")
    ax.set_ylabel("payload MB/s")
    ax.legend(fontsize=6, ncol=2)
    save(fig, "payload_throughput")
    if blobs["payload_bytes"].nunique() < 2:
        say("Only one payload size in this run: the curves are single points.")

# %% [markdown]
# ## Conclusions per interaction kind
# Generated from the table above: gRPC/REST ratios per condition (same kind, load, payload and
# generator), each with a 95 % interval: across the runs of the scenario when this folder holds
# their repeatability table (`wirelab bench <scenario> --runs N`, `wirelab repeatability`), else
# across the repetitions where there are several, else from the run's own spread (each window's
# per-second successful calls, each window's latency histogram), which leaves out the spread
# from run to run. A protocol is said to be ahead only where the interval excludes 1; a scenario
# that declares itself a pipeline check gets none.


# %%
def sides(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    return frame[frame.protocol == "rest"], frame[frame.protocol == "grpc"]


def claims() -> list[str]:
    out = []
    # Only cells that mostly worked: latencies and rates of failing calls prove nothing.
    unary = tidy[(tidy.kind == "unary") & (tidy.error_pct < 1)]
    # Small-call latency leads with the precise generator where the run has it (Locust's own
    # client adds milliseconds per call, docs/locust.md); Locust's figures follow, labelled.
    # An open loop that dropped calls or fell behind its rate was past its knee: not light load.
    kept = unary[unary.on_time.ne(False)] if "on_time" in unary else unary
    timed = kept[kept.generator == "loadgen"] if (kept.generator == "loadgen").any() else kept
    by = unary.groupby("protocol")
    failed = {"rest", "grpc"} & set(tidy[tidy.kind == "unary"].protocol) - set(unary.protocol)
    if failed:
        out.append(f"Unary cells of {', '.join(sorted(failed))} had ≥ 1 % errors: not compared.")
    if {"rest", "grpc"} <= set(timed.protocol):
        users = timed.users.min()
        light = timed[timed.users == users]
        low = light.groupby("protocol")["client_p50_ms"].mean()
        if low.notna().all():
            ratio = latency_ratio(*sides(light), hist, RUN)
            who = GENERATOR_NAMES[timed.generator.iloc[0]]
            beside = ""
            locust = unary[(unary.generator == "locust") & (unary.users == users)]
            if (timed.generator == "loadgen").all() and {"rest", "grpc"} <= set(locust.protocol):
                slow = locust.groupby("protocol")["client_p50_ms"].mean()
                beside = f" (Locust timed REST {slow['rest']:.3f} ms, gRPC {slow['grpc']:.3f} ms)"
            out.append(
                f"*REST is faster for small unary calls at light load* (IIT study, and others): "
                f"{verdict(ratio, True)} here — median latency at {int(users)} user(s), timed "
                f"by {who}: REST {low['rest']:.3f} ms, gRPC {low['grpc']:.3f} ms, "
                f"{stated(ratio)}{beside}."
            )
        busy = unary[unary.users == unary.users.max()]
        busy = busy[busy.generator == busy.generator.iloc[0]]
        thr = busy.groupby("protocol")["ok_per_s"].mean()
        ratio = throughput_ratio(*sides(busy), RUN) if len(thr) == 2 else None
        out.append(
            f"*gRPC has higher throughput* (IIT, order-chain studies): {verdict(ratio, True)} "
            f"for unary here — at {int(busy.users.max())} users REST {thr.get('rest', 0):.0f} "
            f"req/s, gRPC {thr.get('grpc', 0):.0f} req/s, {stated(ratio)}."
        )
        cpu = by["cpu_s_per_request"].mean()
        if cpu.notna().all():
            ratio = across_repetitions(*(per_rep(s, "cpu_s_per_request") for s in sides(unary)))
            out.append(
                f"*REST uses more CPU than gRPC* (IIT Table 6.1): {verdict(ratio, False)} per "
                f"request here — REST {cpu['rest'] * 1e6:.0f} µs, gRPC {cpu['grpc'] * 1e6:.0f} "
                f"µs of server CPU, {stated(ratio)}."
            )
        size = by["request_bytes_per_request"].mean()
        if size.notna().all() and size["rest"] > 0:
            smaller = 100 * (1 - size["grpc"] / size["rest"])
            out.append(
                f"*A protobuf order is about 34 % smaller than its JSON* (order-chain study): "
                f"here the gRPC request body is {smaller:.0f} % smaller "
                f"({size['grpc']:.0f} vs {size['rest']:.0f} bytes, counted: no interval needed)."
            )
    if not iit.empty:
        found = {}
        for load, part in iit.groupby("load"):
            found[load] = across_repetitions(*(per_rep(s, cpu_col, "max") for s in sides(part)))
        if found:
            each = "; ".join(
                f"{load}: {verdict(r, False)}, {stated(r)}" for load, r in found.items()
            )
            out.append(
                f"*REST's peak CPU is above gRPC's at every workload* (IIT Table 6.1), "
                f"per workload here: {each}."
            )
    return out


if HAVE and not PIPELINE:
    if (RUN / repeatability.CSV).is_file():
        spread = repeatability.summary(pd.read_csv(RUN / repeatability.CSV))
        say(f"Run to run ({repeatability.HTML}):\n" + "\n".join(f"- {x}" for x in spread))
    for kind in sorted(tidy["kind"].unique()):
        say(compare_kind(tidy, kind, hist, RUN))
    found = claims()
    if found:
        say("### Published claims against this run\n" + "\n".join(f"- {c}" for c in found))
    else:
        say("No unary cells on both protocols: the published claims cannot be checked here.")
elif PIPELINE:
    say(pipeline_verdict(manifest, len(tidy)))

# %% [markdown]
# ## Generator independence: the reference tools' ratios beside the lab's
# Does a kind's gRPC/REST ratio depend on the load generator? `wirelab perf crosscheck`
# (docs/bench.md) measures each kind both protocols share with reference tools (ghz for gRPC,
# wrk and vegeta for REST) beside Locust and, for small calls, wirelab-loadgen, against local
# services at its own load: per generator, the rounds' median gRPC/REST ratio with its
# interval. A generator's ratio agrees with the references' when the intervals meet or the
# two are within 10 %. Read from the file `wirelab report --crosscheck FILE` names, else the
# results folder's `crosscheck.json`.

# %%
CROSSCHECK = independence.find(RUN, crosscheck_file)
RUN_KINDS = {k: set(g.generator) for k, g in tidy.groupby("kind")} if HAVE else {}
if PIPELINE:
    say("A pipeline check states no comparison, so no generator's is checked either.")
elif CROSSCHECK is None:
    say("No cross-check file: whether a kind's gRPC/REST ratio depends on the generator is not "
        "shown, and this run's ratios are each its own generator's (Locust's, and "
        "wirelab-loadgen's for small calls). `wirelab perf crosscheck --out "
        f"{RUN}/{independence.FILE}` measures it.")  # fmt: skip
else:
    cc_meta, cc_rows = independence.read(CROSSCHECK)
    say(f"Cross-check `{CROSSCHECK.name}`: {independence.conditions(cc_meta)} (its own load, "
        "not this run's cells).")  # fmt: skip
    display(pd.DataFrame(independence.table(cc_rows)))
    say("\n".join(f"- {line}" for line in independence.report_lines(cc_rows, RUN_KINDS)))

# %% [markdown]
# ## Small calls: the precise generator beside Locust
# Groups with `generator = "loadgen"` (docs/bench.md) timed the small order call with
# wirelab-loadgen, the lab's Go generator, whose own cost per call is a fraction of a Python
# client's. Per protocol and load: median and p99 as each generator timed the call, and the
# gRPC/REST median ratio each gives: where the two ratios differ, Locust's own cost, not the
# protocols, made the difference.

# %%
small = tidy[(tidy.kind == "unary") & (tidy.error_pct < 1)] if HAVE else tidy
if not HAVE or small.generator.nunique() < 2:
    say("This run timed small calls with one generator: no comparison of generators. "
        "`wirelab bench generators` times them with both.")  # fmt: skip
else:
    order = [g for g in GENERATOR_NAMES if g in set(small.generator)]
    figures = ["client_p50_ms", "client_p99_ms"]
    by_gen = small.groupby(["generator", "protocol", "load"])[figures].mean()
    display(by_gen.reindex(order, level="generator").rename(index=GENERATOR_NAMES).round(3))
    p50 = small.groupby(["generator", "load", "protocol"])["client_p50_ms"].mean()
    p50 = p50.unstack("protocol")
    if {"rest", "grpc"} <= set(p50.columns):
        ratio = (p50["grpc"] / p50["rest"]).unstack("generator")[order]
        say("gRPC/REST median latency, per generator:")
        display(ratio.rename(columns=GENERATOR_NAMES).round(3))

# %% [markdown]
# ## Open loop: latency against the rate answered, to the knee
# Loads with a `rate` in a `generator = "loadgen"` group ran open loop (docs/bench.md): calls
# start on a schedule whatever the service does, each timed from its intended start, and a call
# that finds every worker busy is dropped and counted, never started late. Per series (protocol,
# runtime, network, arrivals) and offered rate, repetitions averaged: calls answered per second,
# client p50 and p99, the share of the schedule dropped, and whether every repetition was served
# on time (nothing dropped, at least 95 % of the offered rate answered). The **knee** is the
# highest offered rate served on time below the first that was not; the plot draws p50 and p99
# against the rate answered with each knee ringed. Past it the service's queue, not the
# protocol, sets the latency.


# %%
def knee(part: pd.DataFrame) -> float:
    """The highest offered rate served on time before the first that was not (NaN: none was),
    as the open-loop benchmark finds it (wirelab_bench.loadgen.knee)."""
    rows = part.sort_values("target_rate")[["target_rate", "on_time"]].itertuples(index=False)
    found = last_on_time(rows)
    return math.nan if found is None else float(found.target_rate)


OPEN_KEYS = ["protocol", "runtime", "network", "arrivals"]
if HAVE and "on_time" in tidy:
    OPEN = tidy[(tidy.generator == "loadgen") & tidy.target_rate.notna()].copy()
    OPEN["on_time"] = OPEN["on_time"].eq(True)
else:
    OPEN = tidy.iloc[0:0]
if OPEN.empty:
    say("This run has no open-loop cells. `wirelab bench openloop` sweeps offered rates.")
else:
    figures = ["requests_per_s", "client_p50_ms", "client_p99_ms", "dropped_pct"]
    sweep = OPEN.groupby([*OPEN_KEYS, "target_rate"]).agg(
        {**{f: "mean" for f in figures}, "on_time": "all"}
    )
    display(sweep.round(3))
    knees = sweep.reset_index().groupby(OPEN_KEYS)[["target_rate", "on_time"]].apply(knee)
    # Only the keys that vary name a series: most runs sweep one runtime, network and process.
    varying = [k for k in OPEN_KEYS if OPEN[k].nunique() > 1] or ["protocol"]
    fig, ax = plt.subplots(figsize=(7, 4))
    # A protocol's colour, a series' marker (its place among the protocol's), a percentile's line.
    shown: dict[str, int] = {}
    for key, part in sweep.reset_index().groupby(OPEN_KEYS):
        named = dict(zip(OPEN_KEYS, key, strict=True))
        label = " ".join(str(named[k]) for k in varying)
        color = COLORS.get(named["protocol"])
        place = shown[named["protocol"]] = shown.get(named["protocol"], -1) + 1
        marker = "osD^v"[place % 5]
        part = part.sort_values("target_rate")
        for column, style in (("client_p50_ms", "-"), ("client_p99_ms", "--")):
            ax.plot(part["requests_per_s"], part[column], style, marker=marker, color=color,
                    label=f"{label} {column[7:10]}")  # fmt: skip
        at = part[part.target_rate == knees[key]]
        ax.scatter(at["requests_per_s"], at["client_p99_ms"], s=160, facecolors="none",
                   edgecolors=color, linewidths=1.5)  # fmt: skip
    ax.set_yscale("log")
    ax.set_xlabel("calls answered per second")
    ax.set_ylabel("client latency from the intended start (ms)")
    ax.legend(fontsize=7)
    save(fig, "openloop_knee")
    for key, rate in knees.items():
        named = dict(zip(OPEN_KEYS, key, strict=True))
        label = " ".join(str(named[k]) for k in varying)
        say(f"Knee, {label}: " + (f"{rate:g} calls/s offered" if rate == rate else
            "none: the lowest rate offered was already not served on time"))  # fmt: skip


# %% [markdown]
# ## HTTP/2: which effect contributes what
# Groups with `rest_http = "h2c"` (docs/http2.md) called the REST service over cleartext HTTP/2;
# the others over HTTP/1.1, the REST service being one process (on Granian, which speaks both,
# when the lab runs with `WIRELAB_REST_HTTP=2`). For unary cells timed by one generator at one
# load, three ratios of each figure (repetitions averaged): **HTTP/2 alone** (REST over h2c /
# REST over 1.1: same JSON, same server), **protobuf and gRPC's stack** (gRPC / REST over h2c:
# both HTTP/2) and **all of it** (gRPC / REST over 1.1), the product of the other two. Below 1 the
# second arm needs less (latency, CPU per call); above 1 it answers more (calls per second).
# Under the table, the mean latency's ratios with 95 % intervals across repetitions, and which
# effect moves it more only where the interval of their difference excludes 0; a run of one
# repetition gets no split.


# %%
def effects(frame: pd.DataFrame, figure: str) -> pd.DataFrame:
    """The three ratios of ``figure`` per generator and load, where all three arms ran."""
    arms = frame.groupby(["generator", "load", "protocol"])[figure].mean().unstack("protocol")
    arms = arms.dropna(subset=["rest", "rest-h2c", "grpc"])
    return pd.DataFrame(
        {
            "HTTP/2 alone": arms["rest-h2c"] / arms["rest"],
            "protobuf and gRPC's stack": arms["grpc"] / arms["rest-h2c"],
            "all of it": arms["grpc"] / arms["rest"],
        }
    )


unary_arms = tidy[tidy.kind == "unary"] if HAVE else tidy
if not HAVE or not {"rest", "rest-h2c", "grpc"} <= set(unary_arms.protocol):
    say("This run did not time REST over HTTP/1.1, REST over h2c and gRPC: no split of "
        "the HTTP/2 effect (`wirelab bench http2` on `WIRELAB_REST_HTTP=2 make lab`).")  # fmt: skip
else:
    names = {"client_mean_ms": "mean latency", "cpu_s_per_request": "server CPU per call",
             "ok_per_s": "calls per second"}  # fmt: skip
    split = pd.concat({name: effects(unary_arms, f) for f, name in names.items()}, axis=1)
    display(split.round(3))
    for line in http2_split(unary_arms, GENERATOR_NAMES):
        say(line)


# %% [markdown]
# ## Topologies: end to end, above the work floor, hop by hop
# In a topology run (the scenario's `topology`, docs/topologies.md) Locust calls the same edge,
# which relays each order to its downstreams. Per protocol: the end-to-end latency CDF as Locust
# timed it; the overhead above the work floor (`work_floor_ms`, the work an order waits for one
# after another: 4 x 100 ms in the order chain, B's 10 ms behind A) from the **mean** client
# latency; the edge's calls to its downstreams as the edge timed them; each hop replica's share
# of the orders (from Prometheus); and the studies' published figures beside this run's ratios.

# %%
# The studies' own figures (docs/studies.md), shown for reference only: other hardware and code.
STUDY_FASTER = {"a-to-b": 27.0, "cluster": 31.0}  # gRPC below HTTP/1.1, % of mean latency
STUDY_CONFIRMED = {"order-chain": 4.8}  # gRPC's confirmed orders / REST's at the highest load
STUDY_CONFIRMED_AMQP = {"order-chain": 2.02}  # gRPC's / the AMQP arm's, the same run
replicas_path = RUN / "replicas.csv"
replicas = pd.read_csv(replicas_path) if replicas_path.exists() else pd.DataFrame()
containers_path = RUN / "containers.csv"
containers = pd.read_csv(containers_path) if containers_path.exists() else pd.DataFrame()
# A container held back by its CPU limit in at least this share of the window's CFS periods, or
# using this much of a core, ran out of CPU.
THROTTLED_PCT, FULL_CORES = 50.0, 0.9


def ran_out(part: pd.DataFrame) -> None:
    """Each container on the path, per arm and load: what it used (containers.csv), and the one
    that ran out of CPU, if any: the attribution a collapse needs before it is a protocol's."""
    mine = containers[containers.cell_id.isin(part.cell_id)] if not containers.empty else containers
    if mine.empty:
        say("No per-container figures in this run: they come from cAdvisor through Prometheus.")
        return
    m = mine.merge(part[["cell_id", "protocol", "users"]], on="cell_id")
    cols = ["cpu_ms_per_order", "cores", "throttled_pct", "memory_peak_mib"]
    per = m.groupby(["protocol", "users", "service"])[cols].mean()
    say("What each container on the path used (the repetitions' mean):")
    display(per.round(2))
    for (proto, users), rows in per.groupby(level=["protocol", "users"]):
        top = rows.sort_values("cores").iloc[-1]
        name = top.name[2]
        out = top.throttled_pct >= THROTTLED_PCT or top.cores >= FULL_CORES
        said = (f"ran out of CPU ({top.cores:.2f} cores, held back by its limit in "
                f"{top.throttled_pct:.0f} % of periods)" if out
                else f"was the busiest at {top.cores:.2f} cores, none ran out of CPU")  # fmt: skip
        say(
            f"- {proto} at {int(users)} users: `{name}` {said}, "
            f"{top.cpu_ms_per_order:.2f} ms of CPU per order."
        )


# A run's traces (docs/traces.md): captured from Jaeger per cell when the lab had them on.
TRACING = manifest.get("traces") or {}
TRACES = waterfall.load(RUN)
SPAN_COLORS = ["tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:gray", "tab:red"]


def span_colors(orders: list[waterfall.Order]) -> dict[str, str]:
    """An arm's edge in its colour; the other services of ``orders`` each in one of their own,
    by name (the order chain's three downstreams never share one)."""
    others = sorted({s.service for o in orders for s in o.spans} - set(COLORS))
    return {**COLORS, **{svc: SPAN_COLORS[i % len(SPAN_COLORS)] for i, svc in enumerate(others)}}


def pooled_buckets(cells: pd.Series, side: str) -> list[tuple[float, float]]:
    """The cells' duration histogram of ``side`` (server: the edge's; hop: its calls), summed."""
    if hist.empty:
        return []
    h = hist[(hist.side == side) & (hist.metric == "duration") & hist.cell_id.isin(cells)]
    summed = h.groupby("le")["count"].sum().sort_index()
    return [(float(le), float(n)) for le, n in summed.items()]


def sampled(found: int, cells: pd.DataFrame, docs: list[dict[str, Any]]) -> str:
    """How many orders were traced, of how many, at which ratio, and what was left out."""
    served = float((cells.server_requests_per_s * cells.window_s).sum())
    ratio = TRACING.get("ratio")
    told = ratio if ratio is not None else f"unknown ({TRACING.get('source')})"
    share = f"{found / served:.3f} of them" if served > 0 else "the edge's own count not read"
    said = (f"{found} traced orders of the {served:.0f} the edge served in these windows "
            f"({share}; the lab's sampling ratio {told})")  # fmt: skip
    if any(d.get("truncated") for d in docs):
        limit = docs[0].get("limit")
        said += f"; Jaeger's answer reached its limit ({limit} per cell): the windows' latest"
    if rootless := sum(int(d.get("rootless") or 0) for d in docs):
        said += f"; {rootless} trace(s) without the edge's span left out"
    return said


def hop_by_hop(name: str, part: pd.DataFrame) -> None:
    """Per arm and load: a median and a p99 order drawn span by span from the cells' traces,
    and the traces against the edge's server and hop histograms."""
    say("#### Hop by hop: a median and a p99 order (traces from Jaeger)")
    if not TRACING.get("captured"):
        why = TRACING.get("reason") or "the run recorded no trace capture"
        say(f"Traces were not captured: {why}.")
        return
    # An arm as its edge is named in traces (rest, grpc-node): runtimes are never pooled.
    runtime = part["runtime"] if "runtime" in part else pd.Series("python", index=part.index)
    arm = part.protocol.where(runtime == "python", part.protocol + "-" + runtime)
    for (proto, users), cells in part.assign(arm=arm).groupby(["arm", "users"]):
        docs = [TRACES[c] for c in cells.cell_id if c in TRACES]
        found = [o for d in docs for o in waterfall.orders(d)]
        counted = sampled(len(found), cells, docs)
        say(f"**{proto}, {int(users)} users** (repetitions pooled): {counted}.")
        if not found:
            continue
        picks = waterfall.pick(found)
        server, hop = pooled_buckets(cells.cell_id, "server"), pooled_buckets(cells.cell_id, "hop")
        shown = (("median", 0.5, picks.median), ("p99", 0.99, picks.p99))
        drawn = [(which, q, o) for which, q, o in shown if o is not None]
        rows = sum(len(o.spans) for _, _, o in drawn)
        colors = span_colors([o for _, _, o in drawn])
        fig, axes = plt.subplots(len(drawn), 1, figsize=(9, 0.9 + 0.32 * rows), squeeze=False)
        for ax, (which, _, order) in zip(axes.flat, drawn, strict=True):
            rank = f", rank {picks.p99_rank} of {picks.count}" if which == "p99" else ""
            title = f"{name}, {proto}, {int(users)} users: the {which} order{rank}"
            waterfall.draw(ax, order, title, colors.__getitem__)
        fig.tight_layout()
        save(fig, f"waterfall_{name}_{proto}_{int(users)}")
        if picks.p99 is None:
            say(f"With {picks.count} traced orders (under {waterfall.MIN_FOR_P99}) a p99 order "
                "is not meaningful: only the median is drawn, and compared.")  # fmt: skip
        for which, q, order in drawn:
            say(waterfall.picked(order, which, q, server, hop))
        compared = [c.row() for c in waterfall.checks(found, server, hop)]
        if compared:
            say("All traced orders against the histograms of the same windows (the traces' "
                "nearest rank; the histogram's quantile interpolated in its bucket):")  # fmt: skip
            with pd.option_context("display.max_colwidth", None):
                display(pd.DataFrame(compared))


in_run = set(tidy["topology"]) if HAVE and "topology" in tidy else set()
TOPOLOGIES = sorted(in_run - {"one-hop"})
if not TOPOLOGIES:
    say("This run measured one hop (scenario topology `one-hop`): no topology section. "
        "`wirelab bench a-to-b`, `order-chain` or `cluster` measure one.")  # fmt: skip


def faster_pct(part: pd.DataFrame) -> dict[int, Ratio | None]:
    """Per load: gRPC/REST mean client latency with its interval across repetitions."""
    return {
        int(users): across_repetitions(*(per_rep(s, "client_mean_ms") for s in sides(at)))
        for users, at in part.groupby("users")
    }


def against_study(name: str, part: pd.DataFrame) -> str:
    both = {"rest", "grpc"} <= set(part.protocol)
    if name in STUDY_FASTER and both:
        found = faster_pct(part)
        measured = [r for r in found.values() if r is not None]
        if measured:
            each = "; ".join(
                f"{users} users: {pct(r)}" if r else f"{users} users: no interval"
                for users, r in found.items()
            )
            return (
                f"*gRPC {STUDY_FASTER[name]:.0f} % faster than HTTP/1.1* (A→B study"
                f"{', cluster mode' if name == 'cluster' else ''}): here, by mean client latency"
                f" (1 - gRPC/REST in %, 95 % interval {measured[0].basis}), {each}."
            )
        return (
            f"*gRPC {STUDY_FASTER[name]:.0f} % faster than HTTP/1.1* (A→B study): cannot be"
            " checked by mean client latency here (no interval: one repetition)."
        )
    if name in STUDY_CONFIRMED and both:
        high = part[part.users == part.users.max()]
        amqp = STUDY_CONFIRMED_AMQP.get(name, math.nan)
        return confirmed_orders(high, RUN, STUDY_CONFIRMED[name], amqp)
    return f"No published figure of topology {name} to compare with (or one protocol only)."


def pct(r: Ratio) -> str:
    """gRPC's lead in mean latency, 1 - gRPC/REST in %, with its interval."""
    word = "not distinguishable" if r.spans_one else "faster" if r.high < 1 else "slower"
    low, high = sorted((100 * (1 - r.high), 100 * (1 - r.low)))
    return f"{word}, {100 * (1 - r.value):.0f} % [{low:.0f} to {high:.0f} %]"


def topology_section(name: str) -> None:
    part = tidy[(tidy.topology == name) & (tidy.kind == "unary")]
    peers = (manifest.get("topology") or {}).get("peers") or {}
    calls = "; ".join(
        f"{p} → {', '.join(v) if v else 'nothing'}" for p, v in peers.items() if v is not None
    )
    clients = manifest.get("clients") or {}
    # The relay's client library can decide the outcome (`wirelab perf relay-client`): named.
    libraries = ", ".join(f"{arm} with {lib}" for arm, lib in clients.items() if lib != "none")
    say(f"### Topology **{name}**\nThe edges call: {calls or 'unknown (not read)'}"
        f"{f' (their clients: {libraries})' if libraries else ''}.")  # fmt: skip
    if part.empty:
        say("No unary cells of this topology.")
        return
    cols = ["client_mean_ms", "client_p50_ms", "client_p99_ms", "work_floor_ms",
            "overhead_above_floor_ms", "hop_calls_per_order", "hop_mean_ms", "hop_p50_ms",
            "hop_p99_ms", "hop_error_pct", "ok_per_s", "error_pct", "chain_cpu_s_per_request",
            "broker_cpu_s_per_request"]  # fmt: skip
    # Runs older than the chain's CPU columns lack them: show what the folder has.
    display(part.groupby(["protocol", "users"])[[c for c in cols if c in part]].mean().round(4))
    loads = sorted(part["users"].unique())
    frames = {side: cdf_frame(side) for side in ("client", "hop")}
    fig, axes = grid(len(loads))
    for ax, users in zip(axes, loads, strict=True):
        for side, style in (("client", "-"), ("hop", ":")):
            f = frames[side]
            f = f[f.cell_id.isin(part[part.users == users].cell_id)] if not f.empty else f
            for proto, p in f.groupby("protocol") if not f.empty else ():
                label = f"{proto} {'end to end' if side == 'client' else 'edge → downstream'}"
                step_cdf(ax, p, label, COLORS[str(proto)], style)
        ax.axvline(part["work_floor_ms"].iloc[0], color="grey", ls="--", label="work floor")
        ax.set_xscale("log")
        ax.set_title(f"{name}, {int(users)} users")
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("fraction of orders / calls")
        ax.legend(fontsize=6)
    save(fig, f"topology_{name}_cdf")
    per = part.groupby(["users", "protocol"])[["overhead_above_floor_ms", "hop_mean_ms"]].mean()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    per["overhead_above_floor_ms"].unstack("protocol").plot.bar(ax=axes[0], color=COLORS)
    axes[0].set_ylabel("mean latency above the work floor (ms)")
    per["hop_mean_ms"].unstack("protocol").plot.bar(ax=axes[1], color=COLORS)
    axes[1].set_ylabel("mean edge → downstream call (ms)")
    save(fig, f"topology_{name}_overhead")
    mine = replicas[replicas.cell_id.isin(part.cell_id)] if not replicas.empty else replicas
    if mine.empty:
        say("No per-replica counts in this run: they come from Prometheus (job `hops`), which "
            "this run did not reach or which scraped no hop.")  # fmt: skip
    else:
        m = mine.merge(part[["cell_id", "protocol", "users"]], on="cell_id")
        served = m.groupby(["protocol", "users", "service", "instance"])["requests"].sum()
        share = 100 * served / served.groupby(["protocol", "users", "service"]).transform("sum")
        say("Each hop replica's share of the orders its service served (repetitions summed):")
        display(pd.DataFrame({"orders": served, "share %": share.round(1)}))
    ran_out(part)
    hop_by_hop(name, part)
    say(against_study(name, part))


for topology in TOPOLOGIES:
    topology_section(topology)

# %% [markdown]
# ## Runtimes: Node.js against Python
# Cells of a scenario with `runtimes = ["python", "node"]` (docs/node.md) ran on both runtimes'
# services, interleaved. Per protocol, kind, load and payload: Node.js's figure over Python's for
# successful calls per second, mean client latency and server CPU per call (repetitions
# averaged), then the calls-per-second ratio drawn per protocol.

# %%
RUNTIMES = sorted(tidy["runtime"].unique()) if HAVE and "runtime" in tidy else []
if len(RUNTIMES) < 2:
    say("This run measured one runtime"
        f" ({', '.join(RUNTIMES) or 'python'}): no comparison of runtimes. "
        "`wirelab bench runtimes` (with `make lab PROFILES=node`) measures both.")  # fmt: skip
else:
    keys = ["protocol", "kind", "load", "payload_bytes"]
    figures = {"ok_per_s": "calls/s", "client_mean_ms": "mean latency",
               "cpu_s_per_request": "CPU per call"}  # fmt: skip
    by_runtime = tidy.groupby([*keys, "runtime"])[list(figures)].mean().unstack("runtime")
    ratios = pd.DataFrame(
        {
            f"node/python {name}": by_runtime[(col, "node")] / by_runtime[(col, "python")]
            for col, name in figures.items()
        }
    )
    display(ratios.round(3))
    calls = ratios["node/python calls/s"].unstack("protocol").dropna(how="all")
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(calls)), 3.4))
    calls.plot.bar(ax=ax, color=COLORS)
    ax.axhline(1, color="grey", ls="--")
    ax.set_ylabel("Node.js / Python successful calls per second")
    ax.set_xlabel("kind, load, payload")
    save(fig, "runtimes")

# %% [markdown]
# ## Network conditions: REST against gRPC as the round trip grows
# Cells of a group with a `network` profile (docs/network.md) went through Toxiproxy, which added
# the profile's round trip (± jitter, bandwidth cap) to both protocols alike; `direct` cells did
# not. In a topology the hop links carry the group's `hop_network` (by default its `network`):
# a condition is named `edge+hops-hop` when they differ, and its round trip is the edge link's
# plus one hop link's. Per kind, load and payload: each protocol's **mean** client latency per
# condition (the mean is the histograms' exact sum; their quantiles are interpolated within
# buckets 20-25 ms wide around WAN round trips), and gRPC/REST, the ratio a protocol choice
# would change.

# %%
if HAVE and "network" in tidy:
    tidy = with_links(tidy)
    NETWORKS = tidy.groupby("links")["links_rtt_ms"].first().sort_values()
else:
    NETWORKS = pd.Series(dtype=float)
if len(NETWORKS) < 2:
    say("This run measured one network condition"
        f" ({', '.join(NETWORKS.index) or 'direct'}): no comparison across networks. "
        "`wirelab bench wan` measures several.")  # fmt: skip
else:
    keys = ["kind", "load", "payload_bytes", "links"]
    mean = tidy.groupby([*keys, "protocol"])["client_mean_ms"].mean().unstack("protocol")
    if {"rest", "grpc"} <= set(mean.columns):
        mean["grpc/rest"] = mean["grpc"] / mean["rest"]
    if {"grpc", "amqp"} <= set(mean.columns):  # the order chain's AMQP arm (docs/network.md)
        mean["amqp/grpc"] = mean["amqp"] / mean["grpc"]
    display(mean.round(3))
    if "grpc/rest" in mean:
        ratio = mean["grpc/rest"].reset_index()
        ratio["rtt_ms"] = ratio["links"].map(NETWORKS)
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for (kind, load, size), part in ratio.groupby(["kind", "load", "payload_bytes"]):
            part = part.sort_values("rtt_ms")
            label = f"{kind} {load}{f' {size} B' if size else ''}"
            ax.plot(part["rtt_ms"], part["grpc/rest"], marker="o", label=label)
            for _, row in part.iterrows():
                ax.annotate(row["links"], (row["rtt_ms"], row["grpc/rest"]), fontsize=6)
        ax.axhline(1, color="grey", ls="--")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("round trip the network adds (ms; edge link plus one hop link)")
        ax.set_ylabel("gRPC / REST mean client latency")
        ax.legend(fontsize=6)
        save(fig, "network_ratio")
    applied = manifest.get("network") or {}

    def as_applied(p: dict[str, Any]) -> str:
        cap = f", {p['bandwidth_kbps']} KB/s" if p.get("bandwidth_kbps") else ""
        hops = f"; hop links {as_applied(p['hops'])}" if "hops" in p else ""
        return f"{p['name']} ({p['rtt_ms']} ms ± {p['jitter_ms']}{cap}){hops}"

    say("Applied, as Toxiproxy reported it: " + "; ".join(map(as_applied, applied.values())))

# %% [markdown]
# ## Files

# %%
say("Plots saved:\n" + "\n".join(f"- `{p}`" for p in SAVED) if SAVED else "No plots saved.")

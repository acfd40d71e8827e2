"""Report section 35: the victim buffer's regime (the PVP study). Hybrid and dynamic eviction, each
with and without the victim buffer + PVP, at one total memory per device, over the host tier's
share of it, the lookahead window W and the batch size (`lsm-gnn simulate` CSVs of rule cache_pvp).

Per point: storage rows / MIN at the same total memory, and per iteration the spill attempts (lines
evicted with a known reuse in the window), the spills dropped (their queue was full: each is read
from storage again at its reuse), the lines the PVP prefetched and the victim hits. The regime
number of the buffer is queue depth / spill attempts per iteration: how many of one iteration's
spills one queue can keep. The buffer *pays* at a point when the policy with it reads fewer
storage rows than the same policy without it at the same total memory (the host tier's rows given
to cache lines); the boundary is where that starts, on this axis.

Outputs: the fragment, the figure, and pvp.json (the points, the pay/no-pay table, the boundary
and, per batch, hybrid's storage and victim rows per iteration at every memory budget, which the
projection's figure at the paper's batch scales by).
"""


import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.utils.atomic import write_json, write_text  # noqa: E402

from figtools import POLICY_COLOURS, save_figure  # noqa: E402
from wfcommon import RATIO_KEY, dataset_words, log_to, md_table, sim_regime  # noqa: E402


def load(paths) -> pd.DataFrame:
    frames = []
    for p in paths:
        batch = int(re.search(r"pvp-b(\d+)", Path(p).name).group(1))
        frames.append(pd.read_csv(p).assign(batch=batch))
    df = pd.concat(frames, ignore_index=True)
    if "setting" not in df.columns:  # a study written before the authors' configuration
        df["setting"] = "equal memory"
    df["buffer"] = df["victim_capacity"] > 0
    df["host_share"] = (df["victim_capacity"] / df["total_rows"]).round(3)
    df[RATIO_KEY] = [sim_regime(r) for _, r in df.iterrows()]
    df["distinct_rows_per_iteration"] = df["distinct"] / (df["batches"] * df["devices"])
    df["storage_rows_per_iteration"] = df["storage_rows"] / (df["batches"] * df["devices"])
    df["depth_per_spill"] = [r.victim_depth / r.spill_attempts_per_iteration
                             if r.buffer and r.spill_attempts_per_iteration > 0 else None for r in df.itertuples()]
    return df


def authors_table(df: pd.DataFrame) -> pd.DataFrame:
    """The authors' configuration (W queues of the authors' depth in extra host memory beside the whole
    budget as cache lines) next to the same policy, batch and W without the buffer: both have the same
    device cache, so with / without below 1 is what the extra host memory buys."""
    off = df[(df.setting != "authors") & ~df.buffer].set_index(["policy", "batch", "window"])["storage_rows"]
    rows = []
    for r in df[df.setting == "authors"].itertuples():
        key = (r.policy, r.batch, r.window)
        if key not in off.index:
            continue
        rows.append({"policy": r.policy, "batch": int(r.batch), "window": int(r.window), "victim_depth": int(r.victim_depth),
                     "cache_rows": int(r.capacity_rows), "extra_host_rows": int(r.victim_capacity),
                     "extra_host_share": r.victim_capacity / r.capacity_rows,
                     "spill_attempts_per_iteration": r.spill_attempts_per_iteration,
                     "dropped_per_iteration": r.spill_dropped_per_iteration,
                     "storage_rows": int(r.storage_rows), "storage_rows_without": int(off[key]),
                     "with_over_without": r.storage_rows / off[key], "pays": bool(r.storage_rows < off[key])})
    return pd.DataFrame(rows)


def pays_table(df: pd.DataFrame, fraction: float) -> pd.DataFrame:
    """Every with-buffer point at `fraction` next to the same policy, batch and W without the buffer."""
    at = df[((df.cache_fraction - fraction).abs() < 1e-9) & (df.setting != "authors")]
    off = at[~at.buffer].set_index(["policy", "batch", "window"])["storage_rows"]
    rows = []
    for r in at[at.buffer].itertuples():
        key = (r.policy, r.batch, r.window)
        if key not in off.index:
            continue
        rows.append({"policy": r.policy, "batch": int(r.batch), "window": int(r.window), "host_share": r.host_share,
                     "victim_depth": int(r.victim_depth), "spill_attempts_per_iteration": r.spill_attempts_per_iteration,
                     "depth_per_spill": r.depth_per_spill, "storage_rows": int(r.storage_rows),
                     "storage_rows_without": int(off[key]), "with_over_without": r.storage_rows / off[key],
                     "pays": bool(r.storage_rows < off[key])})
    return pd.DataFrame(rows)


def boundary(pays: pd.DataFrame, policy: str) -> dict:
    """Where the buffer starts to pay along depth / spill attempts per iteration: the smallest ratio
    at which it pays and the largest at which it does not; `separable` when every paying point lies
    above every other one (then the boundary is between the two)."""
    p = pays[pays.policy == policy] if not pays.empty else pays
    if p.empty:
        return {"policy": policy, "points": 0, "paying": 0, "pays_from": None, "fails_up_to": None, "separable": None}
    yes, no = p[p.pays].depth_per_spill.dropna(), p[~p.pays].depth_per_spill.dropna()
    lo = float(yes.min()) if not yes.empty else None
    hi = float(no.max()) if not no.empty else None
    return {"policy": policy, "points": int(len(p)), "paying": int(p.pays.sum()), "pays_from": lo, "fails_up_to": hi,
            "separable": (lo is None or hi is None or hi < lo)}


def _g(x) -> str:
    return "n/a (no spill attempts)" if x is None else f"{x:.3g}"


def boundary_words(b: dict) -> str:
    if not b["points"]:
        return "no point measured"
    if b["paying"] == 0:
        return f"pays at none of {b['points']} points (queue depth / spill attempts per iteration up to {_g(b['fails_up_to'])})"
    if b["paying"] == b["points"]:
        return f"pays at all {b['points']} points (from queue depth / spill attempts per iteration {_g(b['pays_from'])})"
    if b["separable"]:
        return (f"pays at {b['paying']} of {b['points']} points, exactly those with queue depth / spill attempts per "
                f"iteration >= {_g(b['pays_from'])} (it does not at {_g(b['fails_up_to'])} and below)")
    return (f"pays at {b['paying']} of {b['points']} points; no clean boundary on queue depth / spill attempts per "
            f"iteration (pays from {_g(b['pays_from'])}, fails up to {_g(b['fails_up_to'])})")


def memory_trend(df: pd.DataFrame, config_share: float) -> dict:
    """Per batch: hybrid (buffer at the config's share, W = 8) storage and victim rows per iteration
    at every memory budget, and the distinct rows per iteration (R) of the trace."""
    out = {}
    hy = df[(df.policy == "hybrid") & df.buffer & (df.window == 8)]
    for b, part in hy.groupby("batch"):
        # the config's share, as the budget rounds it (depth = floor(share x total / (W + 1)))
        part = part[(part.host_fraction - config_share).abs() < 1e-9]
        if part.empty:
            continue
        part = part.drop_duplicates("cache_fraction").sort_values("cache_fraction")
        per = part.batches * part.devices
        out[str(int(b))] = {"distinct_rows_per_iteration": float(part.distinct_rows_per_iteration.iloc[0]),
                            "iterations": int(part.batches.iloc[0]),
                            "cache_fraction": [float(x) for x in part.cache_fraction],
                            "storage_rows_per_iteration": [float(x) for x in part.storage_rows / per],
                            "victim_hits_per_iteration": [float(x) for x in part.victim_hits / per]}
    return out


def figure(df: pd.DataFrame, pays: pd.DataFrame, fraction: float, bounds: dict, path, authors=None,
           config_share: float | None = None):
    at = df[((df.cache_fraction - fraction).abs() < 1e-9) & (df.setting != "authors")]
    sns.set_theme(style="whitegrid", context="paper")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    # colour: the policy (its colour of every figure, figtools); marker and line: the batch, the same
    # in both panels (one colour once meant a policy and batch on the left, a policy and W on the right)
    batches = sorted(at.batch.unique())
    marks = dict(zip(batches, ["o", "s", "^", "D", "v"]))
    lines = dict(zip(batches, ["-", "--", ":", "-."]))
    w8 = at[at.window == 8]
    for (pol, b), part in w8.sort_values("host_share").groupby(["policy", "batch"]):
        a1.plot(part.host_share, part.storage_rows_vs_min, color=POLICY_COLOURS.get(pol, "#333333"),
                marker=marks.get(b, "o"), ls=lines.get(b, "-"), label=f"{pol}, batch {b}")
    if config_share is not None:
        a1.axvline(config_share, color="grey", ls=":", lw=1)
        a1.annotate("the authors' share (10 % of\nthe memory, budget.py)", (config_share, a1.get_ylim()[1]),
                    fontsize=6, va="top", ha="left", xytext=(3, -3), textcoords="offset points")
    a1.set_xlabel("host tier's share of the memory per device (fraction; 0: no victim buffer)")
    a1.set_ylabel("storage rows / MIN (same total memory)")
    a1.set_title(f"Simulated: W = 8, {100 * fraction:g} % memory per device")
    a1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
    if not pays.empty:
        p = pays.dropna(subset=["depth_per_spill"])
        for (pol, b), part in p.groupby(["policy", "batch"]):
            a2.scatter(part.depth_per_spill, part.with_over_without, color=POLICY_COLOURS.get(pol, "#333333"),
                       marker=marks.get(b, "o"), s=40, label=f"{pol}, batch {b}")
            for r in part.itertuples():           # the window of each point, written beside it
                a2.annotate(f"W{int(r.window)}", (r.depth_per_spill, r.with_over_without), fontsize=6,
                            xytext=(4, 2), textcoords="offset points")
        a2.axhline(1.0, color="black", lw=1)
        b = bounds.get("hybrid") or {}
        if b.get("separable") and b.get("pays_from") and b.get("fails_up_to"):
            a2.axvline((b["pays_from"] * b["fails_up_to"]) ** 0.5, color="grey", ls="--", label="hybrid's boundary")
        if authors is not None and not authors.empty:
            hy = authors[authors.policy == "hybrid"]
            x = hy.victim_depth / hy.spill_attempts_per_iteration.where(hy.spill_attempts_per_iteration > 0)
            a2.scatter(x, hy.with_over_without, marker="*", s=140, color="black", zorder=5,
                       label="hybrid, the authors' configuration\n(32768-line queues in extra host memory)")
        a2.set_xscale("log")
        a2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
    a2.set_xlabel("queue depth / spill attempts per iteration (lines / lines, log)")
    a2.set_ylabel("storage rows with the buffer / without (ratio)")
    a2.set_title("Simulated: below 1 the victim buffer pays")
    fig.tight_layout()
    save_figure(fig, path, dpi=130)
    plt.close(fig)


def authors_words(authors: pd.DataFrame) -> str:
    if authors is None or authors.empty:
        return "not simulated in this run"
    parts = []
    for r in authors.sort_values(["policy", "batch"]).itertuples():
        parts.append(f"{r.policy} at batch {r.batch}: {r.storage_rows:,} / {r.storage_rows_without:,} storage rows "
                     f"with / without = **{r.with_over_without:.3f}** ({'pays' if r.pays else 'does not pay'}; "
                     f"{r.extra_host_rows:,} extra host rows, {r.extra_host_share:.2f}x the cache's "
                     f"{r.cache_rows:,} lines; {r.dropped_per_iteration:,.0f} of "
                     f"{r.spill_attempts_per_iteration:,.0f} spill attempts per iteration dropped)")
    return "; ".join(parts)


def fragment(df: pd.DataFrame, pays: pd.DataFrame, bounds: dict, params, authors=None) -> str:
    fraction = float(params.fraction)
    at = df[((df.cache_fraction - fraction).abs() < 1e-9) & (df.setting != "authors")].copy()
    view = at.sort_values(["batch", "window", "host_share", "policy"])[
        ["batch", "window", "host_share", "policy", "victim_depth", RATIO_KEY, "storage_rows_vs_min",
         "spill_attempts_per_iteration", "spill_dropped_per_iteration", "prefetched_per_iteration",
         "victim_hits_per_iteration", "depth_per_spill"]]
    view.columns = ["batch", "W", "host share", "policy", "queue depth", "cache rows / rows per iteration",
                    "rows / MIN", "spill attempts / it", "dropped / it", "prefetched / it", "victim hits / it",
                    "depth / spill attempts"]
    words = "; ".join(f"**{p}**: {boundary_words(b)}" for p, b in bounds.items())
    depth = "n/a" if authors is None or authors.empty else f"{int(authors.victim_depth.iloc[0]):,}"
    iters = ", ".join(f"batch {b}: {int(n)}" for b, n in at.drop_duplicates("batch").set_index("batch").batches.items())
    return f"""## The victim buffer's regime (PVP study; simulated: exact counts of the trace simulator)

Hybrid and dynamic eviction on {dataset_words(params.dataset)}, each with and without the victim
buffer + PVP, at {100 * fraction:g} % memory per device (cache lines + victim queues + landing buffer):
the host tier's share of that memory from 0 (no buffer: every row is a cache line) to
{max(params.shares):g}, W = {", ".join(str(w) for w in params.windows)} (at the config's share
{params.config_share:g}) and batch {", ".join(str(b) for b in params.batches)} (iterations per trace: {iters};
the run's batch replays the headline trace, the others a trace of as many seed nodes). Command per
point: `lsm-gnn simulate DATASET --trace T --policy hybrid --policy dynamic --cache-fraction {fraction:g}
--window W --host-fraction H` (`--no-victim` for share 0); the rule's log lists every call.

A spill attempt is a line evicted while it has a known reuse in the window: the buffer puts it in
the queue of the batch that will need it, or drops it when that queue is full (the line is read from
storage again at its reuse). With the buffer on, hybrid evicts lines with a far known reuse first
(the paper's order with the prefetcher), counting on the queues to keep them. The regime number is
**queue depth / spill attempts per iteration**. Where the buffer pays (fewer storage rows than the
same policy without it, at the same total memory): {words}.

**At the authors' configuration** (labelled apart: not at equal memory): W = 8 queues + the landing
buffer of {depth} lines each (the authors' scripts' `pvp_depth`) in pinned host memory on
top of the whole budget as cache lines, against the same policy without the buffer (the same device
cache): {authors_words(authors)}.

![the victim buffer's regime](figures/cache_pvp.png)

{md_table(view)}
"""


def main(sm):
    df = load(sm.input.csvs)
    fraction = float(sm.params.fraction)
    pays = pays_table(df, fraction)
    bounds = {p: boundary(pays, p) for p in ("hybrid", "dynamic")}
    authors = authors_table(df)
    figure(df, pays, fraction, bounds, sm.output.figure, authors, float(sm.params.config_share))
    at = df[((df.cache_fraction - fraction).abs() < 1e-9) & (df.setting != "authors")]
    keep = ["batch", "policy", "window", "buffer", "host_share", "victim_depth", "capacity_rows", "storage_rows",
            "storage_rows_vs_min", "spill_attempts_per_iteration", "spill_dropped_per_iteration",
            "prefetched_per_iteration", "victim_hits_per_iteration", "depth_per_spill", RATIO_KEY]
    points = [{k: (None if pd.isna(v) else (v.item() if hasattr(v, "item") else v)) for k, v in r.items()}
              for r in at[keep].sort_values(["batch", "policy", "window", "host_share"]).to_dict(orient="records")]
    write_json(sm.output.summary, {"cache_fraction": fraction, "batches": [int(b) for b in sorted(df.batch.unique())],
                                   "points": points, "pays": pays.to_dict(orient="records"), "boundary": bounds,
                                   "authors": authors.to_dict(orient="records"),
                                   "memory": memory_trend(df, float(sm.params.config_share))})
    write_text(sm.output.fragment, fragment(df, pays, bounds, sm.params, authors))


if __name__ == "__main__" and "snakemake" in globals():
    log_to(snakemake)  # noqa: F821
    main(snakemake)  # noqa: F821

"""Report section 30: storage rows per epoch of every eviction policy against the bounds (MIN at
the same total memory, MIN of the cache lines alone, optimal static, compulsory) on one trace, the
regime sweep (the policies over batch sizes, against cache rows / distinct rows per iteration), the
heterogeneous graph, the 2-device shared-vs-isolated comparison and its scaling over 1, 2, 4 (scaling_devices)
devices at the same memory per device, from `lsm-gnn simulate` CSVs.
Also writes regime.json, the run's regime for the report's summary."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.utils.atomic import write_text  # noqa: E402

from figtools import POLICY_COLOURS, save_figure  # noqa: E402
from pvp_report import load as load_pvp  # noqa: E402
from wfcommon import PAPER_REGIME, RATIO_KEY, dataset_words, log_to, md_table, scaling_points, sim_regime  # noqa: E402

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
FRACTION = float(sm.params.fraction)
PCT = f"{100 * FRACTION:g} %"


sweep = pd.concat([pd.read_csv(p) for p in sm.input.sweeps], ignore_index=True)
sweep["cache %"] = (sweep["cache_fraction"] * 100).round(2)
sweep[RATIO_KEY] = [sim_regime(r) for _, r in sweep.iterrows()]
write_text(sm.output.table, sweep.to_csv(index=False))
epochs = int(sweep["epochs"].iloc[0])
batches = int(sweep["batches"].iloc[0])

# ---- figure: storage rows per epoch vs cache size, one panel per window -------------------------
windows = sorted(sweep["window"].unique())
sns.set_theme(style="whitegrid", context="paper")
fig, axes = plt.subplots(2, len(windows), figsize=(4.2 * len(windows), 7.2), sharey="row", squeeze=False)
for ax, w in zip(axes[1], windows):
    # the hit rate against the cache size (lsm_gnn.metrics.hit_rate: rows served by a cache tier / rows asked)
    part = sweep[sweep["window"] == w].assign(hit_pct=lambda d: 100 * d.hit_rate)
    sns.lineplot(data=part, x="cache %", y="hit_pct", hue="policy", style="policy", markers=True, dashes=False,
                 ax=ax, legend=False, palette=POLICY_COLOURS)
    ax.set_xscale("log")
    ax.set_xticks(sorted(sweep["cache %"].unique()))
    ax.set_xticklabels([f"{x:g}%" for x in sorted(sweep["cache %"].unique())])
    ax.set_ylim(0, 100)
    ax.set_title(f"hit rate, lookahead horizon W = {w} batches\n(with the victim buffer; horizon has none)")
    ax.set_xlabel("memory per device (% of feature rows)")
    ax.set_ylabel("hit rate (% of requested rows; cache + victim buffer)")
for ax, w in zip(axes[0], windows):
    part = sweep[sweep["window"] == w]
    sns.lineplot(data=part, x="cache %", y="storage_rows_per_epoch", hue="policy", style="policy",
                 markers=True, dashes=False, ax=ax, legend=(ax is axes[0][-1]), palette=POLICY_COLOURS)
    bnd = part.drop_duplicates("cache %").sort_values("cache %")
    for col, label, style in (("min_rows", "MIN (same memory)", dict(color="black", lw=2)),
                              ("min_cache_rows", "MIN (cache lines only)", dict(color="black", ls="--")),
                              ("opt_static_rows", "optimal static", dict(color="grey", ls=":", lw=2))):
        ax.plot(bnd["cache %"], bnd[col] / epochs, label=label, **style)
    ax.set_xscale("log")
    ax.set_xticks(sorted(sweep["cache %"].unique()))
    ax.set_xticklabels([f"{x:g}%" for x in sorted(sweep["cache %"].unique())])
    ax.set_ylim(bottom=0)
    ax.set_title(f"storage rows, lookahead horizon W = {w} batches\n(with the victim buffer; horizon has none)")
    ax.set_xlabel("memory per device (% of feature rows)")
    ax.set_ylabel(f"storage rows over the {batches:,}-iteration trace (rows)")
handles, labels = axes[0][-1].get_legend_handles_labels()
if axes[0][-1].get_legend():
    axes[0][-1].get_legend().remove()
fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
fig.tight_layout()
save_figure(fig, sm.output.figure, dpi=130)
plt.close(fig)


# ---- the same policies without the victim buffer (the PVP study's replays at this memory) ---------
def no_buffer_figure(pvp: pd.DataFrame, path) -> list[str]:
    """Storage rows / MIN of hybrid, static and dynamic without the victim buffer at this memory,
    one group per batch and window, beside the figure above (which has the buffer in every policy):
    claim (c) is decided on these (verdicts.claim_c); with the buffer the order turns round. Bars
    rise from 1 (= MIN) so that the excess over the bound is what is drawn. Returns the groups."""
    at = pvp[((pvp.cache_fraction - FRACTION).abs() < 1e-9) & (pvp.setting != "authors")]
    off = at[~at.buffer & at.policy.isin(["hybrid", "static", "dynamic"])]
    on = at[at.buffer & at.policy.isin(["hybrid", "dynamic"])]
    on = on[(on.host_fraction - 0.1).abs() < 1e-9] if "host_fraction" in on else on.iloc[0:0]
    groups = [(int(b), int(w)) for b, w in sorted({(b, w) for b, w in zip(off.batch, off.window)})]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(groups) + 2.5), 4.0))
    policies = ["hybrid", "static", "dynamic"]
    width = 0.8 / len(policies)
    for i, pol in enumerate(policies):
        for j, (b, w) in enumerate(groups):
            sel = off[(off.policy == pol) & (off.batch == b) & (off.window == w)]
            if sel.empty:
                continue
            v = float(sel.storage_rows_vs_min.iloc[0])
            x = j + (i - (len(policies) - 1) / 2) * width
            ax.bar(x, v - 1.0, bottom=1.0, width=width, color=POLICY_COLOURS[pol],
                   label=f"{pol}, no victim buffer" if j == 0 else None)
            ax.annotate(f"{v:.2f}", (x, v), xytext=(0, -3), textcoords="offset points", ha="center", va="top",
                        fontsize=7, color="white", fontweight="bold")
            with_ = on[(on.policy == pol) & (on.batch == b) & (on.window == w)]
            if not with_.empty:
                ax.scatter([x], [float(with_.storage_rows_vs_min.iloc[0])], marker="_", s=160, linewidths=2,
                           color="black", zorder=5,
                           label="the same policy with the buffer (host share 0.1)" if (j, i) == (0, 0) else None)
    ax.axhline(1.0, color="black", lw=1)
    ax.set_xticks(range(len(groups)), [f"batch {b}\nW = {w}" for b, w in groups])
    ax.set_ylim(bottom=1.0)
    ax.set_xlabel("trace batch size and lookahead horizon W (batches)")
    ax.set_ylabel("storage rows / MIN (ratio; 1 = MIN)")
    ax.set_title(f"Simulated: the policies without the victim buffer ({PCT} memory per device)", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)
    fig.tight_layout()
    save_figure(fig, path, dpi=130)
    plt.close(fig)
    return [f"batch {b}, W = {w}" for b, w in groups]


pvp_points = load_pvp(sm.input.pvp) if len(sm.input.pvp) else pd.DataFrame()
no_buffer_groups = no_buffer_figure(pvp_points, sm.output.no_buffer_figure) if not pvp_points.empty else []

# ---- tables ---------------------------------------------------------------------------------------
near = (sweep["cache_fraction"] - FRACTION).abs()
at10 = sweep[near == near.min()]
# the budget's split (policies without a victim buffer, e.g. horizon, give the host share to cache lines)
b10 = at10[at10["window"] == at10["window"].max()].sort_values("capacity_rows", kind="stable").iloc[0]
victim_note = (f"{int(b10['total_rows']):,} rows per device = {int(b10['capacity_rows']):,} cache lines + "
               f"{int(b10['victim_capacity']):,} rows of victim queues and landing buffer "
               f"({int(b10['victim_depth']):,} lines per queue at W = {int(b10['window'])})")
ratio = at10.pivot_table(index="policy", columns="window", values="storage_rows_vs_min").reset_index()
ratio.columns = ["policy"] + [f"W={w}: rows / MIN" for w in ratio.columns[1:]]
wmax = max(windows)
extra = at10[at10["window"] == wmax][["policy", RATIO_KEY, "storage_rows", "hits", "victim_hits",
                                      "storage_rows_vs_min_cache", "storage_rows_vs_opt_static",
                                      "storage_rows_vs_compulsory"]]
extra.columns = ["policy", "cache rows / rows per iteration", f"storage rows (W={wmax})", "hits", "victim hits", "/ MIN cache lines only",
                 "/ optimal static", "/ compulsory"]
table10 = ratio.merge(extra, on="policy").sort_values(f"W={wmax}: rows / MIN")

multi = pd.concat([pd.read_csv(p) for p in sm.input.multi], ignore_index=True)
multi_view = multi[["mode", "policy", "storage_rows", "compulsory", "min_rows", "min_total_rows",
                    "storage_rows_vs_min"]].copy()
multi_view.columns = ["mode", "policy", "storage rows", "compulsory", "MIN per device", "MIN of 2 devices' memory",
                      "rows / MIN per device"]
iso = multi.set_index(["policy", "mode"])["storage_rows"]
shared_vs_iso = {p: iso[(p, "shared")] / iso[(p, "isolated")] for p in multi["policy"].unique()}

# ---- scaling: shared against isolated over G devices, the same memory per device ----------------
scaling = scaling_points(pd.read_csv(p) for p in sm.input.scaling)
sns.set_theme(style="whitegrid", context="paper")
fig, (ax_rows, ax_hit) = plt.subplots(1, 2, figsize=(10, 3.9))
scaling["system"] = scaling["policy"] + ", " + scaling["mode"]
# colour: the policy (its colour of every figure); line and marker: shared or isolated
modes = {"shared": "", "isolated": (4, 2)}
sns.lineplot(data=scaling, x="devices", y="storage_rows_per_device_iteration", hue="policy", style="mode",
             markers=True, dashes=modes, ax=ax_rows, palette=POLICY_COLOURS)
for mode, part in scaling[scaling["policy"] == scaling["policy"].iloc[0]].groupby("mode"):
    ax_rows.plot(part["devices"], part["min_rows_per_device_iteration"], ls=":", lw=1.5, color="grey" if mode == "isolated" else "black",
                 label=f"MIN, {mode}")
ax_rows.set_xlabel("devices G")
ax_rows.set_ylabel("storage rows per device per iteration (rows)")
ax_rows.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3)
sns.lineplot(data=scaling.assign(hit_pct=lambda d: 100 * d.hit_rate), x="devices", y="hit_pct", hue="policy",
             style="mode", markers=True, dashes=modes, ax=ax_hit, legend=False, palette=POLICY_COLOURS)
ax_hit.set_xlabel("devices G")
ax_hit.set_ylabel("hit rate (% of rows requested)")
for ax in (ax_rows, ax_hit):
    ax.set_xticks(sorted(scaling["devices"].unique()))
fig.suptitle(f"Simulated: shared vs isolated caches over G devices ({PCT} memory per device, W = 8)")
fig.tight_layout()
save_figure(fig, sm.output.scaling_figure, dpi=130, bbox_inches="tight")
plt.close(fig)
scaling_wide = scaling.pivot_table(index="devices", columns="system", values="storage_rows_per_device_iteration")
scaling_wide.columns = [f"{c}: rows / device / iteration" for c in scaling_wide.columns]
scaling_view = scaling_wide.reset_index().rename(columns={"devices": "G"})



# ---- the regime sweep: the same policies over batch sizes (cache rows / rows per iteration) ------
def read_points(paths):
    frames = [pd.read_csv(p).assign(file=Path(p).stem) for p in paths]
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    df[RATIO_KEY] = [sim_regime(r) for _, r in df.iterrows()]
    df["distinct rows / iteration"] = df["distinct"] / (df["batches"] * df["devices"])
    return df


regime = read_points(sm.input.regime)
headline_ratio = float(b10[RATIO_KEY])
per_iter = float(b10["distinct"]) / (float(b10["batches"]) * float(b10["devices"]))
summary = {"dataset": sm.params.dataset["tag"], "batch_size": int(sm.params.batch), "fanouts": sm.params.fanouts,
           "cache_fraction": float(b10["cache_fraction"]), "window": int(b10["window"]),
           "cache_rows": int(b10["capacity_rows"]), "total_rows": int(b10["total_rows"]),
           "distinct_rows_per_iteration": per_iter, RATIO_KEY: headline_ratio,
           "storage_rows_vs_min": {r["policy"]: float(r["storage_rows_vs_min"]) for _, r in
                                   at10[at10["window"] == wmax].iterrows()},
           "regime_sweep": [], "hetero": None}
sns.set_theme(style="whitegrid", context="paper")
fig, ax = plt.subplots(figsize=(7.5, 4.2))
if not regime.empty:
    sns.lineplot(data=regime, x=RATIO_KEY, y="storage_rows_vs_min", hue="policy", style="policy", markers=True,
                 dashes=False, ax=ax, palette=POLICY_COLOURS)
    ax.set_xscale("log")
    # plain numbers at 1, 2 and 5 per decade: the default minor labels (2x10^0, 3x10^0, ...) ran into
    # one another on a short range
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.axvspan(7, 26, color="grey", alpha=0.12, label="the paper's setting: IGB-full, 4-10 GiB GPU cache")
    ax.axvline(headline_ratio, color="black", ls="--", lw=1, label=f"this run (batch {sm.params.batch})")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=8)
ax.set_xlabel("cache rows / distinct rows per iteration (rows / rows, log)")
ax.set_ylabel("storage rows / MIN (ratio, same memory)")
ax.set_title(f"Simulated: policies along the regime axis\n({PCT} memory per device, W = 8, with the victim buffer; "
             "batch size varies)")
fig.tight_layout()
save_figure(fig, sm.output.regime_figure, dpi=130)
plt.close(fig)

regime_table = ""
if not regime.empty:
    # one row per trace (batch size), one column per policy (storage rows / MIN)
    regime["batch"] = regime["file"].str.extract(r"regime-b(\d+)", expand=False).astype(int)
    wide = regime.pivot_table(index="batch", columns="policy", values="storage_rows_vs_min")
    policies = list(wide.columns)
    # the regime of the trace: the cache lines of the budget (policies with a victim buffer share them)
    meta = regime.sort_values("capacity_rows").drop_duplicates("batch").set_index("batch")
    wide.insert(0, "iterations", meta["batches"].astype(int))
    wide.insert(1, "distinct rows / iteration", meta["distinct rows / iteration"])
    wide.insert(2, "cache rows / rows per iteration", meta[RATIO_KEY])
    wide["best policy"] = wide[policies].idxmin(axis=1)
    # among the policies that see only the lookahead window W (not a long-lookahead one such as horizon)
    windowed = sorted(set(regime.loc[regime["lookahead"] == regime["window"], "policy"]))
    if windowed and len(windowed) < len(policies):
        wide["best within W"] = wide[windowed].idxmin(axis=1)
    wide = wide.reset_index().rename(columns={"batch": "batch size"})
    regime_table = md_table(wide)
    for _, r in wide.iterrows():
        summary["regime_sweep"].append({"batch_size": int(r["batch size"]), "iterations": int(r["iterations"]),
                                        "distinct_rows_per_iteration": float(r["distinct rows / iteration"]),
                                        RATIO_KEY: float(r["cache rows / rows per iteration"]),
                                        "best": r["best policy"], "best_within_window": r.get("best within W"),
                                        "storage_rows_vs_min": {p: float(r[p]) for p in policies if pd.notna(r[p])}})

hetero_text = ""
if sm.input.hetero:
    het = read_points(sm.input.hetero)
    h = het.sort_values("storage_rows_vs_min")
    hv = h[["policy", RATIO_KEY, "storage_rows", "hits", "victim_hits", "storage_rows_vs_min",
            "storage_rows_vs_opt_static"]].copy()
    hv.columns = ["policy", "cache rows / rows per iteration", "storage rows", "hits", "victim hits", "rows / MIN",
                  "/ optimal static"]
    hr = h.sort_values("capacity_rows", kind="stable").iloc[0]   # the budget's split, as in the sweep
    hrows = json.loads(Path(sm.input.hetero_json[0]).read_text())["trace"]["num_rows"]
    summary["hetero"] = {"dataset": sm.params.hetero["tag"], RATIO_KEY: float(hr[RATIO_KEY]),
                         "distinct_rows_per_iteration": float(hr["distinct rows / iteration"]),
                         "storage_rows_vs_min": {r["policy"]: float(r["storage_rows_vs_min"]) for _, r in h.iterrows()}}
    hetero_text = f"""
**Heterogeneous graph** (`{sm.params.hetero['tag']}`: the IGBH-like graph of `lsm-gnn dataset generate
{sm.params.hetero['size']} --hetero`, all node types in one row space of {hrows:,} rows), the same sampler
(batch {sm.params.batch}, fan-outs {sm.params.fanouts} per relation), {int(hr['batches'])} iterations, {PCT} memory,
W = 8: {hr['distinct rows / iteration']:,.0f} distinct rows per iteration, cache rows / distinct rows per iteration = **{hr[RATIO_KEY]:.1f}**.

{md_table(hv)}
"""

from lsm_gnn.utils.atomic import write_json  # noqa: E402

write_json(sm.output.regime, summary)

no_buffer_text = ("" if not no_buffer_groups else f"""
**Without the victim buffer** (the figure above has it in every policy; claim (c) compares the policies
without it): hybrid, static and dynamic at {PCT} memory, storage rows / MIN per batch and window
({", ".join(no_buffer_groups)}), bars rising from 1 = MIN; a black dash is the same policy with the buffer
at the config's host share. The same replays as the PVP section (section 35).

![the policies without the victim buffer](figures/cache_policies_no_buffer.png)
""")
text = f"""## Cache policies against the bounds (simulated: exact counts of the trace simulator)

One trace of the training sampler on {dataset_words(sm.params.dataset)} (fan-outs {sm.params.fanouts}, batch
{sm.params.batch}, seed as in training; {batches:,} iterations in {epochs} epoch(s) on one device) replayed through
every eviction policy with the cache engine's decision replay (`lsm-gnn simulate`). Every point gives each
system the same memory per device: the x axis is the total (device cache lines + victim queues + landing
buffer), split by the run config's host share. Bounds on the same coalesced trace (duplicates in a batch are
one request): **MIN** is Belady's optimum at that total (batch-granular, may bypass, fully associative: a
floor no policy can beat, with or without the victim buffer); **MIN (cache lines only)** is the optimum of
the device cache alone; **optimal static** is the best fixed set of as many rows, filled on first use. At
{PCT}: {victim_note}. Windows: {", ".join(str(w) for w in windows)}.

**Regime: cache rows / distinct rows per iteration = {headline_ratio:.1f}** ({int(b10['capacity_rows']):,} cache
lines per device over {per_iter:,.0f} distinct rows requested per iteration; {PAPER_REGIME}, docs/workflow.md).
Below about 1 the cache cannot hold one iteration's rows and every policy looks alike.

![storage rows per epoch](figures/cache_storage_rows.png)
{no_buffer_text}
**Storage rows / MIN at a total memory of {PCT} of the feature rows per device**
({int(b10['total_rows']):,} rows; MIN {int(b10['min_rows']):,}, MIN of the cache lines alone
{int(b10['min_cache_rows']):,}, set-associative MIN {int(b10['min_set_rows']):,}, optimal static
{int(b10['opt_static_rows']):,}, compulsory {int(b10['compulsory']):,} rows):

{md_table(table10)}

**The regime axis.** The same policies at {PCT} memory and W = 8, one trace per batch size
({sm.params.regime_seeds:,} seed nodes each, at least 20 iterations): the larger the batch, the more
distinct rows one iteration requests and the smaller the cache against them. Storage rows / MIN per
policy; the shaded band is IGB-full with a 4-10 GiB GPU cache.

![policies along the regime axis](figures/cache_regime.png)

{regime_table}
{hetero_text}
**Two devices, {PCT} memory each, W = 8** (simulated; shared: owner `v % 2` caches v for both devices;
isolated: each device caches what it requests). "MIN of 2 devices' memory" is MIN with twice one
device's total over the interleaved trace. Shared / isolated storage rows:
{", ".join(f"{p} {r:.3f}" for p, r in shared_vs_iso.items())}.

{md_table(multi_view)}

**Scaling over G devices** (simulated; the same {PCT} memory per device at every G, hybrid and LRU, W = 8;
one G-device trace per G, each device drawing its own mini-batches): storage rows read per device per
iteration. With shared caches the G caches together hold G times one device's rows, so each device reads
less from storage as G grows; isolated caches each hold what their own device requests.

![shared vs isolated over G devices](figures/cache_scaling.png)

{md_table(scaling_view)}
"""
write_text(sm.output.fragment, text)

"""Report section 30: storage rows per epoch of every eviction policy against the bounds (MIN at
the same total memory, MIN of the cache lines alone, optimal static, compulsory) on one trace, and the 2-device
shared-vs-isolated comparison, from `lsm-gnn simulate` CSVs."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.utils.atomic import atomic_path, write_text  # noqa: E402

sm = snakemake  # noqa: F821  (injected by Snakemake)


def md_table(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_fmt(v) for v in row) + " |")
    return "\n".join(lines)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


sweep = pd.concat([pd.read_csv(p) for p in sm.input.sweeps], ignore_index=True)
sweep["cache %"] = (sweep["cache_fraction"] * 100).round(2)
write_text(sm.output.table, sweep.to_csv(index=False))
epochs = int(sweep["epochs"].iloc[0])
batches = int(sweep["batches"].iloc[0])

# ---- figure: storage rows per epoch vs cache size, one panel per window -------------------------
windows = sorted(sweep["window"].unique())
sns.set_theme(style="whitegrid", context="paper")
fig, axes = plt.subplots(1, len(windows), figsize=(4.2 * len(windows), 3.8), sharey=True, squeeze=False)
for ax, w in zip(axes[0], windows):
    part = sweep[sweep["window"] == w]
    sns.lineplot(data=part, x="cache %", y="storage_rows_per_epoch", hue="policy", style="policy",
                 markers=True, dashes=False, ax=ax, legend=(ax is axes[0][-1]))
    bnd = part.drop_duplicates("cache %").sort_values("cache %")
    for col, label, style in (("min_rows", "MIN (same memory)", dict(color="black", lw=2)),
                              ("min_cache_rows", "MIN (cache lines only)", dict(color="black", ls="--")),
                              ("opt_static_rows", "optimal static", dict(color="grey", ls=":", lw=2))):
        ax.plot(bnd["cache %"], bnd[col] / epochs, label=label, **style)
    ax.set_xscale("log")
    ax.set_xticks(sorted(sweep["cache %"].unique()))
    ax.set_xticklabels([f"{x:g}%" for x in sorted(sweep["cache %"].unique())])
    ax.set_ylim(bottom=0)
    ax.set_title(f"lookahead window W = {w}")
    ax.set_xlabel("memory per device (% of feature rows)")
    ax.set_ylabel("storage rows per epoch")
handles, labels = axes[0][-1].get_legend_handles_labels()
if axes[0][-1].get_legend():
    axes[0][-1].get_legend().remove()
fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
fig.tight_layout()
with atomic_path(sm.output.figure, suffix=".png") as tmp:
    fig.savefig(tmp, dpi=130, bbox_inches="tight")

# ---- tables ---------------------------------------------------------------------------------------
at10 = sweep[(sweep["cache_fraction"] - 0.10).abs() < 1e-9]
b10 = at10.sort_values("window").iloc[-1]
victim_note = (f"{int(b10['total_rows']):,} rows per device = {int(b10['capacity_rows']):,} cache lines + "
               f"{int(b10['victim_capacity']):,} rows of victim queues and landing buffer "
               f"({int(b10['victim_depth']):,} lines per queue at W = {int(b10['window'])})")
ratio = at10.pivot_table(index="policy", columns="window", values="storage_rows_vs_min").reset_index()
ratio.columns = ["policy"] + [f"W={w}: rows / MIN" for w in ratio.columns[1:]]
wmax = max(windows)
extra = at10[at10["window"] == wmax][["policy", "storage_rows", "hits", "victim_hits",
                                      "storage_rows_vs_min_cache", "storage_rows_vs_opt_static",
                                      "storage_rows_vs_compulsory"]]
extra.columns = ["policy", f"storage rows (W={wmax})", "hits", "victim hits", "/ MIN cache lines only",
                 "/ optimal static", "/ compulsory"]
table10 = ratio.merge(extra, on="policy").sort_values(f"W={wmax}: rows / MIN")

multi = pd.concat([pd.read_csv(p) for p in sm.input.multi], ignore_index=True)
multi_view = multi[["mode", "policy", "storage_rows", "compulsory", "min_rows", "min_total_rows",
                    "storage_rows_vs_min"]].copy()
multi_view.columns = ["mode", "policy", "storage rows", "compulsory", "MIN per device", "MIN of 2 devices' memory",
                      "rows / MIN per device"]
iso = multi.set_index(["policy", "mode"])["storage_rows"]
shared_vs_iso = {p: iso[(p, "shared")] / iso[(p, "isolated")] for p in multi["policy"].unique()}

text = f"""## Cache policies against the bounds (trace simulator)

One trace of the training sampler (fan-outs 10,15, batch 1024, seed as in training; {batches} iterations
in {epochs} epoch(s) on one device) replayed through every eviction policy with the cache engine's
decision replay (`lsm-gnn simulate`). Every point gives each system the same memory per device: the
x axis is the total (device cache lines + victim queues + landing buffer), split by the run config's
host share. Bounds on the same coalesced trace (duplicates in a batch are one request): **MIN** is
Belady's optimum at that total (batch-granular, may bypass, fully associative: a floor no policy can
beat, with or without the victim buffer); **MIN (cache lines only)** is the optimum of the device
cache alone; **optimal static** is the best fixed set of as many rows, filled on first use. At 10 %:
{victim_note}. Sweep: {sm.params.sweep}.

![storage rows per epoch](figures/cache_storage_rows.png)

**Storage rows / MIN at a total memory of 10 % of the feature rows per device**
({int(b10['total_rows']):,} rows; MIN {int(b10['min_rows']):,}, MIN of the cache lines alone
{int(b10['min_cache_rows']):,}, set-associative MIN {int(b10['min_set_rows']):,}, optimal static
{int(b10['opt_static_rows']):,}, compulsory {int(b10['compulsory']):,} rows):

{md_table(table10)}

**Two devices, 10 % memory each, W = 8** (simulated; shared: owner `v % 2` caches v for both devices;
isolated: each device caches what it requests). "MIN of 2 devices' memory" is MIN with twice one
device's total over the interleaved trace. Shared / isolated storage rows:
{", ".join(f"{p} {r:.3f}" for p, r in shared_vs_iso.items())}.

{md_table(multi_view)}
"""
write_text(sm.output.fragment, text)

"""Report section 50: shared cache vs isolated caches vs one device (same total cache), 2 devices:
storage rows per epoch, bytes exchanged per iteration (bench replay of one trace) and training
epoch time (short 2-rank training runs)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.utils.atomic import atomic_path, write_text  # noqa: E402

from wfcommon import PAPER_REGIME, dataset_words, fmt, log_to, record_regime, row_bytes  # noqa: E402

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
ROW_BYTES = row_bytes(sm.params.data)
bench = json.loads(Path(sm.input.bench).read_text())
names = {"shared": "shared (LSM-GNN)", "isolated": "isolated (GIDS multi-GPU)", "one_device": "one device, 2x cache"}


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")


rows = []
for key, label in names.items():
    s = bench["systems"][key]
    mem = s.get("memory") or {}
    rows.append({"system": label, "memory MiB per device": mem.get("total_bytes", float("nan")) / 2**20,
                 "storage rows / epoch": _mean(s["storage_rows_per_epoch"]),
                 "exchange bytes / iteration": s["exchange_bytes_per_iteration"],
                 "replay s / epoch": _mean(s["epoch_seconds"])})
train = {}
for path in sm.input.train:
    rec = json.loads(Path(path).read_text())
    mode = Path(path).stem.split("-", 1)[1]
    t = rec.get("metrics", {}).get("time", {})
    per_iter = t.get("per_iteration", {})
    train[mode] = {"status": rec.get("status"), "epoch_s": t.get("epoch_steady_s") or t.get("epoch_cold_s"),
                   "iter_s": t.get("per_iteration_wall")
                   or sum(v for v in per_iter.values() if isinstance(v, (int, float))) or None,
                   "storage_rows": rec.get("metrics", {}).get("rows", {}).get("storage_rows"),
                   "regime": record_regime(rec, ROW_BYTES)["ratio"]}
for r, mode in zip(rows, ["shared", "isolated", "one"]):
    r["train s / iteration"] = train.get(mode, {}).get("iter_s")  # mean wall of the timed iterations
    r["cache rows / rows per iteration (train)"] = train.get(mode, {}).get("regime")
df = pd.DataFrame(rows)

long = df.melt(id_vars="system", value_vars=["storage rows / epoch", "exchange bytes / iteration",
                                             "train s / iteration"], var_name="metric")
g = sns.catplot(data=long, x="system", y="value", col="metric", kind="bar", sharey=False, height=3.2,
                aspect=1.1, hue="system", legend=False)
g.set_titles("{col_name}")
g.set_xticklabels(rotation=20, ha="right")
UNITS = {"storage rows / epoch": "storage rows per replayed epoch (rows)",
         "exchange bytes / iteration": "exchanged per iteration (bytes)",
         "train s / iteration": "time per training iteration (s, one run)"}
for ax, metric in zip(g.axes.flat, long.metric.unique()):
    ax.set_ylabel(UNITS[metric])
    ax.set_xlabel("system (2 devices, equal memory)")
g.figure.subplots_adjust(wspace=0.5)
fig_path = Path(sm.output.figure)
with atomic_path(fig_path, suffix=".png") as tmp:
    g.figure.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
plt.close("all")


def _fmt(v):
    if v is None or v != v:
        return "n/a"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3f}"


table = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
for rec in df.itertuples(index=False):
    table.append("| " + " | ".join(str(rec[0]) if i == 0 else _fmt(v) for i, v in enumerate(rec)) + " |")
ratio = bench["shared_vs_isolated_storage_rows"]
verdict = "meets" if ratio <= 0.6 else "misses"
steady = bench.get("shared_vs_isolated_storage_rows_steady")
steady_line = (f"Over the iterations after the first {bench['warmup_iterations']} (caches warm): "
               f"**{steady:.3f}**.\n" if steady is not None and bench.get("warmup_iterations") else "")
why = ("" if ratio <= 0.6 else
       "Why above 0.6 here: a short window is dominated by cold misses, which both systems pay "
       "(every row's first request is a storage read); the ratio falls as the caches warm "
       "(see `storage_rows_per_iteration` in the bench JSON). Shared / one device with the same total "
       f"memory: {bench['shared_vs_one_device_storage_rows']:.3f}, so partitioning the cache by owner "
       "costs nothing. The rest is the trace's reuse at this cache size and the policy (the victim-buffer "
       "depth matters most): docs/multi-device.md, Measurements, has the small-graph figures.\n")
text = f"""## Multi-device: shared cache vs isolated caches (2 devices; measured on this machine: real ranks replaying one trace, and short training runs)

{dataset_words(sm.params.dataset)[0].upper()}{dataset_words(sm.params.dataset)[1:]}, {bench['devices']} devices, feature memory {bench['cache_fraction']:.0%} of the
feature bytes per device ({bench['memory']['total_rows_per_device']:,} rows: {bench['capacity_rows_per_device']:,}
cache lines + {bench['memory']['victim_rows_per_device']:,} rows of victim queues and landing buffer), policy
{bench['policy']}, W={bench['window']}, {bench['batches_per_epoch']} iterations of one recorded 2-device trace
replayed through real ranks (gloo on 127.0.0.1), the exchange and the caches; "one device" serves every
device's requests with twice one device's memory, split by the same rule (the same total).
Storage rows / Belady MIN at the same memory: shared {bench['shared_vs_min_storage_rows']:.3f}, isolated
{bench['isolated_vs_min_storage_rows']:.3f}, one device {bench['one_device_vs_min_storage_rows']:.3f}.
Command: `lsm-gnn bench multidevice {bench['dataset']} --devices 2 --trace ... --batches {bench['batches_per_epoch']}`.
Training time: `lsm-gnn train --devices 2` (and `--devices 1` with 2x memory), first iterations only, one
run each: the times show where the iteration goes, no ratio between them is a measurement (not measured
here; the Baselines section compares the systems on repeated runs).
Regime of the shared-cache training run (per device: its cache lines over the distinct rows it requests per
iteration): cache rows / distinct rows per iteration = **{fmt(train.get('shared', {}).get('regime'), '.1f')}** ({PAPER_REGIME}).

{chr(10).join(table)}

**Shared / isolated storage rows: {ratio:.3f}** (target <= 0.6: {verdict} it).
{steady_line}One device (2x memory) / isolated: {bench['one_device_vs_isolated_storage_rows']:.3f}.
Of each iteration's per-device distinct requests, {bench['cross_device_duplicate_fraction']:.1%} were
also requested by the other device in the same iteration: the shared cache reads those once, the
isolated caches twice; the rest of the gap is the shared cache's doubled effective capacity (no
row is cached twice).
{why}
![shared vs isolated](figures/multidevice.png)
"""
write_text(sm.output.fragment, text)

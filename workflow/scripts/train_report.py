"""Report fragment of the training runs: epoch time by stage, accuracy and loss curves, a table."""


from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.records import read_record, timed_window  # noqa: E402
from lsm_gnn.utils.atomic import atomic_path, write_text  # noqa: E402

from figtools import STAGE_NAMES  # noqa: E402
from wfcommon import PAPER_REGIME, dataset_words, fmt, log_to, record_regime, row_bytes  # noqa: E402

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
ROW_BYTES = row_bytes(sm.params.data)
records = {Path(p).stem: read_record(p) for p in sm.input.records}
LABEL = {"lsm": "LSM-GNN (O_DIRECT + cache)", "memory": "in-memory ideal"}
STAGE_ORDER = ["sample", "fetch_cache", "fetch_victim", "fetch_storage", "train", "other"]
# one run of each system: a time ratio needs repeated runs with their spread (the Baselines section)
NOT_MEASURED = "not measured here"

# ---- per-epoch time split into the exposed (critical-path) stages ---------------------------------
rows = []
for name, rec in records.items():
    per_epoch = timed_window(rec["metrics"]["time"])["iterations_per_epoch"]
    for ep in rec["epochs"]:
        for stage in STAGE_ORDER:
            rows.append({"system": LABEL.get(name, name), "epoch": ep["epoch"], "stage": stage,
                         "seconds": ep["per_iteration_exposed"].get(stage, 0.0) * per_epoch})
stages = pd.DataFrame(rows)
sns.set_theme(style="whitegrid")
systems = list(dict.fromkeys(stages["system"]))
fig, axes = plt.subplots(1, len(systems), figsize=(5.5 * len(systems), 3.8), sharey=True, squeeze=False)
colors = dict(zip(STAGE_ORDER, sns.color_palette("tab10", len(STAGE_ORDER))))
for ax, system in zip(axes[0], systems):
    wide = stages[stages.system == system].pivot(index="epoch", columns="stage", values="seconds")[STAGE_ORDER]
    bottom = None
    for stage in STAGE_ORDER:
        ax.bar(wide.index.astype(str), wide[stage], bottom=bottom, color=colors[stage], label=STAGE_NAMES[stage])
        bottom = wide[stage] if bottom is None else bottom + wide[stage]
    ax.set_title(f"{system} (one run)")
    ax.set_xlabel("epoch (0 = cold)")
    ax.set_ylabel("seconds per epoch (exposed stages; timed window x iterations per epoch)")
axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
fig.tight_layout()
with atomic_path(sm.output.time_fig, suffix=".png") as tmp:
    fig.savefig(tmp, dpi=110, format="png")
plt.close(fig)

# ---- accuracy per epoch and the loss of every iteration ------------------------------------------
acc, loss = [], []
for name, rec in records.items():
    it = 0
    for ep in rec["epochs"]:
        acc.append({"system": LABEL.get(name, name), "epoch": ep["epoch"], "split": "validation",
                    "accuracy": ep.get("val_acc")})
        acc.append({"system": LABEL.get(name, name), "epoch": ep["epoch"], "split": "train (running)",
                    "accuracy": ep["train_acc"]})
        for v in ep["losses"]:
            loss.append({"system": LABEL.get(name, name), "iteration": it, "loss": v})
            it += 1
acc, loss = pd.DataFrame(acc).dropna(), pd.DataFrame(loss)
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
sns.lineplot(acc, x="epoch", y="accuracy", hue="system", style="split", markers=True, ax=a1)
a1.set_title("accuracy per epoch")
a1.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
sns.lineplot(loss, x="iteration", y="loss", hue="system", style="system", ax=a2)
a2.set_title("training loss per iteration")
fig.tight_layout()
with atomic_path(sm.output.acc_fig, suffix=".png") as tmp:
    fig.savefig(tmp, dpi=110, format="png")
plt.close(fig)

# ---- table -----------------------------------------------------------------------------------------
summary = []
mem = records.get("memory")
for name, rec in records.items():
    m, t = rec["metrics"], rec["metrics"]["time"]
    n_ep = len(rec["epochs"])
    regime = record_regime(rec, ROW_BYTES)
    summary.append({
        "system": LABEL.get(name, name),
        "cache_rows": regime["cache_rows"], "distinct_rows_per_iteration": regime["distinct_rows_per_iteration"],
        "cache_rows_per_iteration_rows": regime["ratio"],
        "memory_MiB": m["memory"]["total_bytes"] / 2**20,
        "memory_fraction": m["memory"]["fraction_of_features"],
        "cache_MiB": m["memory"]["cache_bytes"] / 2**20, "victim_MiB": m["memory"]["victim_bytes"] / 2**20,
        "epoch_cold_s": t["epoch_cold_s"], "epoch_steady_s": t["epoch_steady_s"],
        "steady_vs_memory": (t["epoch_steady_s"] / mem["metrics"]["time"]["epoch_steady_s"]
                             if mem and t["epoch_steady_s"] and mem["metrics"]["time"]["epoch_steady_s"] else None),
        "hidden_fetch_fraction": t["hidden_fetch_fraction"],
        "local_hit_rate": m["hit_rate"].get("local"), "victim_hit_rate": m["hit_rate"].get("victim"),
        "storage_MiB_per_epoch": m["traffic"]["storage_bytes"] / 2**20 / max(n_ep, 1),
        "val_acc": m["accuracy"]["val"], "test_acc": m["accuracy"]["test"],
    })
table = pd.DataFrame(summary)
with atomic_path(sm.output.table, suffix=".csv") as tmp:
    table.to_csv(tmp, index=False)

same_losses = None
if "lsm" in records and mem is not None:
    a = [v for ep in records["lsm"]["epochs"] for v in ep["losses"]]
    b = [v for ep in mem["epochs"] for v in ep["losses"]]
    same_losses = len(a) == len(b) and max((abs(x - y) for x, y in zip(a, b)), default=0.0) <= 1e-6

lsm_regime = record_regime(records["lsm"], ROW_BYTES) if "lsm" in records else \
    {"ratio": None, "cache_rows": None, "distinct_rows_per_iteration": None}
tw = timed_window(next(iter(records.values()))["metrics"]["time"])
cfg = next(iter(records.values()))["config"]
window_txt = ("whole epochs" if tw["full_epoch"] else
              f"{tw['warmup_iters']} warm-up + {tw['timed_iters']} timed iterations per epoch, extrapolated "
              f"to {tw['iterations_per_epoch']} iterations")


lines = [
    "## Training on one device: LSM-GNN vs the in-memory ideal (measured on this machine)",
    "",
    f"{dataset_words(sm.params.dataset)[0].upper()}{dataset_words(sm.params.dataset)[1:]}, {cfg['model']['name']} (hidden {cfg['model']['hidden']}), batch "
    f"{cfg['sampler']['batch_size']}, fan-outs {cfg['sampler']['fanouts']}, {len(mem['epochs']) if mem else '?'} "
    f"epochs, seed {cfg['train']['seed']}; timing: {window_txt}. LSM-GNN reads features with the "
    f"`{records.get('lsm', {}).get('config', {}).get('storage', {}).get('reader', '?')}` reader with a feature-memory "
    f"budget of {fmt(100 * (records.get('lsm', {}).get('config', {}).get('cache', {}).get('capacity_fraction') or 0), '.0f')}% "
    "of the feature bytes (device cache + victim buffer + landing buffer: the memory column); the ideal "
    "holds every feature row in memory. Evaluation is not part of the epoch time.",
    "",
    "",
    f"Regime of the LSM-GNN run: **cache rows / distinct rows per iteration = {fmt(lsm_regime['ratio'], '.1f')}** "
    f"({fmt(lsm_regime['cache_rows'], ',')} cache lines over {fmt(lsm_regime['distinct_rows_per_iteration'], ',.0f')} "
    f"distinct rows requested per timed iteration; {PAPER_REGIME}).",
    "",
    "| system | memory MiB (cache + victim) | % of features | cache rows / rows per iteration | cold epoch (s) | "
    "steady epoch (s) | steady vs ideal | fetch hidden | cache hits | victim hits | storage MiB/epoch | val acc | test acc |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]
for r in summary:
    lines.append(f"| {r['system']} | {fmt(r['memory_MiB'], '.0f')} ({fmt(r['cache_MiB'], '.0f')} + "
                 f"{fmt(r['victim_MiB'], '.0f')}) | {fmt(100 * r['memory_fraction'], '.1f')}% | "
                 f"{fmt(r['cache_rows_per_iteration_rows'], '.1f')} | {fmt(r['epoch_cold_s'])} | {fmt(r['epoch_steady_s'])} | "
                 f"{'-' if r['system'] == LABEL['memory'] else NOT_MEASURED} | {fmt(100 * r['hidden_fetch_fraction'] if r['hidden_fetch_fraction'] is not None else None, '.0f')}% | "
                 f"{fmt(100 * r['local_hit_rate'] if r['local_hit_rate'] is not None else None, '.1f')}% | "
                 f"{fmt(100 * r['victim_hit_rate'] if r['victim_hit_rate'] is not None else None, '.1f')}% | "
                 f"{fmt(r['storage_MiB_per_epoch'], '.0f')} | {fmt(r['val_acc'], '.3f')} | {fmt(r['test_acc'], '.3f')} |")
lines += [
    "",
    f"Epoch times here come from one run of each system ({window_txt}): they show where the time goes, "
    f"and no ratio between them is a measurement (\"steady vs ideal\": {NOT_MEASURED}; on this machine two "
    "runs of one command differed by up to 30 %). The Baselines section compares the systems on repeated, "
    "interleaved runs with their spread.",
    "",
    "![epoch time by stage](figures/train_epoch_time.png)",
    "",
    "Each bar is one epoch; its parts are the *exposed* stages: train step, other, and the time the "
    "train step waited for its inputs, split over sampling and the fetch tiers in proportion to their "
    "busy time (sampling and fetching run in threads ahead of training). 'fetch hidden' is the share "
    "of fetch time that overlapped training.",
    "",
    "![accuracy and loss](figures/train_accuracy.png)",
    "",
]
if lsm_regime["ratio"] is not None and lsm_regime["ratio"] < 4:
    lines += [f"At a regime of {lsm_regime['ratio']:.1f} one iteration requests more rows than a large share of the "
              "cache holds, so the cache hits little and every policy looks alike; the paper's regime is in the tens "
              "(docs/workflow.md). A smaller `batch_size` or a larger graph moves the run there.", ""]
if same_losses is not None:
    lines.append(f"Loss sequences of the two runs {'are identical (to 1e-6)' if same_losses else 'DIFFER'}: the "
                 "cache returns exactly the stored features.")
write_text(sm.output.fragment, "\n".join(lines) + "\n")

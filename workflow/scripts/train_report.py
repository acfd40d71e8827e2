"""Report fragment of the training runs (train_repeats rounds of each system, a new seed per round):
epoch time by stage with the min-max over the runs, accuracy and loss curves, a table of medians."""


from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.bench.replicate import SPREAD_LIMIT, spread_of  # noqa: E402
from lsm_gnn.metrics import timed_window  # noqa: E402
from lsm_gnn.records import read_record  # noqa: E402
from lsm_gnn.utils.atomic import atomic_path, write_text  # noqa: E402

from figtools import STAGE_COLOURS, STAGE_NAMES, SYSTEM_COLOURS, minmax_errorbars, save_figure  # noqa: E402
from wfcommon import PAPER_REGIME, dataset_words, fmt, log_to, record_regime, row_bytes  # noqa: E402

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
ROW_BYTES = row_bytes(sm.params.data)
LABEL = {"lsm": "LSM-GNN (O_DIRECT + cache)", "memory": "in-memory ideal"}
STAGE_ORDER = ["sample", "fetch_cache", "fetch_victim", "fetch_storage", "train", "other"]
NOT_MEASURED = "not measured here"

# the runs of each system, by round (file names SYSTEM-rR.json: common.smk's TRAIN_ORDER)
runs: dict[str, list[tuple[int, dict]]] = {}
for path in sm.input.records:
    system, repeat = Path(path).stem.rsplit("-r", 1)
    runs.setdefault(system, []).append((int(repeat), read_record(path)))
for v in runs.values():
    v.sort(key=lambda x: x[0])


def steady_s(rec: dict):
    return rec["metrics"]["time"]["epoch_steady_s"]


def epoch_seconds(rec: dict) -> dict[int, dict[str, float]]:
    """Per epoch, the exposed stages' seconds (the timed window's mean x iterations per epoch)."""
    per_epoch = timed_window(rec["metrics"]["time"])["iterations_per_epoch"]
    return {ep["epoch"]: {st: ep["per_iteration_exposed"].get(st, 0.0) * per_epoch for st in STAGE_ORDER}
            for ep in rec["epochs"]}


def median_run(items: list[tuple[int, dict]]) -> dict:
    """The run whose steady epoch is the median's (the lower middle one for an even count): the one
    whose stages are drawn and whose counters fill the table."""
    ordered = sorted(items, key=lambda x: (steady_s(x[1]) is None, steady_s(x[1]) or 0.0, x[0]))
    return ordered[(len(ordered) - 1) // 2][1]


stats = {s: {"steady": spread_of([steady_s(r) for _, r in items]),
             "cold": spread_of([r["metrics"]["time"]["epoch_cold_s"] for _, r in items])}
         for s, items in runs.items()}
medrun = {s: median_run(items) for s, items in runs.items()}
n_runs = {s: len(items) for s, items in runs.items()}

# ---- per-epoch time split into the exposed (critical-path) stages ---------------------------------
sns.set_theme(style="whitegrid")
systems = list(runs)
fig, axes = plt.subplots(1, len(systems), figsize=(5.5 * len(systems), 3.8), sharey=True, squeeze=False)
colors = STAGE_COLOURS
for ax, system in zip(axes[0], systems):
    wide = pd.DataFrame(epoch_seconds(medrun[system])).T[STAGE_ORDER].sort_index()
    x = wide.index.astype(str)
    bottom = None
    for stage in STAGE_ORDER:
        ax.bar(x, wide[stage], bottom=bottom, color=colors[stage], label=STAGE_NAMES[stage])
        bottom = wide[stage] if bottom is None else bottom + wide[stage]
    totals = pd.DataFrame([{ep: sum(st.values()) for ep, st in epoch_seconds(r).items()} for _, r in runs[system]])
    totals = totals[wide.index]
    minmax_errorbars(ax, range(len(wide.index)), totals.median(), totals.min(), totals.max(), horizontal=False,
                     label=f"min-max of the {n_runs[system]} runs")
    ax.set_title(f"{LABEL.get(system, system)} (median run of {n_runs[system]})")
    ax.set_xlabel("epoch (0 = cold)")
    ax.set_ylabel("seconds per epoch\n(exposed stages; timed window\nx iterations per epoch)")
axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
fig.tight_layout()
save_figure(fig, sm.output.time_fig, dpi=110)
plt.close(fig)

# ---- accuracy per epoch and the loss of every iteration: the median and min-max over the runs -------
acc, loss = [], []
for name, items in runs.items():
    for repeat, rec in items:
        it = 0
        for ep in rec["epochs"]:
            acc.append({"system": LABEL.get(name, name), "epoch": ep["epoch"], "split": "validation",
                        "accuracy": ep.get("val_acc"), "run": repeat})
            acc.append({"system": LABEL.get(name, name), "epoch": ep["epoch"], "split": "train (running)",
                        "accuracy": ep["train_acc"], "run": repeat})
            for v in ep["losses"]:
                loss.append({"system": LABEL.get(name, name), "iteration": it, "loss": v, "run": repeat})
                it += 1
acc, loss = pd.DataFrame(acc).dropna(), pd.DataFrame(loss)
band = {"estimator": "median", "errorbar": ("pi", 100)}  # the median line, the band from min to max
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
# each system in its colour of every figure (figtools.SYSTEM_COLOURS)
hues = {LABEL.get(k, k): SYSTEM_COLOURS.get(k, "#333333") for k in runs}
# the ideal first, LSM-GNN over it: with the same seed their curves coincide, and drawn the other way
# round the ideal's hid LSM-GNN's entirely
order = sorted(hues, key=lambda name: name != LABEL["memory"])
sns.lineplot(acc, x="epoch", y="accuracy", hue="system", style="split", markers=True, ax=a1, palette=hues, hue_order=order, **band)
a1.set_title(f"accuracy per epoch (median, band: min-max of the runs)")
a1.set_ylabel("accuracy (fraction of nodes)")
a1.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
sns.lineplot(loss, x="iteration", y="loss", hue="system", style="system", ax=a2, palette=hues, hue_order=order, style_order=order[::-1], **band)
a2.set_title("training loss per iteration (median, band: min-max)")
a2.set_ylabel("cross-entropy loss")
a2.set_xlabel("iteration (every epoch, warm-up included)")
# the ideal's curves broad and pale under LSM-GNN's: where the two coincide both stay visible
for a in (a1, a2):
    for line in a.lines:
        if matplotlib.colors.same_color(line.get_color(), SYSTEM_COLOURS["memory"]):
            line.set_linewidth(4.0)
            line.set_alpha(0.45)
# below the panels: inside, both legends sat on the curves (issue 45)
for a in (a1, a2):
    a.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
fig.tight_layout()
save_figure(fig, sm.output.acc_fig, dpi=110)
plt.close(fig)


# ---- the ratio of the steady epochs: a measurement only where both systems' runs agree --------------
def paired_ratios() -> list[float]:
    """Per round, LSM-GNN's steady epoch over the ideal's of the same seed."""
    ideal = {rep: steady_s(r) for rep, r in runs.get("memory", [])}
    return [steady_s(r) / ideal[rep] for rep, r in runs.get("lsm", [])
            if steady_s(r) and ideal.get(rep)]


pairs = spread_of(paired_ratios())
med_ratio = (stats["lsm"]["steady"]["median"] / stats["memory"]["steady"]["median"]
             if "lsm" in stats and "memory" in stats and stats["memory"]["steady"]["median"] else None)


def ratio_words() -> str:
    if med_ratio is None:
        return "n/a"
    spreads = [stats[s]["steady"] for s in ("lsm", "memory")]
    rng = f"; per round {pairs['min']:.2f}-{pairs['max']:.2f}x" if pairs["runs"] >= 2 else ""
    if all(sp["runs"] >= 2 and sp["spread"] is not None and sp["spread"] < SPREAD_LIMIT for sp in spreads):
        return f"{med_ratio:.2f}x ({pairs['runs']} rounds{rng})"
    if min(sp["runs"] for sp in spreads) < 2:
        return f"{NOT_MEASURED} ({med_ratio:.2f}x from one run of a system: no spread)"
    why = ", ".join(f"{100 * sp['spread']:.1f} %" if sp["spread"] is not None else "n/a" for sp in spreads)
    return f"{NOT_MEASURED} ({med_ratio:.2f}x from the medians{rng}; the runs spread {why})"


# ---- table -----------------------------------------------------------------------------------------
summary = []
for name in systems:
    rec = medrun[name]
    m, t = rec["metrics"], rec["metrics"]["time"]
    n_ep = len(rec["epochs"])
    regime = record_regime(rec, ROW_BYTES)
    st, co = stats[name]["steady"], stats[name]["cold"]
    summary.append({
        "system": LABEL.get(name, name), "runs": n_runs[name],
        "cache_rows": regime["cache_rows"], "distinct_rows_per_iteration": regime["distinct_rows_per_iteration"],
        "cache_rows_per_iteration_rows": regime["ratio"],
        "memory_MiB": m["memory"]["total_bytes"] / 2**20,
        "memory_fraction": m["memory"]["fraction_of_features"],
        "cache_MiB": m["memory"]["cache_bytes"] / 2**20, "victim_MiB": m["memory"]["victim_bytes"] / 2**20,
        "epoch_cold_s": co["median"], "epoch_cold_min_s": co["min"], "epoch_cold_max_s": co["max"],
        "epoch_steady_s": st["median"], "epoch_steady_min_s": st["min"], "epoch_steady_max_s": st["max"],
        "steady_spread": st["spread"],
        "steady_vs_memory": med_ratio if name == "lsm" else None,
        "steady_vs_memory_counted": (name == "lsm" and med_ratio is not None
                                     and not ratio_words().startswith(NOT_MEASURED)),
        "hidden_fetch_fraction": t["hidden_fetch_fraction"],
        "local_hit_rate": m["hit_rate"].get("local"), "victim_hit_rate": m["hit_rate"].get("victim"),
        "storage_MiB_per_epoch": m["traffic"]["storage_bytes"] / 2**20 / max(n_ep, 1),
        "val_acc": m["accuracy"]["val"], "test_acc": m["accuracy"]["test"],
    })
table = pd.DataFrame(summary)
with atomic_path(sm.output.table, suffix=".csv") as tmp:
    table.to_csv(tmp, index=False)


def same_losses(a: dict, b: dict) -> bool:
    x = [v for ep in a["epochs"] for v in ep["losses"]]
    y = [v for ep in b["epochs"] for v in ep["losses"]]
    return len(x) == len(y) and max((abs(p - q) for p, q in zip(x, y)), default=0.0) <= 1e-6


ideal_by_round = dict(runs.get("memory", []))
loss_pairs = [same_losses(r, ideal_by_round[rep]) for rep, r in runs.get("lsm", []) if rep in ideal_by_round]

lsm_regime = record_regime(medrun["lsm"], ROW_BYTES) if "lsm" in medrun else \
    {"ratio": None, "cache_rows": None, "distinct_rows_per_iteration": None}
first = next(iter(medrun.values()))
tw = timed_window(first["metrics"]["time"])
cfg = first["config"]
window_txt = ("whole epochs" if tw["full_epoch"] else
              f"{tw['warmup_iters']} warm-up + {tw['timed_iters']} timed iterations per epoch, extrapolated "
              f"to {tw['iterations_per_epoch']} iterations")
lsm_cfg = medrun.get("lsm", {}).get("config", {})
n_round = max(n_runs.values())


def span(sp: dict) -> str:
    if sp["median"] is None:
        return "n/a"
    return f"{fmt(sp['median'])} [{fmt(sp['min'])}, {fmt(sp['max'])}]" if sp["runs"] > 1 else fmt(sp["median"])


lines = [
    "## Training on one device: LSM-GNN vs the in-memory ideal (measured on this machine)",
    "",
    f"{dataset_words(sm.params.dataset)[0].upper()}{dataset_words(sm.params.dataset)[1:]}, {cfg['model']['name']} (hidden {cfg['model']['hidden']}), batch "
    f"{cfg['sampler']['batch_size']}, fan-outs {cfg['sampler']['fanouts']}, {len(first['epochs'])} "
    f"epochs; {n_round} round{'s' if n_round != 1 else ''}, each with its own seed (run_seed of seed "
    f"{sm.params.seed} and the round), both systems in every round on the same batches, their order rotated; "
    f"timing: {window_txt}. LSM-GNN reads features with the "
    f"`{lsm_cfg.get('storage', {}).get('reader', '?')}` reader with a feature-memory "
    f"budget of {fmt(100 * (lsm_cfg.get('cache', {}).get('capacity_fraction') or 0), '.0f')}% "
    "of the feature bytes (device cache + victim buffer + landing buffer: the memory column); the ideal "
    "holds every feature row in memory. Evaluation is not part of the epoch time.",
    "",
    f"Regime of the LSM-GNN median run: **cache rows / distinct rows per iteration = {fmt(lsm_regime['ratio'], '.1f')}** "
    f"({fmt(lsm_regime['cache_rows'], ',')} cache lines over {fmt(lsm_regime['distinct_rows_per_iteration'], ',.0f')} "
    f"distinct rows requested per timed iteration; {PAPER_REGIME}).",
    "",
    "| system | runs | memory MiB (cache + victim) | % of features | cache rows / rows per iteration | "
    "cold epoch (s) | steady epoch (s) | steady spread | steady vs ideal | fetch hidden | cache hits | victim hits | "
    "storage MiB/epoch | val acc | test acc |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]
for name, r in zip(systems, summary):
    st = stats[name]["steady"]
    lines.append(f"| {r['system']} | {r['runs']} | {fmt(r['memory_MiB'], '.0f')} ({fmt(r['cache_MiB'], '.0f')} + "
                 f"{fmt(r['victim_MiB'], '.0f')}) | {fmt(100 * r['memory_fraction'], '.1f')}% | "
                 f"{fmt(r['cache_rows_per_iteration_rows'], '.1f')} | {span(stats[name]['cold'])} | {span(st)} | "
                 f"{fmt(100 * st['spread'] if st['spread'] is not None else None, '.1f')} % | "
                 f"{ratio_words() if name == 'lsm' else '-'} | "
                 f"{fmt(100 * r['hidden_fetch_fraction'] if r['hidden_fetch_fraction'] is not None else None, '.0f')}% | "
                 f"{fmt(100 * r['local_hit_rate'] if r['local_hit_rate'] is not None else None, '.1f')}% | "
                 f"{fmt(100 * r['victim_hit_rate'] if r['victim_hit_rate'] is not None else None, '.1f')}% | "
                 f"{fmt(r['storage_MiB_per_epoch'], '.0f')} | {fmt(r['val_acc'], '.3f')} | {fmt(r['test_acc'], '.3f')} |")
lines += [
    "",
    f"Epoch times: median [min, max] over the runs; the spread is (max - min) / median. \"Steady vs ideal\" is "
    f"the ratio of the medians, a measurement only when both systems' runs spread less than "
    f"{SPREAD_LIMIT:.0%} (MLPerf Storage's rule for replicated runs, the one the Baselines section applies); "
    f"otherwise it reads \"{NOT_MEASURED}\". The other columns are the median run's (its steady epoch is the "
    "median). These runs really train on the 2 cores (no emulated accelerator); the Baselines section compares "
    "the systems as they would feed a GPU.",
    "",
    "![epoch time by stage](figures/train_epoch_time.png)",
    "",
    "Each bar is one epoch of the median run; its parts are the *exposed* stages: train step, other, and the "
    "time the train step waited for its inputs, split over sampling and the fetch tiers in proportion to their "
    "busy time (sampling and fetching run in threads ahead of training); the whisker spans the epoch's min-max "
    "over the runs, centred on their median. 'fetch hidden' is the share of fetch time that overlapped training.",
    "",
    "![accuracy and loss](figures/train_accuracy.png)",
    "",
]
if lsm_regime["ratio"] is not None and lsm_regime["ratio"] < 4:
    lines += [f"At a regime of {lsm_regime['ratio']:.1f} one iteration requests more rows than a large share of the "
              "cache holds, so the cache hits little and every policy looks alike; the paper's regime is in the tens "
              "(docs/workflow.md). A smaller `batch_size` or a larger graph moves the run there.", ""]
if loss_pairs:
    lines.append(f"Loss sequences of LSM-GNN and the ideal with the same seed: identical (to 1e-6) in "
                 f"{sum(loss_pairs)} of {len(loss_pairs)} rounds{'' if all(loss_pairs) else ' (THEY DIFFER in the others)'}: "
                 "the cache returns exactly the stored features.")
write_text(sm.output.fragment, "\n".join(lines) + "\n")

"""Aggregate the baselines run matrix (pandas), draw the figures (seaborn) and write the fragment.

Inputs: one run record per (system, devices, cache, accelerator, repeat): emulated-accelerator runs
(the lead of the section: AU, steady epoch, storage rows, the bound stage) and real-compute runs (loss
and accuracy). Outputs: summary.csv (one row per configuration and accelerator: the median of its
runs, min, max, spread), ratios.json (the same names as `lsm-gnn bench compare --json`, from the
emulated runs where there are any), three figures and the report section 60-baselines.md.
"""


import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt   # noqa: E402
import pandas as pd   # noqa: E402
import seaborn as sns   # noqa: E402

from lsm_gnn.metrics import EXCHANGE_STAGES, STAGES, bound_stage, timed_iterations, timed_window  # noqa: E402
from lsm_gnn.records import read_record  # noqa: E402
from lsm_gnn.bench.replicate import SPREAD_LIMIT  # noqa: E402  (MLPerf Storage's replication rule)
from lsm_gnn.utils.atomic import write_json, write_text   # noqa: E402

from figtools import STAGE_COLOURS, STAGE_NAMES, display_name, minmax_errorbars, save_figure, system_colour   # noqa: E402
from wfcommon import PAPER_REGIME, dataset_words, fmt, log_to, md_table, record_regime, row_bytes   # noqa: E402



def label(rec: dict, path: Path) -> str:
    """One label per configuration: the repeats of a run (-rK) share it."""
    s = rec["system"]
    if s == "distdgl":
        d = rec["metrics"]["distdgl"]
        return f"distdgl {d['machines']}x{d['trainers_per_machine']}"
    dev = rec["config"]["distributed"]["devices"]
    cache = re.sub(r"-[^-]+-r\d+$", "", path.stem).rsplit("-c", 1)[1]
    return f"{s} d{dev}" + (f" c{cache}" if s in ("lsm", "isolated", "mmap") else "")


def rows(paths, row_bytes_: int) -> pd.DataFrame:
    out = []
    for p in map(Path, paths):
        rec = read_record(p)
        m = rec["metrics"]
        regime = record_regime(rec, row_bytes_)
        t = m["time"]
        # critical-path view where the loop has one (overlapped stages would double count)
        per_iter = t.get("per_iteration_exposed") or t.get("per_iteration") or {}
        iters = timed_window(t).get("iterations_per_epoch") or 0
        acc = m.get("accelerator") or {"mode": "real"}
        its = timed_iterations(rec)
        row = {"label": label(rec, p), "system": rec["system"], "status": rec["status"],
               "accelerator": acc.get("profile") if acc.get("mode") == "emulated" else "real",
               "au": acc.get("au"), "samples_per_s": (m.get("throughput") or {}).get("samples_per_s"),
               "storage_rows_per_iteration": (m.get("rows") or {}).get("storage_rows", 0) / its,
               "bound": bound_stage(rec),
               "devices": rec["config"]["distributed"]["devices"],
               "cache_fraction": rec["config"]["cache"]["capacity_fraction"],
               "memory_MiB_per_device": m["memory"]["total_bytes"] / 2**20,
               "memory_fraction_all_devices": m["memory"]["all_devices_fraction"],
               "cache_rows_per_iteration_rows": regime["ratio"],
               "epoch_cold_s": t.get("epoch_cold_s"), "epoch_steady_s": t.get("epoch_steady_s"),
               "preprocessing_s": t.get("preprocessing_s") or 0.0, "first_epoch_s": t.get("first_epoch_s"),
               "startup_s": t.get("startup_s") or 0.0, "iterations_per_epoch": iters,
               "storage_bytes": m.get("traffic", {}).get("storage_bytes", 0),
               "network_bytes": m.get("traffic", {}).get("network_bytes"),
               "device_exchange_bytes": m.get("traffic", {}).get("device_exchange_bytes", 0),
               "val_acc": m.get("accuracy", {}).get("val"),
               "loss_last_epoch": (rec.get("epochs") or [{}])[-1].get("loss"),
               "page_cache_cap": (m.get("page_cache_cap") or {}).get("method")}
        for k in STAGES:  # seconds of each stage per epoch (mean per iteration x iterations)
            row[f"stage_{k}"] = float(per_iter.get(k, 0.0)) * iters
        # the exchange's busy time over the iteration's wall time, per run (the verdict on (e) reads its
        # min-max): an upper bound on its exposed cost, as the exchange runs in the loading thread,
        # overlapped with the train step (the exposed view above gives it only its share of the wait)
        busy, wall = t.get("per_iteration") or {}, t.get("per_iteration_wall")
        row["exchange_share"] = (sum(float(busy.get(k, 0.0)) for k in EXCHANGE_STAGES) / wall if wall else None)
        out.append(row)
    df = pd.DataFrame(out)
    # repeats of one configuration: the median of every number, min, max and the spread of the steady
    # epoch ((max - min) / median, flagged above 5 %: MLPerf Storage's replication rule)
    keys = ["label", "accelerator"]
    first = {c: "first" for c in df.columns if c not in keys and not pd.api.types.is_numeric_dtype(df[c])}
    grouped = df.groupby(keys, sort=False)
    agg = grouped.agg({**{c: "median" for c in df.columns if c not in first and c not in keys}, **first})
    g = grouped.epoch_steady_s
    agg["status"] = grouped.status.agg(lambda x: "complete" if (x == "complete").all() else "failed")
    agg["runs"] = g.size()
    agg["steady_min"], agg["steady_max"] = g.min(), g.max()
    agg["first_epoch_min"], agg["first_epoch_max"] = grouped.first_epoch_s.min(), grouped.first_epoch_s.max()
    agg["exchange_share_min"], agg["exchange_share_max"] = grouped.exchange_share.min(), grouped.exchange_share.max()
    agg["steady_spread"] = (g.max() - g.min()) / g.median()
    agg["spread_flagged"] = agg.steady_spread > SPREAD_LIMIT
    agg["bound"] = grouped.bound.agg(lambda x: x.mode().iloc[0] if x.notna().any() else None)
    agg = agg.reset_index()
    for c in ("devices", "iterations_per_epoch"):
        agg[c] = agg[c].astype(int)
    return agg.sort_values(["accelerator", "system", "devices", "cache_fraction"])


def headline(df: pd.DataFrame) -> pd.DataFrame:
    """The rows the ratios and the lead table use: the emulated runs where there are any."""
    emu = df[df.accelerator != "real"]
    return emu if not emu.empty else df


def ratios(df: pd.DataFrame, fraction: float = 0.1) -> dict:
    df = headline(df)

    def steady(system, devices=None):
        sel = df[(df.system == system) & (df.status == "complete")]
        if devices is not None:
            sel = sel[sel.devices == devices]
        if system in ("lsm", "mmap") and ((sel.cache_fraction - fraction).abs() < 1e-9).any():
            sel = sel[(sel.cache_fraction - fraction).abs() < 1e-9]  # the headline memory budget
        return float(sel.epoch_steady_s.iloc[0]) if not sel.empty and pd.notna(sel.epoch_steady_s.iloc[0]) else None

    lsm = steady("lsm", 2)
    out = {"lsm_epoch_steady_s": lsm}
    sel = df[(df.system == "lsm") & (df.devices == 2) & ((df.cache_fraction - fraction).abs() < 1e-9)]
    out["cache_rows_per_iteration_rows"] = (float(sel.cache_rows_per_iteration_rows.iloc[0])
                                            if not sel.empty and pd.notna(sel.cache_rows_per_iteration_rows.iloc[0]) else None)
    for s in ("distdgl", "mmap", "direct", "isolated", "memory"):
        v = steady(s, None if s == "distdgl" else 2)
        out[f"{s}_epoch_steady_s"] = v
        out[f"{s}_vs_lsm_epoch"] = (v / lsm) if (v and lsm) else None
    out["accelerator"] = str(df.accelerator.iloc[0]) if not df.empty else None
    if not sel.empty and pd.notna(sel.exchange_share.iloc[0]):
        out["lsm_exchange_share"] = {"median": float(sel.exchange_share.iloc[0]),
                                     "min": float(sel.exchange_share_min.iloc[0]),
                                     "max": float(sel.exchange_share_max.iloc[0]), "runs": int(sel.runs.iloc[0]),
                                     "exchange_bytes": float(sel.device_exchange_bytes.iloc[0] or 0.0)}
    au = df[(df.system == "lsm") & (df.devices == 2)].au
    out["lsm_au"] = float(au.iloc[0]) if not au.empty and pd.notna(au.iloc[0]) else None
    return out


def dominant_stage(df: pd.DataFrame, system: str) -> str:
    df = headline(df)
    sel = df[df.system == system]
    if sel.empty:
        return "n/a"
    r = sel.iloc[0]
    stages = {k: r[f"stage_{k}"] for k in STAGES}
    k = max(stages, key=stages.get)
    total = sum(stages.values()) or 1.0
    return f"{STAGE_NAMES[k]} ({100 * stages[k] / total:.0f}% of its epoch)"


def _values_beside(ax, values, unit: str, fmt_: str = ".1f"):
    """Each bar's value written beside its end: a 10 s bar on a 0-600 s axis is a sliver, its number
    is not (issue 45)."""
    right = ax.get_xlim()[1]
    for y, v in enumerate(values):
        if v is None or v != v:
            continue
        ax.annotate(f"{format(v, fmt_)} {unit}", xy=(v, y), xytext=(4, 7), textcoords="offset points",
                    va="bottom", ha="left", fontsize=8, color="#222222", zorder=7)
    ax.set_xlim(right=right * 1.12)               # room for the last label


def figures(df: pd.DataFrame, out: dict):
    """The section's three figures: stacked stage times with the steady epoch's min-max over the
    runs, the time to the end of the first epoch with its min-max, and the storage bytes (counts).
    Systems are named as a reader names them and keep their colour of every figure (figtools)."""
    sns.set_theme(style="whitegrid")
    df = headline(df).reset_index(drop=True)
    names = [display_name(x) for x in df.label]
    lo_n, hi_n = (int(df.runs.min()), int(df.runs.max())) if not df.empty else (0, 0)
    runs = f"median of {lo_n if lo_n == hi_n else f'{lo_n}-{hi_n}'} runs"
    stacked = df.set_index("label")[[f"stage_{k}" for k in STAGES]]
    stacked.index = names
    stacked.columns = list(STAGES)
    stacked = stacked.loc[:, (stacked > 0).any()]
    colours = [STAGE_COLOURS[k] for k in stacked.columns]
    stacked.columns = [STAGE_NAMES[k] for k in stacked.columns]
    ax = stacked.plot(kind="barh", stacked=True, figsize=(11, 0.55 * len(df) + 2), color=colours)
    minmax_errorbars(ax, range(len(df)), df.epoch_steady_s, df.steady_min, df.steady_max,
                     label="steady epoch: min-max of the runs")
    _values_beside(ax, df.epoch_steady_s, "s")
    ax.set_xlabel(f"seconds per steady epoch ({runs}; the number: the median)")
    ax.set_ylabel("system (devices, memory per device)")
    ax.set_title("Measured on this machine: epoch time by system, stacked by stage")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    plt.tight_layout()
    save_figure(ax.figure, out["epoch"], dpi=120, bbox_inches="tight")
    plt.close()

    first = df[["label", "preprocessing_s", "startup_s", "epoch_cold_s"]].set_index("label")
    first.index = names
    first.columns = ["preprocessing (partitioning, owner files, loading)", "cluster startup", "cold epoch"]
    ax = first.plot(kind="barh", stacked=True, figsize=(11, 0.55 * len(df) + 2),
                    color=["#bcbd22", "#17becf", "#7f7f7f"])
    minmax_errorbars(ax, range(len(df)), df.first_epoch_s, df.first_epoch_min, df.first_epoch_max,
                     label="first epoch: min-max of the runs")
    _values_beside(ax, df.first_epoch_s, "s")
    ax.set_xlabel(f"seconds to the end of the first epoch ({runs}; the number: the median)")
    ax.set_ylabel("system (devices, memory per device)")
    ax.set_title("Measured on this machine: time to the end of the first epoch, preprocessing included")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    plt.tight_layout()
    save_figure(ax.figure, out["first"], dpi=120, bbox_inches="tight")
    plt.close()

    # one bar per system in its own colour, named on the axis: no legend (an entry of a system that
    # reads nothing had no bar); a zero is written, not left blank
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(df) + 2))
    mb = df.storage_bytes / 1e6
    ax.barh(range(len(df)), mb, color=[system_colour(x) for x in df.label])
    ax.set_yticks(range(len(df)), names)
    for y, v in enumerate(mb):
        ax.annotate("0 MB (reads no storage)" if v == 0 else f"{v:,.0f} MB", xy=(v, y), xytext=(4, 0),
                    textcoords="offset points", va="center", ha="left", fontsize=8)
    ax.set_xlim(right=(float(mb.max()) if len(mb) and mb.max() > 0 else 1.0) * 1.25)
    ax.set_xlabel("MB read from storage over the measured epochs (median of the runs)")
    ax.set_ylabel("system (devices, memory per device)")
    ax.set_title("Measured on this machine: storage bytes by system")
    fig.tight_layout()
    save_figure(fig, out["storage"], dpi=120, bbox_inches="tight")
    plt.close()


NOT_MEASURED = "not measured here"


def _spread(head: pd.DataFrame, system: str):
    sel = head[(head.system == system) & (head.status == "complete")]
    if system != "distdgl":
        sel = sel[sel.devices == 2]
    if sel.empty:
        return None, 0
    return (float(sel.steady_spread.iloc[0]) if pd.notna(sel.steady_spread.iloc[0]) else None), int(sel.runs.iloc[0])


def spread_words(head: pd.DataFrame, system: str) -> str:
    words = []
    for s_ in (system, "lsm"):
        sp, n = _spread(head, s_)
        words.append("n/a" if sp is None else f"{100 * sp:.1f} % ({n} run{'s' if n != 1 else ''})")
    return ", ".join(words)


def counted(r: dict, head: pd.DataFrame, system: str) -> str:
    """The ratio where both systems' runs are repeated and spread less than SPREAD_LIMIT."""
    v = r.get(f"{system}_vs_lsm_epoch")
    if v is None:
        return "n/a"
    for s_ in (system, "lsm"):
        sp, n = _spread(head, s_)
        if sp is None or n < 2 or sp >= SPREAD_LIMIT:
            return f"{NOT_MEASURED} ({v:.2f}x from the medians)"
    return f"{v:.2f}x"


def markdown_table(df: pd.DataFrame) -> str:
    return md_table(df)


def fragment(df: pd.DataFrame, r: dict, dataset: dict, warmup: int, timed: int, distdgl: bool,
             accelerator: str | None) -> str:
    def fx(v, unit="x"):
        return "n/a" if v is None else f"{v:.2f}{unit}"

    words = dataset_words(dataset)
    head = headline(df)
    emulated = accelerator is not None and (df.accelerator != "real").any()
    lines = ["## Baselines in the same harness (measured on this machine: emulated accelerators, this machine's disk)", ""]
    if emulated:
        lines += [f"Every system ran with **emulated accelerators** (`{accelerator}` profile, lsm_gnn.accelerator): each "
                  "train step is a wait of that GPU's step time for the batch (fixed part + per input row + per "
                  "edge), as MLPerf Storage measures storage for training without GPUs. The data plane runs as it "
                  "does (sampling, lookahead, cache, victim buffer, exchange, storage reads, KVStore pulls) and has "
                  "the CPU cores to itself, as it would beside a GPU. AU is the accelerators' busy time over the "
                  "wall time of the timed windows (MLPerf Storage counts a run at AU >= 90 %). What this cannot "
                  "show: the exchange runs over gloo in host memory, not NVLink, and the GPU-side cache work runs "
                  "on CPU cores.", ""]
        lead = head[["label", "memory_MiB_per_device", "memory_fraction_all_devices", "au", "epoch_steady_s",
                     "steady_min", "steady_max", "steady_spread", "spread_flagged", "samples_per_s",
                     "storage_rows_per_iteration", "bound", "runs"]]
        lines += [markdown_table(lead), ""]
    lines += [f"{words[0].upper()}{words[1:]}. Every system trains the same model with the same sampler settings. "
              f"Each one is timed on the same window: {warmup} warm-up and {timed} timed iterations in each of 2 epochs; "
              f"the runs of all systems are interleaved and rotated (ABC, BCA, CAB), and each figure is the median of "
              f"a system's runs with `steady_min`, `steady_max` and `steady_spread` = (max - min) / median, flagged "
              f"above {SPREAD_LIMIT:.0%}. "
              "A whole epoch is too long for this machine, so the epoch time is the mean timed "
              "iteration multiplied by the system's iterations per epoch (lsm-gnn's rule, see docs/baselines.md). "
              + ("Dist-DGL runs for real on 2 emulated machines x 2 trainers. Each machine has its own mount and "
                 "network namespace, and all of them share the 2 cores of this host." if distdgl else
                 "Dist-DGL is not in this matrix (`baselines_distdgl: false`, or a heterogeneous graph, which its "
                 "baseline does not support)."),
              "",
              f"Regime of LSM-GNN on 2 devices (per device: its cache lines over the distinct rows it requests per "
              f"iteration): cache rows / distinct rows per iteration = **{fmt(r.get('cache_rows_per_iteration_rows'), '.1f')}** "
              f"({PAPER_REGIME}).", "",
              f"| ratio (median steady epoch over LSM-GNN's, 2 devices, {'emulated ' + accelerator if emulated else 'real compute'}) "
              "| value | spread of the runs (system, LSM-GNN) | target |", "|---|---|---|---|",
              *(f"| `{s_}_vs_lsm_epoch`{' (Dist-DGL 2x2)' if s_ == 'distdgl' else ''} | {counted(r, head, s_)} | "
                f"{spread_words(head, s_)} | {target} |"
                for s_, target in (("distdgl", ">= 3.75x"), ("isolated", ">= 1x"), ("mmap", "> 1x"), ("direct", ">= 1x"))),
              "", f"A ratio counts only when both systems ran at least twice and each one's runs spread less than "
              f"{SPREAD_LIMIT:.0%} ((max - min) / median); otherwise it reads \"{NOT_MEASURED}\".", ""]
    short = []
    if r["distdgl_vs_lsm_epoch"] is not None and r["distdgl_vs_lsm_epoch"] < 3.75:
        short.append(f"Dist-DGL is short of 3.75x: its largest stage is {dominant_stage(df, 'distdgl')}; "
                     f"LSM-GNN's largest is {dominant_stage(df, 'lsm')}.")
    for s_ in ("mmap", "direct", "isolated"):
        v = r.get(f"{s_}_vs_lsm_epoch")
        if v is not None and v < 1.0:
            short.append(f"`{s_}` is faster than LSM-GNN: its largest stage is {dominant_stage(df, s_)}; "
                         f"LSM-GNN's largest is {dominant_stage(df, 'lsm')}.")
    flagged = head[head.spread_flagged].label.tolist()
    if flagged:
        short.append(f"Runs spread more than {SPREAD_LIMIT:.0%}: {', '.join(flagged)} (their medians are shown; "
                     "every run is in the records).")
    ran = set(df.system)
    if any(v is None for k, v in r.items() if k.endswith("_vs_lsm_epoch") and k.split("_")[0] in ran):
        short.append("A ratio is n/a because a run failed or has no steady epoch (see summary.csv).")
    absent = [s_ for s_ in ("isolated", "mmap", "direct") if s_ not in ran]
    if absent:
        short.append(f"Not in this matrix (`baselines_systems`): {', '.join(absent)}.")
    lines += short + ([""] if short else [])
    real = df[df.accelerator == "real"]
    if emulated and not real.empty:
        lines += ["Real compute (the model trains on the CPU, for its loss and accuracy; its epoch time, CPU "
                  "training beside the data plane on the same 2 cores and not a GPU's, is in the records and "
                  "the table of all runs, and no figure compares it):", "",
                  markdown_table(real[["label", "runs", "loss_last_epoch", "val_acc"]]), ""]
    cols = ["label", "accelerator", "memory_MiB_per_device", "memory_fraction_all_devices", "cache_rows_per_iteration_rows",
            "au", "epoch_steady_s", "runs", "steady_spread", "epoch_cold_s", "preprocessing_s", "first_epoch_s",
            "storage_bytes", "network_bytes", "device_exchange_bytes", "val_acc", "page_cache_cap"]
    lines += ["All runs:", "", markdown_table(df[cols]), "",
              "![epoch time by stage](figures/baselines_epoch.png)", "",
              "![time to first epoch](figures/baselines_first_epoch.png)", "",
              "![storage bytes](figures/baselines_storage.png)", "",
              "Notes. Dist-DGL keeps every feature in its servers' memory, so it reads no storage while it "
              "trains. It pays at the start instead: partitioning (METIS) and cluster startup, which count toward "
              "its first epoch. Its per-iteration feature fetch is a KVStore pull, shown as 'exchange rows'. "
              "Its network bytes are the bytes that crossed the emulated machines' `eth0`. "
              "For the mmap loader, the file's pages are dropped before the run and the page cache is capped at "
              "LSM-GNN's total feature memory over all devices, victim buffers included (`page_cache_cap` says how the cap was set). "
              "The memory columns give each system's feature memory per device and, over all devices, as a share of the "
              "feature bytes: LSM-GNN, isolated caches and mmap at the same total; the ideal and Dist-DGL hold every row. Its storage bytes are "
              "what the kernel read, readahead included.", ""]
    return "\n".join(lines)


def main(inputs, output, params):
    df = rows(inputs, row_bytes(params.data))
    Path(output.table).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(output.table, index=False)
    r = ratios(df, float(params.fraction))
    write_json(output.ratios, r)
    for f in (output.epoch, output.first, output.storage):
        Path(f).parent.mkdir(parents=True, exist_ok=True)
    figures(df, {"epoch": output.epoch, "first": output.first, "storage": output.storage})
    write_text(output.fragment, fragment(df, r, params.dataset, params.warmup, params.timed, params.distdgl,
                                         params.accelerator))


if __name__ == "__main__" and "snakemake" in globals():
    log_to(snakemake)  # noqa: F821
    main(list(snakemake.input.runs), snakemake.output, snakemake.params)  # noqa: F821

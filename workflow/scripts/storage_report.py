"""Report section 20: random row-read throughput of every reader by batch size, with fio's raw
random-read limit as a line, and the direct reader's ratios to fio (from `lsm-gnn bench storage`)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.utils.atomic import write_text  # noqa: E402

from figtools import save_figure  # noqa: E402
from wfcommon import log_to  # noqa: E402

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
obj = json.loads(Path(sm.input[0]).read_text())
df = pd.DataFrame([{k: v for k, v in r.items() if k not in ("per_round", "spread", "path_info")}
                   for r in obj["results"]])
row_kib = obj["row_bytes"] / 1024

runs = obj.get("repeats", 1)
spread_limit = obj.get("spread_limit", 0.05)


def per_round(r, key):
    """A point's value in every round (older outputs: the one run)."""
    return (r.get("per_round") or {}).get(key) or [r[key]]


fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for ax, pattern in zip(axes, ("random", "sequential")):
    y = "block_iops" if pattern == "random" else "rows_per_s"
    long = pd.DataFrame([{"reader": r["reader"], "batch_size": r["batch_size"], y: v}
                         for r in obj["results"] if r["pattern"] == pattern for v in per_round(r, y)])
    if long.empty:
        ax.set_visible(False)
        continue
    # bars: the median over the rounds; error bars: min to max (the 0-100 percentile interval)
    sns.barplot(data=long, x="batch_size", y=y, hue="reader", estimator="median", errorbar=("pi", 100),
                err_kws={"color": "black", "linewidth": 1.2}, capsize=0.15, ax=ax)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (rows per read call)")
    ax.set_ylabel("achieved IOPS (4 KiB blocks read / s, log)" if pattern == "random" else "rows read per second (log)")
    ax.set_title(f"Measured on this machine: {pattern} batches ({row_kib:g} KiB rows)\n"
                 f"median of {runs} runs, bars min-max" if runs > 1 else
                 f"Measured on this machine: {pattern} batches ({row_kib:g} KiB rows, one run each)", fontsize=9)
    fio = obj["fio"]["random" if pattern == "random" else "sequential"]
    if fio["available"]:
        # random: the device's limit in IOPS (fio's 4 KiB random reads); sequential: its bandwidth in rows
        scale = 1.0 if pattern == "random" else 1.0 / obj["row_stride"]
        key = "iops" if pattern == "random" else "bw_bytes_per_s"
        label = (f"device limit: fio random 4 KiB QD{fio['iodepth']} ({fio['iops']:,.0f} IOPS)" if pattern == "random"
                 else f"fio sequential 1 MiB QD{fio['iodepth']} ({fio['bw_bytes_per_s'] / 1e9:.2f} GB/s)")
        ax.axhline(fio[key] * scale, color="black", linestyle="--", label=label)
        vals = (fio.get("per_round") or {}).get(key) or []
        if len(vals) > 1:  # fio's own min-max over the rounds
            ax.axhspan(min(vals) * scale, max(vals) * scale, color="grey", alpha=0.25, zorder=0, label="fio min-max")
    # below the axes: inside, the legend sat on the bars (issue 45)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
fig.tight_layout()
save_figure(fig, sm.output.figure)


def ratio_text(key):
    """A rate ratio over the rounds (each round's direct points against the same round's fio): the
    report's rule, a ratio is measured when it comes from repeated runs whose spread is within
    SPREAD_LIMIT (5 %); one run, or a wider spread, is not a measurement."""
    v = obj[key]
    if v is None:
        return "not measured"
    target = obj["targets"][key]
    side = "at or above" if v >= target else "below"
    rr = (obj.get("ratio_rounds") or {}).get(key) or {}
    n = rr.get("runs") or 0
    if n < 2:
        return (f"not measured here ({v:.2f} from one {obj['seconds_per_point']:g} s point against one fio run, no "
                f"repeats; {side} the {target:.0%} target)")
    span = f"{v:.2f} [{rr['min']:.2f}, {rr['max']:.2f}], median [min, max] of {n} runs"
    if rr["spread"] is not None and rr["spread"] <= spread_limit:
        return f"measured: {span} ({side} the {target:.0%} target; spread {rr['spread']:.1%})"
    sp = "n/a" if rr["spread"] is None else f"{rr['spread']:.1%}"
    return (f"not measured here ({span}: spread {sp} over {n} runs, above the {spread_limit:.0%} limit; "
            f"{side} the {target:.0%} target)")


fr, fs = obj["fio"]["random"], obj["fio"]["sequential"]
lines = ["## Storage: feature-row reads against the raw device limit (measured on this machine)\n",
         f"`lsm-gnn bench storage` over `{obj['file']}` ({obj['num_rows']:,} rows of {obj['row_bytes']} B, "
         f"{obj['file_bytes'] / 1e9:.2f} GB), {obj['seconds_per_point']:g} s per point, "
         + (f"{runs} rounds (a new seed each, the order rotated; figures and table: medians, error bars min-max; "
            "fio's QD1 jobs, the mmap fault and the checksum cost once)" if runs > 1 else "one run")
         + "; every storage reader starts each point with the file dropped from the page cache (the VM host "
         "may still cache).\n",
         "![storage throughput](figures/storage_throughput.png)\n"]


def fio_spread(job, key):
    sp = (job.get("spread") or {}).get(key) or {}
    return f" (spread {sp['spread']:.1%} over {sp['runs']} runs)" if (sp.get("runs") or 0) > 1 else ""


if fr["available"]:
    lines.append(f"- Raw device limit (fio, {fr['engine']}, same file, same run): random 4 KiB O_DIRECT at QD"
                 f"{fr['iodepth']}: **{fr['iops']:,.0f} IOPS**{fio_spread(fr, 'iops')}; sequential 1 MiB at "
                 f"QD{fs.get('iodepth')}: "
                 + (f"**{fs['bw_bytes_per_s'] / 1e9:.2f} GB/s**{fio_spread(fs, 'bw_bytes_per_s')}."
                    if fs["available"] else "not measured."))
else:
    lines.append(f"- Raw device limit: **not measured** ({fr['reason']}).")
lines.append(f"- Direct reader, random batches of 4096 rows or more, 4 KiB blocks/s over fio IOPS "
             f"(`random_iops_vs_fio`): {ratio_text('random_iops_vs_fio')}.")
lines.append(f"- Direct reader, sequential batches, bandwidth over fio (`seq_bw_vs_fio`): "
             f"{ratio_text('seq_bw_vs_fio')}.\n")
table = df[["reader", "backend", "pattern", "batch_size", "rows_per_s", "storage_gb_per_s", "iops",
            "read_amplification"]].copy()
lines.append("| reader | backend | pattern | batch | rows/s | storage GB/s | IOPS | read ampl. |")
lines.append("|---|---|---|---|---|---|---|---|")
for r in table.itertuples(index=False):
    lines.append(f"| {r.reader} | {r.backend} | {r.pattern} | {r.batch_size:,} | {r.rows_per_s:,.0f} | "
                 f"{r.storage_gb_per_s:.3f} | {r.iops:,.0f} | {r.read_amplification:.2f} |")
lines.append("\nmmap and buffered reads warm the page cache as a point runs, so their rates rise above the "
             "device's; direct reads never do (the page cache stays empty). memory is the in-RAM ideal.")
write_text(sm.output.fragment, "\n".join(lines) + "\n")

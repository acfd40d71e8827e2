"""Report section 20: random row-read throughput of every reader by batch size, with fio's raw
random-read limit as a line, and the direct reader's ratios to fio (from `lsm-gnn bench storage`)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.utils.atomic import atomic_path, write_text  # noqa: E402

from wfcommon import log_to  # noqa: E402

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
obj = json.loads(Path(sm.input[0]).read_text())
df = pd.DataFrame(obj["results"])
row_kib = obj["row_bytes"] / 1024

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for ax, pattern in zip(axes, ("random", "sequential")):
    sub = df[df["pattern"] == pattern]
    if sub.empty:
        ax.set_visible(False)
        continue
    y = "block_iops" if pattern == "random" else "rows_per_s"
    sns.barplot(data=sub, x="batch_size", y=y, hue="reader", ax=ax)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (rows per read call)")
    ax.set_ylabel("achieved IOPS (4 KiB blocks read / s, log)" if pattern == "random" else "rows read per second (log)")
    ax.set_title(f"Measured on this machine: {pattern} batches ({row_kib:g} KiB rows, one point each)")
    fio = obj["fio"]["random" if pattern == "random" else "sequential"]
    if fio["available"]:
        # random: the device's limit in IOPS (fio's 4 KiB random reads); sequential: its bandwidth in rows
        limit = fio["iops"] if pattern == "random" else fio["bw_bytes_per_s"] / obj["row_stride"]
        label = (f"device limit: fio random 4 KiB QD{fio['iodepth']} ({fio['iops']:,.0f} IOPS)" if pattern == "random"
                 else f"fio sequential 1 MiB QD{fio['iodepth']} ({fio['bw_bytes_per_s'] / 1e9:.2f} GB/s)")
        ax.axhline(limit, color="black", linestyle="--", label=label)
    ax.legend(fontsize=7)
fig.tight_layout()
with atomic_path(sm.output.figure, suffix=".png") as tmp:
    fig.savefig(tmp, dpi=120, format="png")


def ratio_text(key):
    """A rate ratio of one point against one fio run: no repeats, no spread, so not a measurement
    (the report's rule: a time ratio comes from repeated runs whose spread is under 5 %)."""
    v = obj[key]
    if v is None:
        return "not measured"
    return (f"not measured here ({v:.2f} from one {obj['seconds_per_point']:g} s point against one fio run, no "
            f"repeats; {'at or above' if v >= obj['targets'][key] else 'below'} the {obj['targets'][key]:.0%} target)")


fr, fs = obj["fio"]["random"], obj["fio"]["sequential"]
lines = ["## Storage: feature-row reads against the raw device limit (measured on this machine)\n",
         f"`lsm-gnn bench storage` over `{obj['file']}` ({obj['num_rows']:,} rows of {obj['row_bytes']} B, "
         f"{obj['file_bytes'] / 1e9:.2f} GB), {obj['seconds_per_point']:g} s per point; every storage reader "
         "starts each point with the file dropped from the page cache (the VM host may still cache).\n",
         "![storage throughput](figures/storage_throughput.png)\n"]
if fr["available"]:
    lines.append(f"- Raw device limit (fio, {fr['engine']}, same file, same run): random 4 KiB O_DIRECT at QD"
                 f"{fr['iodepth']}: **{fr['iops']:,.0f} IOPS**; sequential 1 MiB at QD{fs.get('iodepth')}: "
                 + (f"**{fs['bw_bytes_per_s'] / 1e9:.2f} GB/s**." if fs["available"] else "not measured."))
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

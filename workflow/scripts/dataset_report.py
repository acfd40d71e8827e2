"""Workflow step: statistics of the dataset (generated, downloaded and prepared, or given as a path),
two seaborn figures and the report fragment (degree distribution, PageRank distribution against a
recomputation, feature bytes, comparison with IGB's published figures where they apply)."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from lsm_gnn.datasets.format import Dataset  # noqa: E402
from lsm_gnn.datasets.pagerank import NORMALISATIONS, homogeneous_view, normalisation_of, pagerank, percentile_byte  # noqa: E402
from lsm_gnn.datasets.stats import IGB_REFERENCE, degree_distribution, summary  # noqa: E402
from lsm_gnn.utils.atomic import write_json, write_text  # noqa: E402

from figtools import save_figure  # noqa: E402
from wfcommon import log_to  # noqa: E402

sm = snakemake  # noqa: F821  (injected by Snakemake)
log_to(sm)
info = sm.params.dataset
ds = Dataset(sm.params.data)
stats = summary(ds)
# seconds of each step that made the dataset (generate, or download + prepare), from Snakemake's benchmarks
steps = {Path(b).name.split(".")[0]: float(pd.read_csv(b, sep="\t")["s"].iloc[0]) for b in sm.input.benchmarks}
stats.update({f"{k}_seconds": v for k, v in steps.items()})
write_json(sm.output.stats, stats)
# IGB's published figures: for IGB itself and for the synthetic graph of the same size
ref_size = info.get("size") if (info["kind"] == "synthetic" or info.get("real") == "igb") else None
sns.set_theme(style="whitegrid", context="paper")
# featured node types in feature-row order, then those without features (MAG240M's authors and
# institutions): the order the static scores were computed in (lsm_gnn.datasets.pagerank)
types = list(ds.features().type_offsets)
types += [t for t in ds.node_types if t not in types]

# ---- degree distribution (log-log) and its complementary CDF ------------------------------------
def place_legend(ax, n_types: int):
    """One node type needs no legend; several get theirs below the axes, off the points."""
    lg = ax.get_legend()
    if lg is None:
        return
    if n_types <= 1:
        lg.remove()
    else:
        sns.move_legend(ax, "upper center", bbox_to_anchor=(0.5, -0.18), ncol=min(n_types, 4), frameon=False,
                        fontsize=8)


rows = []
for t in types:
    deg = np.asarray(ds.degree(t))
    values, counts = degree_distribution(deg)
    ccdf = 1.0 - np.concatenate(([0], np.cumsum(counts)[:-1])) / deg.size  # P(degree >= value)
    rows.append(pd.DataFrame({"node type": t, "degree": values, "nodes": counts, "P(degree >= d)": ccdf}))
dd = pd.concat(rows)
dd = dd[dd["degree"] > 0]
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
sns.scatterplot(data=dd, x="degree", y="nodes", hue="node type", s=10, linewidth=0, ax=axes[0])
sns.lineplot(data=dd, x="degree", y="P(degree >= d)", hue="node type", ax=axes[1], legend=False)
for ax in axes:
    ax.set(xscale="log", yscale="log")
axes[0].set_title("degree distribution")
axes[1].set_title("complementary CDF")
ref = IGB_REFERENCE.get(ref_size) if ref_size else None
if ref and len(types) == 1:
    axes[1].axvline(ref["max_degree"], color="grey", ls="--", lw=1)
    axes[1].text(ref["max_degree"], 0.5, f" IGB-{ref_size} max", color="grey", fontsize=8)
place_legend(axes[0], len(types))
fig.tight_layout()
save_figure(fig, sm.output.degree, dpi=120)
plt.close(fig)

# ---- PageRank: raw values (recomputed) and the stored percentile byte against degree -----------
counts = {t: ds.num_nodes(t) for t in ds.node_types}
rels = [(ds.edge_type_triple(e)[0], ds.edge_type_triple(e)[2], *ds.csc(e)) for e in ds.edge_types]
indptr, indices, offsets = homogeneous_view(counts, rels, types)
PR_NORM = normalisation_of(ds)
pr = pagerank(indptr, indices, normalisation=PR_NORM)
recomputed = percentile_byte(pr)
frames, pr_diff = [], 0
for t in types:
    off, n = offsets[t], counts[t]
    stored = np.asarray(ds.pagerank_u8(t))
    frames.append(pd.DataFrame({"node type": t, "PageRank x N": pr[off:off + n] * pr.size,
                                "PageRank byte": stored, "degree": np.asarray(ds.degree(t))}))
    if n:
        pr_diff = max(pr_diff, int(np.abs(recomputed[off:off + n].astype(int) - stored.astype(int)).max()))
# the preparation of real heterogeneous graphs computes PageRank in chunks: a byte may round the other way
if pr_diff > (1 if len(types) > 1 else 0):
    raise SystemExit(f"{ds.root}/static: stored PageRank bytes differ from the recomputed PageRank by up to {pr_diff}")
stats["pagerank_max_byte_difference"] = pr_diff
stats["pagerank_normalisation"] = PR_NORM
write_json(sm.output.stats, stats)
pf = pd.concat(frames)
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
sns.histplot(data=pf, x="PageRank x N", hue="node type", log_scale=(True, True), bins=60, element="step", fill=False,
             ax=axes[0])
axes[0].set_title(f"PageRank (damping 0.85, 20 iterations, / {PR_NORM}), 1 = uniform")
per_byte = pf.groupby(["node type", "PageRank byte"], as_index=False)["degree"].median()
sns.lineplot(data=per_byte, x="PageRank byte", y="degree", hue="node type", ax=axes[1], legend=False)
axes[1].set(yscale="log", title="median degree per stored PageRank byte")
place_legend(axes[0], len(types))
fig.tight_layout()
save_figure(fig, sm.output.pagerank, dpi=120)
plt.close(fig)

# ---- fragment ---------------------------------------------------------------------------------
src = stats["source"]
verified = Path(sm.input.verify).read_text().strip().split(": ", 1)[-1]
if info["kind"] == "synthetic":
    origin = (f"Synthetic {'IGBH' if info['hetero'] else 'IGB'}-like graph (`lsm-gnn dataset generate {info['size']} "
              f"--seed {src.get('seed', 0)}{' --hetero' if src.get('heterogeneous') else ''} --dim {info['dim']}`; "
              f"recipe in docs/datasets.md), generated in {steps.get('generate', float('nan')):.1f} s on this machine.")
elif info["kind"] == "real":
    size = f" --size {info['size']}" if info.get("size") else ""
    mirror = f" --base-url {sm.params.base_url}" if sm.params.base_url else ""
    origin = (f"Real dataset `{info['name']}`: `lsm-gnn dataset download {info['real']}{size} --dest {info['raw']}{mirror}` "
              f"({steps.get('download', float('nan')):.1f} s, resumable, checksums or sizes checked), then "
              f"`lsm-gnn dataset prepare {info['real']} {info['raw_root']} {info['data']}` "
              f"({steps.get('prepare', float('nan')):.1f} s; docs/real-datasets.md)."
              + (f" Downloaded from the mirror {sm.params.base_url}." if sm.params.base_url else ""))
else:
    origin = f"Prepared dataset at `{info['data']}` (given as a path; source in its metadata: `{src.get('generator') or src.get('name') or src}`)."
lines = [f"## Dataset: {ds.name} (exact counts of the files)", "", f"{origin} Verification: {verified}", "",
         "| node type | nodes | min deg | max deg | mean deg | median | p99 | degree-1 nodes | isolated |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for t, d in stats["degree"].items():
    lines.append(f"| {t} | {d['nodes']:,} | {d['min']} | {d['max']:,} | {d['mean']:.2f} | {d['median']:.0f} | "
                 f"{d['p99']:.0f} | {d['degree_1']:,} | {d['isolated']:,} |")
lines += ["", "| edge type | edges (directed, stored) |", "|---|---:|"]
lines += [f"| {e} | {m:,} |" for e, m in stats["edge_types"].items()]
if ref and len(types) == 1 and "paper" in stats["degree"]:
    d = stats["degree"]["paper"]
    lines += ["", f"Against IGB-{ref_size} (README table"
              + ("; IGB-tiny's figures include 100,000 self loops and are sparser by design" if ref_size == "tiny" else "")
              + "):", "", "| | nodes | edges | max / min / avg degree |", "|---|---:|---:|---|",
              f"| IGB-{ref_size} | {ref['nodes']:,} | {ref['edges']:,} | {ref['max_degree']:,} / {ref['min_degree']} / {ref['avg_degree']:.2f} |",
              f"| {'synthetic' if info['kind'] == 'synthetic' else info['name']} | {d['nodes']:,} | {stats['num_edges']:,} | {d['max']:,} / {d['min']} / {d['mean']:.2f} |"]
if stats.get("homophily") is not None:
    lines += ["", f"Homophily (fraction of paper-paper edges joining two papers of the same class, of "
              f"{stats['labels']['num_classes']}): {stats['homophily']:.3f}."]
recorded = "recorded in its metadata.json `static`" if ds.static_method() else \
    "not recorded (a dataset written before the metadata recorded it: textbook PageRank)"
lines += ["", f"Static scores: PageRank percentile byte with the **{PR_NORM}** normalisation "
          f"({NORMALISATIONS[PR_NORM]}; {recorded}), damping 0.85, 20 iterations; docs/datasets.md."]
lines += ["", "![degree distribution](figures/dataset_degree.png)", "",
          "![PageRank](figures/dataset_pagerank.png)", "",
          "Feature bytes (`features.bin`, one flat row space; rows padded to the O_DIRECT stride):", "",
          "| node type | rows | dim | dtype | bytes/row | stride | bytes |", "|---|---:|---:|---|---:|---:|---:|"]
for f in stats["features"]:
    lines.append(f"| {f['node_type']} | {f['rows']:,} | {f['dim']} | {f['dtype']} | {f['row_bytes']} | "
                 f"{f['row_stride']} | {f['bytes'] / 2**20:,.1f} MiB |")
b = stats["bytes"]
lines += ["", f"On disk: {b['total'] / 2**20:,.1f} MiB in all (features {b['features'] / 2**20:,.1f} MiB, "
          f"topology {b['topology'] / 2**20:,.1f} MiB, labels/splits/static scores {b['other'] / 2**20:,.1f} MiB).", ""]
write_text(sm.output.fragment, "\n".join(lines))

"""Statistics of a dataset: degree and PageRank-byte distributions, homophily, bytes on disk.

Used by `lsm-gnn dataset info` and the workflow's dataset report. `summary(ds)` returns one
JSON-able dict; the distribution helpers return arrays for plotting.
"""

from __future__ import annotations

import numpy as np

from lsm_gnn.datasets.format import Dataset

# IGB homogeneous, README table of github.com/IllinoisGraphBenchmark/IGB-Datasets. tiny's figures
# include the 100,000 self loops DGL adds; the edge counts are stored directed edges (the files are
# symmetric).
IGB_REFERENCE = {
    "tiny": {"nodes": 100_000, "edges": 547_416, "max_degree": 234, "min_degree": 1, "avg_degree": 5.47},
    "small": {"nodes": 1_000_000, "edges": 12_070_502, "max_degree": 4_292, "min_degree": 1, "avg_degree": 12.07},
    "medium": {"nodes": 10_000_000, "edges": 120_077_694, "max_degree": 22_315, "min_degree": 1, "avg_degree": 12.00},
    "large": {"nodes": 100_000_000, "edges": 1_223_571_364, "max_degree": 73_248, "min_degree": 1, "avg_degree": 12.20},
}


def degree_summary(degree: np.ndarray) -> dict:
    d = np.asarray(degree)
    if d.size == 0:
        return {"nodes": 0}
    q = np.percentile(d, [50, 90, 99, 99.9])
    return {"nodes": int(d.size), "edges": int(d.sum()), "min": int(d.min()), "max": int(d.max()),
            "mean": float(d.mean()), "median": float(q[0]), "p90": float(q[1]), "p99": float(q[2]),
            "p99_9": float(q[3]), "isolated": int((d == 0).sum()), "degree_1": int((d == 1).sum())}


def degree_distribution(degree: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(degree values, number of nodes with that degree), for a log-log plot."""
    values, counts = np.unique(np.asarray(degree), return_counts=True)
    return values, counts


def pagerank_histogram(pr_u8: np.ndarray) -> np.ndarray:
    """Nodes per PageRank byte value (256 bins)."""
    return np.bincount(np.asarray(pr_u8), minlength=256)


def homophily(ds: Dataset) -> float | None:
    """Fraction of labelled-type self-relation edges joining two nodes of the same class."""
    t = ds.label_type
    labels = np.asarray(ds.labels())
    same = total = 0
    for et in ds.edge_types:
        s, _, d = ds.edge_type_triple(et)
        if s != t or d != t:
            continue
        indptr, indices = ds.csc(et)
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        ls, ld = labels[np.asarray(indices)], labels[dst]
        ok = (ls >= 0) & (ld >= 0)
        same += int((ls[ok] == ld[ok]).sum())
        total += int(ok.sum())
    return same / total if total else None


def feature_bytes(ds: Dataset) -> list[dict]:
    """One row per node type: rows, dim, dtype, bytes per row (payload and stride), total bytes."""
    lay = ds.features()
    out = []
    for t in lay.type_offsets:
        n = ds.num_nodes(t)
        out.append({"node_type": t, "rows": n, "dim": lay.dim, "dtype": lay.dtype.name,
                    "row_bytes": lay.row_bytes, "row_stride": lay.row_stride, "bytes": n * lay.row_stride})
    return out


def file_bytes(ds: Dataset) -> dict:
    """Bytes on disk by part: features, topology, everything else."""
    parts = {"features": 0, "topology": 0, "other": 0}
    for rel, info in ds.meta["files"].items():
        key = "features" if rel == ds.meta["features"]["file"] else rel.split("/")[0]
        parts[key if key in parts else "other"] += int(info["bytes"])
    parts["total"] = sum(parts.values())
    return parts


def summary(ds: Dataset, with_homophily: bool = True) -> dict:
    """Counts, per-type degree and PageRank statistics, homophily and bytes, as one dict."""
    out = {"name": ds.name, "source": ds.meta.get("source", {}),
           "node_types": {t: ds.num_nodes(t) for t in ds.node_types},
           "edge_types": {e: ds.num_edges(e) for e in ds.edge_types},
           "num_nodes": ds.num_nodes(), "num_edges": ds.num_edges(),
           "labels": dict(ds.meta["labels"]), "splits": dict(ds.meta["splits"]),
           "degree": {}, "pagerank_u8": {}}
    for t in ds.features().type_offsets:
        out["degree"][t] = degree_summary(ds.degree(t))
        pr = np.asarray(ds.pagerank_u8(t))
        out["pagerank_u8"][t] = {"mean": float(pr.mean()) if pr.size else None,
                                 "histogram": pagerank_histogram(pr).tolist()}
    if with_homophily:
        out["homophily"] = homophily(ds)
    out["features"] = feature_bytes(ds)
    out["bytes"] = file_bytes(ds)
    return out

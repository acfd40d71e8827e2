"""IGB (homogeneous) and IGBH (heterogeneous) in the IGB on-disk layout -> RawGraph.

Layout (github.com/IllinoisGraphBenchmark/IGB-Datasets, igb/download.py and igb/dataloader.py):
`<root>/<size>/processed/<type>/node_feat.npy` (N, 1024) float32, `paper/node_label_19.npy` float32
class ids, `<src>__<rel>__<dst>/edge_index.npy` (E, 2) int64. For large/full the paper/author
features and the label files are raw headerless float32 despite the suffix: `npy.open_array`
handles both. Node counts come from the feature files, edge counts from the edge files.

Semantics kept from the IGB loaders: labels are the 19-class set; on IGB-full only the first
227,130,858 papers are labelled (rows beyond the label file or that prefix are -1) and the splits
are the first 60 % / next 20 % / rest of that prefix in id order; on the other sizes a seeded
(seed 0) random 60/20/20 permutation of all labelled papers. Edges are stored as in the files
(IGB's are already symmetric); no self loops are added. IGB (homogeneous) reads only paper and
cites, so an IGBH directory can serve as IGB260M.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lsm_gnn.datasets.real import catalog
from lsm_gnn.datasets.real.build import FeaturePart, RawGraph, Relation
from lsm_gnn.datasets.real.npy import EdgeArray, check_rows, inspect, open_array
from lsm_gnn.utils.errors import DataError

LABEL_SET = "19"
SPLIT_SEED = 0
REQUIRED_TYPES = ("paper", "author", "fos", "institute")
MARKER = ".lsm-gnn-download.json"


def locate(raw_dir: Path) -> Path:
    """The `processed` directory under raw_dir (raw_dir itself, raw_dir/processed, raw_dir/*/processed)."""
    raw_dir = Path(raw_dir)
    cands = [raw_dir, raw_dir / "processed", *sorted(raw_dir.glob("*/processed"))]
    for c in cands:
        if (c / "paper" / "node_feat.npy").is_file():
            return c
    raise DataError(raw_dir, "no IGB data found: expected processed/paper/node_feat.npy "
                    "(IGB layout <root>/<size>/processed/...)")


def guess_size(processed: Path, size: str | None) -> str | None:
    if size is not None:
        return catalog.check_name_size("igb", size)
    root = processed.parent
    marker = root / MARKER
    if marker.is_file():
        try:
            return json.loads(marker.read_text()).get("size")
        except json.JSONDecodeError:
            pass
    return root.name if root.name in catalog.IGB_SIZES else None


def plan(name: str, raw_dir, size: str | None):
    """(input files, read function) for build.prepare_graph."""
    proc = locate(raw_dir)
    size = guess_size(proc, size)
    if name == "igb":
        types = ["paper"]
    else:
        types = [t for t in catalog.IGBH_TYPE_ORDER if (proc / t / "node_feat.npy").is_file()]
        for t in REQUIRED_TYPES:
            if t not in types:
                raise DataError(proc / t / "node_feat.npy", f"missing; IGBH needs node types {', '.join(REQUIRED_TYPES)}")
    rels = []
    for s, r, d in (catalog.IGBH_RELATIONS[:1] if name == "igb" else catalog.IGBH_RELATIONS):
        p = proc / f"{s}__{r}__{d}" / "edge_index.npy"
        required = name == "igb" or (s, r, d) in catalog.IGBH_RELATIONS[:4]
        if not p.is_file():
            if required:
                raise DataError(p, "missing edge file")
            continue
        for t in (s, d):
            if t not in types:
                raise DataError(p, f"relation needs node type {t!r}, whose node_feat.npy is missing")
        rels.append((s, r, d, p))
    feat_paths = {t: proc / t / "node_feat.npy" for t in types}
    label_path = proc / "paper" / f"node_label_{LABEL_SET}.npy"
    tail_path = proc / "paper" / "node_feat_5M_tail.npy"
    inputs = [*feat_paths.values(), label_path, *(p for *_, p in rels)]
    if size == "full" and tail_path.is_file():
        inputs.append(tail_path)

    def read(state) -> RawGraph:
        feats = []
        for t in types:
            arr = open_array(feat_paths[t], dtype=np.float32, row_shape=(catalog.IGB_DIM,))
            check_rows(arr, feat_paths[t], kinds="f")
            if arr.ndim != 2:
                raise DataError(feat_paths[t], "features must be (N, dim)", found=f"shape {arr.shape}")
            feats.append(FeaturePart(t, arr, feat_paths[t]))
        counts = {p.ntype: int(p.array.shape[0]) for p in feats}
        n = counts["paper"]
        if size == "full" and tail_path.is_file():
            tail = open_array(tail_path, dtype=np.float32, row_shape=(feats[0].array.shape[1],))
            check_rows(tail, tail_path, dim=feats[0].array.shape[1], max_rows=n, kinds="f")
            feats[0].patches.append((n - tail.shape[0], tail))
        labels = open_array(label_path, dtype=np.float32, row_shape=())
        check_rows(labels, label_path, max_rows=n)
        n_labeled = catalog.IGB_FULL_LABELED[LABEL_SET] if size == "full" else None
        relations = [Relation(s, r, d, EdgeArray(p, "E2")) for s, r, d, p in rels]

        def splits(lab: np.ndarray) -> dict:
            if size == "full":
                m = min(n_labeled, labels.shape[0], n)
                ids = np.arange(m, dtype=np.int64)
                ids = ids[np.asarray(lab[:m]) >= 0]
            else:
                labeled = np.flatnonzero(np.asarray(lab) >= 0)
                ids = labeled[np.random.default_rng(SPLIT_SEED).permutation(labeled.size)]
            a, b = int(0.6 * ids.size), int(0.8 * ids.size)
            return {"train": np.sort(ids[:a]), "val": np.sort(ids[a:b]), "test": np.sort(ids[b:])}

        source = {"dataset": name, "size": size, "raw_dir": str(Path(raw_dir).resolve()),
                  "label_set": LABEL_SET, "edge_layout": "(E, 2)",
                  "headerless_files": [str(p.relative_to(proc)) for p in [*feat_paths.values(), label_path]
                                       if inspect(p, dtype=np.float32, row_shape=()).headerless],
                  "splits": "first 60/20/20 % of the labelled prefix" if size == "full"
                  else f"random 60/20/20 % permutation, seed {SPLIT_SEED}"}
        return RawGraph(name=f"{name}-{size or 'custom'}", node_counts=counts, features=feats,
                        relations=relations, label_type="paper", labels=labels, labels_path=label_path,
                        num_classes=catalog.IGB_NUM_CLASSES[LABEL_SET], n_labeled=n_labeled,
                        splits=splits, source=source)

    return inputs, read, {"size": size}

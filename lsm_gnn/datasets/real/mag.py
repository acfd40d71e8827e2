"""MAG240M (OGB-LSC) in the layout its zip unpacks to -> RawGraph, without the `ogb` package.

Layout (OGB-LSC's MAG240M page, ogb.stanford.edu/docs/lsc/mag240m, and `ogb.lsc.MAG240MDataset`
in github.com/snap-stanford/ogb): `<root>/meta.pt` (dict: paper, author, institution,
num_classes), `split_dict.pt` (dict of id arrays: train, valid, test-dev, test-challenge; older
releases: test), `processed/paper/node_feat.npy` (N, 768) float16, `processed/paper/node_label.npy`
(N,) float (NaN = not arXiv, -1 = hidden test label), `processed/<src>___<rel>___<dst>/edge_index.npy`
(2, E) int64.

The two `.pt` files are torch pickles. They are read with `torch.load(weights_only=True)` and an
allow-list of exactly the numpy globals needed to rebuild arrays (no arbitrary code runs), under
both the numpy 1 (`numpy.core`) and numpy 2 (`numpy._core`) module names.

Features: only papers have them; they stay float16 (768 x 2 = 1536 bytes, a multiple of 512) and
are the only rows of features.bin (`type_offsets = {"paper": 0}`); authors and institutions are
featureless node types of the graph (the OGB baseline's averaged author features are not built).
Labels: NaN and -1 become -1. Splits: train, val = valid, test = test-dev + test-challenge,
whose labels are hidden in the public release (-1), so test accuracy cannot be computed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lsm_gnn.datasets.real.build import FeaturePart, RawGraph, Relation, check_split
from lsm_gnn.datasets.real.npy import EdgeArray, check_rows, open_array
from lsm_gnn.utils.errors import DataError

ROOT_NAME = "mag240m_kddcup2021"
RELATIONS = (("author", "writes", "paper"), ("author", "affiliated_with", "institution"),
             ("paper", "cites", "paper"))
NODE_TYPES = ("paper", "author", "institution")


def locate(raw_dir: Path) -> Path:
    raw_dir = Path(raw_dir)
    for c in (raw_dir, raw_dir / ROOT_NAME):
        if (c / "meta.pt").is_file():
            return c
    raise DataError(raw_dir / "meta.pt", f"missing; not a MAG240M directory (looked in {raw_dir} and {ROOT_NAME}/)")


def _numpy_allowlist() -> list:
    import numpy._core.multiarray as ma

    allow = [np.ndarray, np.dtype]
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allow += [(ma._reconstruct, f"{mod}._reconstruct"), (ma.scalar, f"{mod}.scalar")]
    allow += [getattr(np.dtypes, n) for n in dir(np.dtypes) if n.endswith("DType")]
    return allow


def load_torch_dict(path: Path) -> dict:
    """A small torch-pickled dict (meta.pt, split_dict.pt), loaded without running pickled code."""
    import pickle

    import torch

    if not path.is_file():
        raise DataError(path, "missing file")
    try:
        with torch.serialization.safe_globals(_numpy_allowlist()):
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as e:
        raise DataError(path, f"cannot read this torch file safely: {str(e).splitlines()[0]}") from None
    if not isinstance(obj, dict):
        raise DataError(path, "expected a dict", found=type(obj).__name__)
    return obj


def _as_ids(v) -> np.ndarray:
    return v.numpy() if hasattr(v, "numpy") else np.asarray(v)


def plan(raw_dir):
    root = locate(raw_dir)
    proc = root / "processed"
    feat_path, label_path = proc / "paper" / "node_feat.npy", proc / "paper" / "node_label.npy"
    rel_paths = {(s, r, d): proc / f"{s}___{r}___{d}" / "edge_index.npy" for s, r, d in RELATIONS}
    inputs = [root / "meta.pt", root / "split_dict.pt", feat_path, label_path, *rel_paths.values()]

    def read(state) -> RawGraph:
        meta = load_torch_dict(root / "meta.pt")
        for k in (*NODE_TYPES, "num_classes"):
            if k not in meta:
                raise DataError(root / "meta.pt", f"missing key {k!r}", found=sorted(meta))
        counts = {t: int(meta[t]) for t in NODE_TYPES}
        num_classes = int(meta["num_classes"])
        feat = open_array(feat_path)
        check_rows(feat, feat_path, rows=counts["paper"], kinds="f")
        if feat.ndim != 2:
            raise DataError(feat_path, "features must be (N, dim)", found=feat.shape)
        labels = open_array(label_path)
        check_rows(labels, label_path, rows=counts["paper"])
        relations = [Relation(s, r, d, EdgeArray(p, "2E")) for (s, r, d), p in rel_paths.items()]
        split_path = root / "split_dict.pt"

        def splits(lab: np.ndarray) -> dict:
            sd = load_torch_dict(split_path)
            for k in ("train", "valid"):
                if k not in sd:
                    raise DataError(split_path, f"missing split {k!r}", found=sorted(sd))
            test_keys = [k for k in ("test-dev", "test-challenge", "test") if k in sd]
            n = counts["paper"]
            test = np.concatenate([_as_ids(sd[k]).ravel() for k in test_keys]) if test_keys else np.zeros(0, np.int64)
            return {"train": check_split(_as_ids(sd["train"]), split_path, n, lab),
                    "val": check_split(_as_ids(sd["valid"]), split_path, n, lab),
                    "test": np.sort(check_split(test, split_path, n))}

        source = {"dataset": "mag240m", "raw_dir": str(root.resolve()), "edge_layout": "(2, E)",
                  "features": "paper only, float16", "splits": "train, valid, test-dev + test-challenge",
                  "test_labels_hidden": True, "unlabelled": "NaN and -1 -> -1"}
        return RawGraph(name="mag240m", node_counts=counts, features=[FeaturePart("paper", feat, feat_path)],
                        relations=relations, label_type="paper", labels=labels, labels_path=label_path,
                        num_classes=num_classes, n_labeled=None, splits=splits, source=source)

    return inputs, read

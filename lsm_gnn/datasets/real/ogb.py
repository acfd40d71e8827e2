"""ogbn-papers100M in the layout the OGB zip unpacks to -> RawGraph, without the `ogb` package.

Layout (ogbn-papers100M at ogb.stanford.edu/docs/nodeprop, read by the `ogb` package's
`NodePropPredDataset`, github.com/snap-stanford/ogb): `<root>/raw/data.npz` (edge_index (2, E)
int64, node_feat (N, 128) float32, node_year, num_nodes_list [N], num_edges_list [E]),
`raw/node-label.npz` (node_label (N, 1) float, NaN = unlabelled),
`split/time/{train,valid,test}.csv.gz` (one node id per line, no header), `RELEASE_v1.txt`.
`<root>` is `papers100M-bin` (the zip's folder) or `ogbn_papers100M` (the name the ogb package
renames it to).

`.npz` members cannot be memory-mapped (and OGB writes them compressed), so the first step
streams each needed member, one at a time, into a plain `.npy` in the preparation state
directory (resumable per member; zip CRCs are checked on the way). The citation graph is stored
as given (directed, no reverse, no self loops); NaN labels become -1.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from lsm_gnn.datasets.real import catalog
from lsm_gnn.datasets.real.archives import COPY_CHUNK
from lsm_gnn.datasets.real.build import FeaturePart, RawGraph, Relation, bar, check_split
from lsm_gnn.datasets.real.npy import EdgeArray, check_rows, open_array
from lsm_gnn.utils.errors import DataError

ROOT_NAMES = ("ogbn_papers100M", "papers100M-bin")
DATA_MEMBERS = ("edge_index", "node_feat", "num_nodes_list", "num_edges_list")
LABEL_MEMBERS = ("node_label",)
SPLITS = {"train": "train", "val": "valid", "test": "test"}


def locate(raw_dir: Path) -> Path:
    raw_dir = Path(raw_dir)
    for c in (raw_dir, *(raw_dir / n for n in ROOT_NAMES)):
        if (c / "raw" / "data.npz").is_file():
            return c
    raise DataError(raw_dir / "raw" / "data.npz", "missing; not an ogbn-papers100M directory "
                    f"(looked in {raw_dir} and its subdirectories {', '.join(ROOT_NAMES)})")


def unpack_npz(npz: Path, keys, out_dir: Path, progress: bool = True) -> dict[str, Path]:
    """Stream members `<key>.npy` of `npz` into `out_dir/<key>.npy`; finished members are kept."""
    out = {}
    try:
        with zipfile.ZipFile(npz) as zf:
            names = {i.filename: i for i in zf.infolist()}
            for key in keys:
                info = names.get(f"{key}.npy")
                if info is None:
                    raise DataError(npz, f"member {key}.npy missing",
                                    expected=", ".join(f"{k}.npy" for k in keys), found=", ".join(sorted(names)))
                target = out_dir / f"{key}.npy"
                out[key] = target
                if target.is_file() and target.stat().st_size == info.file_size:
                    continue
                tmp = target.with_name(target.name + ".partial")
                with zf.open(info) as src, open(tmp, "wb") as dst, \
                        bar(info.file_size, f"unpack {key}", progress, unit="B") as b:
                    while chunk := src.read(COPY_CHUNK):
                        dst.write(chunk)
                        b.update(len(chunk))
                tmp.replace(target)
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise DataError(npz, f"corrupt or truncated .npz: {e}") from None
    return out


def read_split_csv(path: Path) -> np.ndarray:
    if not path.is_file():
        raise DataError(path, "missing split file")
    try:
        df = pd.read_csv(path, header=None, compression="gzip")
    except pd.errors.EmptyDataError:
        return np.zeros(0, dtype=np.int64)
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise DataError(path, f"not a gzip CSV of node ids: {e}") from None
    if df.shape[1] != 1 or df[0].dtype.kind not in "iu":
        raise DataError(path, "expected one integer node id per line", found=f"{df.shape[1]} columns of {df.dtypes.tolist()}")
    return df[0].to_numpy(np.int64)


def plan(raw_dir, progress: bool = True):
    root = locate(raw_dir)
    data_npz, label_npz = root / "raw" / "data.npz", root / "raw" / "node-label.npz"
    split_paths = {k: root / "split" / "time" / f"{v}.csv.gz" for k, v in SPLITS.items()}
    inputs = [data_npz, label_npz, *split_paths.values()]

    def read(state) -> RawGraph:
        d = state.sub("unpacked")
        if not state.done("unpack"):
            unpack_npz(data_npz, DATA_MEMBERS, d, progress)
            unpack_npz(label_npz, LABEL_MEMBERS, d, progress)
            state.mark("unpack")
        where = f"{data_npz} member"
        n = int(np.load(d / "num_nodes_list.npy").ravel()[0])
        feat = open_array(d / "node_feat.npy")
        check_rows(feat, f"{where} node_feat.npy", rows=n, kinds="f")
        if feat.ndim != 2:
            raise DataError(f"{where} node_feat.npy", "features must be (N, dim)", found=feat.shape)
        edges = EdgeArray(d / "edge_index.npy", "2E")
        e_list = int(np.load(d / "num_edges_list.npy").ravel()[0])
        if e_list != edges.num_edges:
            raise DataError(f"{where} edge_index.npy", "edge count differs from num_edges_list",
                            expected=e_list, found=edges.num_edges)
        labels = open_array(d / "node_label.npy")
        check_rows(labels, f"{label_npz} member node_label.npy", rows=n)

        def splits(lab: np.ndarray) -> dict:
            return {k: check_split(read_split_csv(p), p, n, lab) for k, p in split_paths.items()}

        release = root / "RELEASE_v1.txt"
        source = {"dataset": "ogbn-papers100M", "raw_dir": str(root.resolve()), "edge_layout": "(2, E)",
                  "release": release.read_text().strip()[:200] if release.is_file() else None,
                  "splits": "split/time/{train,valid,test}.csv.gz", "unlabelled": "NaN -> -1"}
        return RawGraph(name="ogbn-papers100M", node_counts={"paper": n},
                        features=[FeaturePart("paper", feat, data_npz)],
                        relations=[Relation("paper", "cites", "paper", edges)], label_type="paper",
                        labels=labels, labels_path=label_npz, num_classes=catalog.PAPERS100M_NUM_CLASSES,
                        n_labeled=None, splits=splits, source=source)

    return inputs, read

"""`lsm-gnn dataset import`: a user's own graph (edge list, optional features, labels and splits)
-> a dataset directory in the lsm-gnn format (docs/datasets.md, "Your own graph").

Inputs:

* edges: `.npy` of shape (E, 2) or (2, E) (a (2, 2) array is read as two edges, one per row);
  `.csv` / `.tsv` with two integer columns (a first line that is not two numbers is a header and
  skipped); or a DGL graph file (`dgl.save_graphs`: `.bin` / `.dgl`, one homogeneous graph).
  Ids must be integers (floats are refused, never truncated) in [0, num_nodes).
* features: `.npy` (N, dim), or raw rows (any other name, or a `.npy` without a header) given
  `feature_dim` and `feature_dtype` (the file size must be a whole number of rows). Without
  features, seeded random rows of `feature_dim` (default 128) stand in, so the cache has rows to
  move; the metadata's `source.features` says so.
* labels: `.npy` of integer classes, -1 = unlabelled. Without labels, seeded random classes
  stand in (marked in `source.labels`; accuracies on them mean nothing).
* splits: three `.npy` id files (or boolean masks of length N), or seeded random fractions
  (default 0.6 / 0.2 / 0.2) of the labelled nodes.
* num_nodes: given, else the DGL graph's node count, else the feature rows, else the label
  count, else the largest edge id + 1.

The graph is held in memory (about 60 bytes per stored edge at the peak: ids, the two sorted
orientations); the writer (`DatasetWriter`, shared with the synthetic and real datasets) stores
CSC and CSR, PageRank bytes and degrees, and renames the directory into place when complete.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from lsm_gnn.datasets import validate
from lsm_gnn.datasets.format import check_dataset_output, Dataset, DatasetWriter, row_stride_for
from lsm_gnn.datasets.synthetic import FEATURE_DTYPES, write_features
from lsm_gnn.utils.bounds import check_nodes, npy_header
from lsm_gnn.utils.errors import DataError, InputError


NODE_TYPE = "node"
RELATION = "edge"
DEFAULT_FEATURE_DIM = 128
PLACEHOLDER_CLASSES = 2
DEFAULT_SPLIT_FRACTIONS = (0.6, 0.2, 0.2)
EDGE_FORMATS = {".npy": "npy", ".csv": "csv", ".tsv": "tsv", ".bin": "dgl", ".dgl": "dgl"}
FEATURE_CHUNK_BYTES = 32 << 20
NPY_MAGIC = b"\x93NUMPY"

# RNG stream ids (default_rng([seed, stream])) of the stand-in labels and the random splits; the
# stand-in features use synthetic.write_features' own streams
_S_LABELS, _S_SPLITS = 101, 102


# --------------------------------------------------------------------------------------------
# edges
def read_edges(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, dict]:
    """(src, dst) int64 and a description {"format", "layout", "num_nodes" (DGL only)} of an edge file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "edge file does not exist")
    kind = EDGE_FORMATS.get(path.suffix.lower())
    if kind is None:
        raise DataError(path, "unknown edge file format", expected=", ".join(sorted(EDGE_FORMATS)),
                        found=repr(path.suffix or "no suffix"))
    if kind == "npy":
        return _npy_edges(path)
    if kind == "dgl":
        return _dgl_edges(path)
    return _text_edges(path, "," if kind == "csv" else "\t", kind)


def _npy_edges(path: Path):
    arr = _load_npy(path)
    if arr.ndim != 2 or 2 not in arr.shape:
        raise DataError(path, "field shape: an edge array is (E, 2) or (2, E)", expected="(E, 2) or (2, E)",
                        found=arr.shape)
    if arr.size and arr.dtype.kind not in "iu":
        raise DataError(path, "field dtype: node ids must be integers (float ids are never truncated)",
                        expected="an integer dtype", found=arr.dtype)
    by_rows = arr.shape[1] == 2  # (2, 2): two edges, one per row
    src, dst = (arr[:, 0], arr[:, 1]) if by_rows else (arr[0], arr[1])
    src = validate.integer_ids(np.array(src), path, "source id", what="node ids")
    dst = validate.integer_ids(np.array(dst), path, "destination id", what="node ids")
    return src, dst, {"format": "npy", "layout": "(E, 2)" if by_rows else "(2, E)", "entry": "edge"}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _text_edges(path: Path, sep: str, kind: str):
    import pandas as pd

    with open(path, "r", encoding="utf-8-sig", errors="replace") as fh:
        first = fh.readline().rstrip("\r\n")
    header = bool(first.strip()) and not all(_is_number(x.strip()) for x in first.split(sep))
    skip = 1 if header else 0
    try:
        df = pd.read_csv(path, sep=sep, header=None, skiprows=skip, skip_blank_lines=False, engine="c",
                         encoding="utf-8-sig", low_memory=False)
    except pd.errors.EmptyDataError:
        df = pd.DataFrame(np.zeros((0, 2), dtype=np.int64))
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise DataError(path, f"not a two-column {kind.upper()} edge list ({e})") from None
    if df.shape[1] != 2:
        raise DataError(path, "field columns: an edge list has two columns (source, destination)",
                        expected=2, found=df.shape[1])
    cols = []
    for j, field in enumerate(("source id", "destination id")):
        col = df.iloc[:, j]
        if col.dtype.kind not in "iu":
            values = col.to_numpy()
            num = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
            whole = np.isfinite(num) & (num == np.floor(num))
            if whole.all() and col.dtype.kind not in "fc":  # integers too large for int64
                raise DataError(path, f"column {j + 1}: {field}s exceed the int64 range", expected="int64 ids",
                                found=f"{col.dtype} column")
            bad = int(np.flatnonzero(~whole)[0]) if (~whole).any() else 0
            text = "" if values[bad] is None or (isinstance(values[bad], float) and math.isnan(values[bad])) \
                else str(values[bad])
            raise DataError(path, f"line {bad + 1 + skip}, column {j + 1}: {field} must be an integer "
                            "(float ids are never truncated)", expected="an integer", found=repr(text))
        cols.append(validate.integer_ids(col.to_numpy(), path, field, what="node ids"))
    return cols[0], cols[1], {"format": kind, "header": header, "entry": "line", "first_entry": 1 + skip}


def _dgl_edges(path: Path):
    try:
        import dgl
    except ImportError as e:
        raise InputError(f"{path}: reading a DGL graph file needs dgl (pip install 'lsm-gnn[baselines]'): {e}") from None
    try:
        graphs, _ = dgl.load_graphs(str(path))
    except Exception as e:  # DGL raises its own error types for foreign or corrupt files
        raise DataError(path, f"not a readable DGL graph file ({type(e).__name__}: {e})") from None
    if len(graphs) != 1:
        raise DataError(path, "field graphs: one graph per file", expected=1, found=len(graphs))
    g = graphs[0]
    if len(g.ntypes) != 1 or len(g.canonical_etypes) != 1:
        raise DataError(path, "heterogeneous DGL graphs are not supported", expected="one node and one edge type",
                        found=f"{len(g.ntypes)} node types, {len(g.canonical_etypes)} edge types")
    src, dst = g.edges()
    return (src.numpy().astype(np.int64), dst.numpy().astype(np.int64),
            {"format": "dgl", "num_nodes": int(g.num_nodes()), "entry": "edge"})


# --------------------------------------------------------------------------------------------
# features, labels, splits
def _load_npy(path: Path) -> np.ndarray:
    if not path.is_file():
        raise DataError(path, "file does not exist")
    npy_header(path)  # the stated shape within the file's size and this machine's memory
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise DataError(path, f"not a readable .npy file ({e})") from None


def _has_npy_header(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(len(NPY_MAGIC)) == NPY_MAGIC


def open_features(path: str | os.PathLike, dim: int | None, dtype: str | None) -> tuple[np.ndarray, str]:
    """(rows (N, dim) memmap, how it was read) of a `.npy` or raw feature file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "feature file does not exist")
    if _has_npy_header(path):
        arr = _load_npy(path)
        if arr.ndim != 2:
            raise DataError(path, "field shape: features are one row per node", expected="(N, dim)", found=arr.shape)
        if arr.dtype.name not in FEATURE_DTYPES:
            raise DataError(path, "field dtype: features must be floating point",
                            expected=" or ".join(FEATURE_DTYPES), found=arr.dtype)
        if dim is not None and arr.shape[1] != dim:
            raise DataError(path, "field dim: the rows differ from --feature-dim", expected=dim, found=arr.shape[1])
        return arr, "npy"
    if dim is None:
        raise DataError(path, "raw feature file (no .npy header): --feature-dim is needed to know its rows",
                        expected="--feature-dim D (and --feature-dtype)", found="no --feature-dim")
    dt = np.dtype(dtype or "float32")
    row = dim * dt.itemsize
    size = path.stat().st_size
    if size % row:
        raise DataError(path, f"size is not a whole number of rows of {dim} x {dt} ({row} bytes per row)",
                        expected=f"a multiple of the row size {row} bytes", found=f"{size} bytes")
    if size == 0:
        return np.zeros((0, dim), dtype=dt), "raw"
    return np.memmap(path, dtype=dt, mode="r", shape=(size // row, dim)), "raw"


def read_labels(path: str | os.PathLike) -> np.ndarray:
    """int64 labels of a `.npy` file: integers, -1 = unlabelled (shape (N,) or (N, 1))."""
    path = Path(path)
    arr = _load_npy(path)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise DataError(path, "field shape: one label per node", expected="(N,) or (N, 1)", found=arr.shape)
    if arr.size and arr.dtype.kind not in "iu":
        raise DataError(path, "field labels: labels must be integer class ids (-1 = unlabelled; float labels are "
                        "never truncated)", expected="an integer dtype", found=arr.dtype)
    arr = np.asarray(arr, dtype=np.int64) if arr.size else np.zeros(0, np.int64)
    if arr.size and arr.min() < -1:
        bad = int(np.flatnonzero(arr < -1)[0])
        raise DataError(path, f"field labels: label of node {bad} out of range", expected="-1 or a class >= 0",
                        found=int(arr[bad]))
    return arr


def read_split(path: str | os.PathLike, num_nodes: int) -> np.ndarray:
    """Node ids of a split file: integer ids, or a boolean mask of one entry per node."""
    path = Path(path)
    arr = _load_npy(path)
    if arr.dtype == np.bool_:
        if arr.shape != (num_nodes,):
            raise DataError(path, "field mask: a boolean split mask has one entry per node",
                            expected=f"shape ({num_nodes},)", found=f"shape {arr.shape}")
        return np.flatnonzero(arr).astype(np.int64)
    return np.asarray(arr)  # ids: checked (integers, range, overlaps, labels) by the writer


def parse_fractions(value) -> tuple[float, float, float]:
    if isinstance(value, str):
        parts = [p for p in value.split(",") if p.strip()]
        try:
            value = [float(p) for p in parts]
        except ValueError:
            raise InputError(f"--split-fractions: expected three numbers like 0.6,0.2,0.2, found {value!r}") from None
    fr = tuple(float(x) for x in value)
    if len(fr) != 3 or any(not 0 <= x <= 1 for x in fr) or sum(fr) > 1 + 1e-9 or fr[0] <= 0:
        raise InputError(f"--split-fractions: expected train,val,test fractions in [0, 1] (train > 0) summing to "
                         f"at most 1, found {value!r}")
    return fr


def random_splits(labels: np.ndarray, fractions, seed: int) -> dict[str, np.ndarray]:
    """A seeded random train/val/test partition of the labelled nodes (each split sorted)."""
    labelled = np.flatnonzero(labels >= 0)
    perm = labelled[np.random.default_rng([seed, _S_SPLITS]).permutation(labelled.size)]
    cuts = [min(labelled.size, int(math.floor(c * labelled.size + 1e-9))) for c in np.cumsum(fractions)]
    a, b, c = cuts
    return {"train": np.sort(perm[:a]), "val": np.sort(perm[a:b]), "test": np.sort(perm[b:c])}


# --------------------------------------------------------------------------------------------
# the importer
def import_graph(out: str | os.PathLike, edges: str | os.PathLike, *, features: str | os.PathLike | None = None,
                 feature_dtype: str | None = None, feature_dim: int | None = None,
                 labels: str | os.PathLike | None = None, num_classes: int | None = None,
                 splits: tuple | list | None = None, split_fractions=None, seed: int = 0,
                 num_nodes: int | None = None, undirected: bool = False, name: str | None = None,
                 overwrite: bool = False, progress: bool = True) -> Dataset:
    """Write the user's graph at `edges` (plus optional files) to `out` and return it opened.

    Every bad input raises DataError naming the file (or InputError naming the argument), the
    field, what was expected and what was found. See the module docstring for the formats.
    """
    out = Path(out)
    out = check_dataset_output(out, overwrite)  # before any work: what --force may replace
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"--seed: expected a non-negative integer, found {seed!r}")
    if feature_dim is not None and (not isinstance(feature_dim, (int, np.integer)) or feature_dim < 1):
        raise InputError(f"--feature-dim: expected an integer >= 1, found {feature_dim!r}")
    if feature_dtype is not None and str(feature_dtype) not in FEATURE_DTYPES:
        raise InputError(f"--feature-dtype: expected one of {', '.join(FEATURE_DTYPES)}, found {feature_dtype!r}")
    if num_nodes is not None and (not isinstance(num_nodes, (int, np.integer)) or num_nodes < 1):
        raise InputError(f"--num-nodes: expected an integer >= 1, found {num_nodes!r}")
    if splits is not None and split_fractions is not None:
        raise InputError("--splits and --split-fractions: give one of them, not both")
    if splits is not None:
        if isinstance(splits, str):
            splits = [s.strip() for s in splits.split(",")]
        if len(splits) != 3 or not all(splits):
            raise InputError(f"--splits: expected three files train,val,test, found {splits!r}")
        splits = [Path(s) for s in splits]
    fractions = parse_fractions(split_fractions if split_fractions is not None else DEFAULT_SPLIT_FRACTIONS)
    show = bool(progress) and sys.stderr.isatty()
    steps = tqdm(total=7, desc="import", unit="step", disable=not show, leave=False)

    # ---- read and check the inputs ----------------------------------------------------------
    edges = Path(edges)
    steps.set_postfix_str(f"reading {edges.name}")
    src, dst, how = read_edges(edges)
    steps.update()
    feats, feats_how = (open_features(features, feature_dim, feature_dtype) if features is not None
                        else (None, None))
    y = read_labels(labels) if labels is not None else None

    if num_nodes is not None:
        n, n_from = int(num_nodes), "--num-nodes"
    elif "num_nodes" in how:
        n, n_from = how["num_nodes"], f"the DGL graph in {edges}"
    elif feats is not None:
        n, n_from = feats.shape[0], f"the rows of {features}"
    elif y is not None:
        n, n_from = y.size, f"the labels in {labels}"
    else:
        n = int(max(src.max(initial=-1), dst.max(initial=-1))) + 1
        n_from = f"the largest id in {edges} + 1"
    if n < 1:
        raise DataError(edges, "no nodes: the edge list is empty and no --num-nodes was given",
                        expected="at least one node", found=0)
    # before any table of n entries (lsm_gnn.utils.bounds.NODE_TABLE_BYTES): one very large id or
    # --num-nodes is refused here, not by the allocator (a 160-byte edge file asked for 7.3 TiB)
    check_nodes(n, Path(edges) if num_nodes is None else "--num-nodes",
                 "num_nodes", why=f"{n:,} nodes (from {n_from})")
    entry, first = how.get("entry", "edge"), how.get("first_entry", 0)
    validate.ids_in_range(src, n, edges, f"source id (num_nodes {n} from {n_from})", entry=entry, first_entry=first)
    validate.ids_in_range(dst, n, edges, f"destination id (num_nodes {n} from {n_from})", entry=entry,
                          first_entry=first)
    if feats is not None and feats.shape[0] != n:
        raise DataError(features, f"field rows: one feature row per node (num_nodes {n} from {n_from})",
                        expected=n, found=feats.shape[0])
    if y is not None and y.size != n:
        raise DataError(labels, f"field labels: one label per node (num_nodes {n} from {n_from})",
                        expected=n, found=y.size)
    if y is not None:
        top = int(y.max()) if y.size else -1
        if num_classes is None:
            num_classes = max(top + 1, 1)
        elif top >= num_classes:
            bad = int(np.flatnonzero(y >= num_classes)[0])
            raise DataError(labels, f"field labels: label of node {bad} out of range",
                            expected=f"-1 or a class in [0, {num_classes})", found=int(y[bad]))
        if top < 0:
            raise DataError(labels, "field labels: no labelled node (every label is -1), so there is nothing "
                            "to split or train on", expected="at least one label >= 0", found="all -1")
        labels_note = str(labels)
    else:
        num_classes = PLACEHOLDER_CLASSES if num_classes is None else validate.class_count(num_classes, "--num-classes")
        y = np.random.default_rng([seed, _S_LABELS]).integers(0, num_classes, n)
        labels_note = (f"placeholder: seeded random classes in [0, {num_classes}) (seed {seed}); no labels were "
                       "given, so accuracies mean nothing")
    if splits is not None:
        parts = {k: read_split(p, n) for k, p in zip(("train", "val", "test"), splits)}
        origins = dict(zip(("train", "val", "test"), splits))
        splits_note = {k: str(p) for k, p in origins.items()}
    else:
        parts = random_splits(y, fractions, seed)
        origins = None
        splits_note = {"fractions": list(fractions), "seed": int(seed), "over": "labelled nodes"}

    dim = feats.shape[1] if feats is not None else (feature_dim or DEFAULT_FEATURE_DIM)
    dtype = np.dtype(feature_dtype or (feats.dtype if feats is not None else "float32"))
    out.parent.mkdir(parents=True, exist_ok=True)
    need = n * row_stride_for(dim * dtype.itemsize)
    free = shutil.disk_usage(out.parent).free
    if free < need * 1.05:
        raise InputError(f"{out.parent}: {free / 2**30:.1f} GiB free, the features alone need {need / 2**30:.1f} GiB")

    num_input_edges = int(src.size)
    if undirected:  # both directions, each (u, v) pair once
        steps.set_postfix_str("symmetrising")
        key = np.unique(np.concatenate((src * n + dst, dst * n + src)))
        src, dst = key // n, key % n
        del key

    source = {"importer": "lsm_gnn.datasets.importer", "edges": str(edges), "edges_format": how["format"],
              "num_input_edges": num_input_edges, "undirected": bool(undirected), "num_nodes_from": n_from,
              "labels": labels_note, "splits": splits_note, "seed": int(seed)}
    if how.get("layout"):
        source["edges_layout"] = how["layout"]
    if how.get("header") is not None:
        source["edges_header"] = how["header"]
    if feats is not None:
        source["features"] = {"file": str(features), "read_as": feats_how, "dtype_in_file": feats.dtype.name}
    else:
        source["features"] = {"random": True, "seed": int(seed), "dim": int(dim), "dtype": dtype.name,
                              "note": "no features were given: seeded random N(0, 1) rows (around one random "
                                      "centroid) stand in, so the cache has rows to move; they carry no signal"}

    # ---- write ------------------------------------------------------------------------------
    with DatasetWriter(out, name or out.name, source=source, overwrite=overwrite) as w:
        w.add_node_type(NODE_TYPE, n)
        steps.set_postfix_str("topology (CSC, CSR)")
        w.add_edges(NODE_TYPE, RELATION, NODE_TYPE, src, dst, origin=edges)
        del src, dst
        steps.update()
        steps.set_postfix_str("PageRank and degree")
        w.add_static_scores()
        steps.update()
        w.set_labels(NODE_TYPE, y, num_classes, origin=Path(labels) if labels is not None else "placeholder labels")
        steps.update()
        w.set_splits(parts["train"], parts["val"], parts["test"], origins=origins)
        steps.update()
        steps.set_postfix_str("features")
        if feats is None:
            write_features(w, [NODE_TYPE], {NODE_TYPE: np.zeros(n, dtype=np.int64)}, int(dim), dtype, 1,
                           int(seed), progress)
        else:
            _copy_features(w, feats, Path(features), dtype, show)
        steps.update()
        steps.set_postfix_str("commit")
        ds = w.commit()
        steps.update()
    steps.close()
    return ds


def _copy_features(w: DatasetWriter, feats: np.ndarray, path: Path, dtype: np.dtype, show: bool):
    """Copy the rows in chunks (bounded memory), refusing non-finite values (verify would flag them)."""
    n, dim = feats.shape
    rows = max(1, FEATURE_CHUNK_BYTES // max(1, dim * feats.dtype.itemsize))
    with w.feature_file(dim, dtype) as f, tqdm(total=n, unit="rows", desc="features", disable=not show,
                                                leave=False) as bar:
        for lo in range(0, n, rows):
            block = np.asarray(feats[lo: lo + rows])
            finite = np.isfinite(block)
            if not finite.all():
                r = lo + int(np.flatnonzero(~finite.all(axis=1))[0])
                raise DataError(path, f"row {r}: non-finite feature value", expected="finite values",
                                found=f"{block[r - lo][~finite[r - lo]][0]}")
            out = block.astype(dtype, copy=False)
            if dtype != feats.dtype and not np.isfinite(out).all():
                r = lo + int(np.flatnonzero(~np.isfinite(out).all(axis=1))[0])
                raise DataError(path, f"row {r}: value overflows --feature-dtype {dtype}", expected="finite values",
                                found=f"{block[r - lo].max()}")
            f.write(out)
            bar.update(len(block))

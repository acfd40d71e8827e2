"""The lsm-gnn on-disk dataset format (version 1). Specification: docs/dataset-format.md.

`DatasetWriter` builds a dataset directory under a temporary name and renames it into place on
`commit()`, so an interrupted preparation never leaves a directory that looks complete.
`Dataset` opens one, checking `metadata.json` and naming the file of any problem.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lsm_gnn.datasets import validate
from lsm_gnn.utils.atomic import WRITE_ERRNOS, make_parent, remove_leftovers, replace_dir, temp_dir
from lsm_gnn.utils.errors import DataError, InputError, OutputError
from lsm_gnn.utils.locks import exclusive

FORMAT_NAME = "lsm-gnn-dataset"
FORMAT_VERSION = 1
SECTOR = 512          # O_DIRECT alignment unit (logical block size)
BLOCK = 4096          # storage block: reads are issued in whole 4 KiB blocks
FEATURE_FILE = "features.bin"
HASH_CHUNK = 1 << 24


def row_stride_for(row_bytes: int) -> int:
    """Bytes between consecutive rows: rows never straddle a 512-byte sector needlessly.

    Rows of at least 512 bytes are padded to a multiple of 512; smaller rows to the next power of
    two, so several rows share a sector but none crosses one.
    """
    if row_bytes <= 0:
        raise ValueError("row_bytes must be positive")
    if row_bytes >= SECTOR:
        return -(-row_bytes // SECTOR) * SECTOR
    return 1 << (row_bytes - 1).bit_length()


@dataclass(frozen=True)
class FeatureLayout:
    """Where each feature row lives in `features.bin` (one flat id space over node types)."""

    path: Path
    num_rows: int
    dim: int
    dtype: np.dtype
    row_bytes: int
    row_stride: int
    file_bytes: int
    type_offsets: dict  # node type -> first global row

    def row_offset(self, row: int) -> int:
        return row * self.row_stride

    @property
    def rows_per_block(self) -> int:
        return max(1, BLOCK // self.row_stride)

    def view(self, mode: str = "r") -> np.ndarray:
        """The rows as a (num_rows, dim) array over a memmap (padding skipped by strides)."""
        raw = np.memmap(self.path, dtype=np.uint8, mode=mode, shape=(self.file_bytes,))
        itemsize = self.dtype.itemsize
        return np.lib.stride_tricks.as_strided(
            raw[: max(self.num_rows * self.row_stride, 1)].view(self.dtype),
            shape=(self.num_rows, self.dim), strides=(self.row_stride, itemsize), writeable=(mode != "r"))


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (the checksum metadata.json records)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _npy_header(path: Path) -> tuple[tuple, np.dtype]:
    """(shape, dtype) from a .npy header; DataError if it is unreadable or the data is truncated."""
    with open(path, "rb") as fh:
        try:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
        except (ValueError, SyntaxError, EOFError, OSError) as e:
            raise DataError(path, f"not a readable .npy file: {e}") from None
        offset = fh.tell()
    need = offset + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    size = path.stat().st_size
    if size < need:
        raise DataError(path, f"truncated: the .npy header announces shape {tuple(shape)} of {dtype}",
                        expected=f"{need} bytes", found=f"{size} bytes")
    return tuple(shape), np.dtype(dtype)


class Dataset:
    """A dataset directory in the lsm-gnn format, opened read-only (arrays are memory-mapped)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        meta_path = self.root / "metadata.json"
        if not self.root.is_dir():
            raise DataError(self.root, "dataset directory does not exist")
        if not meta_path.is_file():
            raise DataError(meta_path, "missing; not an lsm-gnn dataset directory "
                            "(create one with `lsm-gnn dataset generate` or `prepare`)")
        try:
            self.meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as e:
            raise DataError(meta_path, f"not valid JSON: {e}") from None
        if self.meta.get("format") != FORMAT_NAME:
            raise DataError(meta_path, "field format", expected=FORMAT_NAME, found=self.meta.get("format"))
        if self.meta.get("format_version") != FORMAT_VERSION:
            raise DataError(meta_path, "field format_version", expected=FORMAT_VERSION,
                            found=self.meta.get("format_version"))
        for key in ("name", "node_types", "edge_types", "features", "labels", "splits", "files"):
            if key not in self.meta:
                raise DataError(meta_path, f"missing field {key}")
        self._layout = self._check(meta_path)

    def _check(self, meta_path: Path) -> FeatureLayout:
        """Metadata agrees with itself and with its files: the feature file's size, the shapes and
        dtypes in the .npy headers. Cheap (stat and header reads; no hashing: `lsm-gnn dataset verify`
        does that) and run once, on open. Returns the feature layout `features()` hands out."""
        m = self.meta

        def bad(field, problem, expected=None, found=None):
            raise DataError(meta_path, f"field {field}: {problem}", expected=expected, found=found)

        for key in ("node_types", "edge_types", "features", "labels", "splits", "files"):
            if not isinstance(m[key], dict):
                bad(key, "must be an object", "a JSON object", type(m[key]).__name__)
        counts = {}
        for t, info in m["node_types"].items():
            n = info.get("num_nodes") if isinstance(info, dict) else None
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                bad(f"node_types.{t}.num_nodes", "must be a non-negative integer", "an integer >= 0", repr(n))
            counts[t] = n
        for et, e in m["edge_types"].items():
            for key in ("src_type", "dst_type"):
                if not isinstance(e, dict) or e.get(key) not in counts:
                    bad(f"edge_types.{et}.{key}", "not a declared node type", f"one of {sorted(counts)}",
                        repr(e.get(key) if isinstance(e, dict) else e))
            if not isinstance(e.get("num_edges"), int) or e["num_edges"] < 0:
                bad(f"edge_types.{et}.num_edges", "must be a non-negative integer", "an integer >= 0",
                    repr(e.get("num_edges")))

        # ---- features: the layout agrees with itself, the node counts and the file's size ----
        f = m["features"]
        try:
            lay = FeatureLayout(path=self.path(f["file"]), num_rows=int(f["num_rows"]), dim=int(f["dim"]),
                                dtype=np.dtype(f["dtype"]), row_bytes=int(f["row_bytes"]),
                                row_stride=int(f["row_stride"]), file_bytes=int(f["file_bytes"]),
                                type_offsets=dict(f["type_offsets"]))
        except (KeyError, TypeError, ValueError) as e:
            bad("features", f"malformed ({type(e).__name__}: {e})")
        if lay.dim < 1 or lay.num_rows < 0:
            bad("features", "dim must be >= 1 and num_rows >= 0", found=f"dim {lay.dim}, num_rows {lay.num_rows}")
        if lay.row_bytes != lay.dim * lay.dtype.itemsize:
            bad("features.row_bytes", "must be dim x itemsize", lay.dim * lay.dtype.itemsize, lay.row_bytes)
        if lay.row_stride != row_stride_for(lay.row_bytes):
            bad("features.row_stride", f"wrong for rows of {lay.row_bytes} bytes", row_stride_for(lay.row_bytes),
                lay.row_stride)
        featured = 0
        for t, off in lay.type_offsets.items():
            if t not in counts:
                bad("features.type_offsets", "not a declared node type", f"one of {sorted(counts)}", repr(t))
            if off != featured:
                bad(f"features.type_offsets.{t}", "node types must follow each other from row 0", featured, off)
            featured += counts[t]
        if not lay.path.is_file():
            raise DataError(lay.path, "missing (the feature file named by metadata.json field features.file)")
        size = lay.path.stat().st_size
        need = lay.num_rows * lay.row_stride
        if size < need:
            raise DataError(lay.path, f"too small for metadata.json field features.num_rows = {lay.num_rows} "
                            f"(rows of {lay.row_stride} bytes)", expected=f"at least {need} bytes", found=f"{size} bytes")
        if lay.num_rows != featured:
            bad("features.num_rows", "disagrees with node_types: the featured types ("
                + ", ".join(lay.type_offsets) + ") have that many nodes", featured, lay.num_rows)
        padded = -(-need // BLOCK) * BLOCK
        if lay.file_bytes != padded:
            bad("features.file_bytes", f"disagrees with num_rows x row_stride padded to whole {BLOCK}-byte blocks",
                padded, lay.file_bytes)
        if size != lay.file_bytes:
            raise DataError(lay.path, "size differs from metadata.json field features.file_bytes",
                            expected=f"{lay.file_bytes} bytes", found=f"{size} bytes")

        # ---- labels and split sizes ----
        lab = m["labels"]
        lt = lab.get("node_type") if isinstance(lab, dict) else None
        if lt not in counts:
            bad("labels.node_type", "not a declared node type", f"one of {sorted(counts)}", repr(lt))
        nc, nl = lab.get("num_classes"), lab.get("num_labeled")
        if not isinstance(nc, int) or nc < 1:
            bad("labels.num_classes", "must be an integer >= 1", "an integer >= 1", repr(nc))
        if not isinstance(nl, int) or not 0 <= nl <= counts[lt]:
            bad("labels.num_labeled", f"must lie in [0, num_nodes of {lt}]", f"[0, {counts[lt]}]", repr(nl))
        for name, k in m["splits"].items():
            if name not in ("train", "val", "test") or not isinstance(k, int) or k < 0:
                bad(f"splits.{name}", "a split (train, val, test) size must be an integer >= 0", found=repr(k))
        if sum(m["splits"].values()) > counts[lt]:
            bad("splits", f"split sizes sum to more than the {lt} nodes (splits hold distinct nodes)",
                f"at most {counts[lt]}", sum(m["splits"].values()))

        # ---- every array file's .npy header agrees with the counts ----
        arrays = []
        for et, e in m["edge_types"].items():
            ns, nd, ne = counts[e["src_type"]], counts[e["dst_type"]], e["num_edges"]
            for kind, n_major in (("csc", nd), ("csr", ns)):
                arrays.append((f"topology/{et}/{kind}_indptr.npy", np.int64, (n_major + 1,),
                               f"node_types.{e['dst_type' if kind == 'csc' else 'src_type']}.num_nodes + 1"))
                arrays.append((f"topology/{et}/{kind}_indices.npy", np.int64, (ne,), f"edge_types.{et}.num_edges"))
        arrays.append((f"labels/{lt}.npy", np.int64, (counts[lt],), f"node_types.{lt}.num_nodes"))
        for name, k in m["splits"].items():
            arrays.append((f"splits/{name}.npy", np.int64, (k,), f"splits.{name}"))
        for t, n in counts.items():
            arrays.append((f"static/{t}.pagerank_u8.npy", np.uint8, (n,), f"node_types.{t}.num_nodes"))
            arrays.append((f"static/{t}.degree.npy", np.int64, (n,), f"node_types.{t}.num_nodes"))
        for rel, dtype, shape, field in arrays:
            p = self.path(rel)
            if not p.is_file():
                if rel in m["files"]:
                    raise DataError(p, "missing (listed in metadata.json)")
                continue  # not written (an older dataset): an error when it is used
            found_shape, found_dtype = _npy_header(p)
            if found_dtype != np.dtype(dtype):
                raise DataError(p, "dtype", expected=np.dtype(dtype), found=found_dtype)
            if found_shape != shape:
                raise DataError(p, f"shape disagrees with metadata.json field {field}", expected=shape, found=found_shape)
        return lay

    # ---- structure -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.meta["name"]

    @property
    def node_types(self) -> list[str]:
        return list(self.meta["node_types"])

    @property
    def edge_types(self) -> list[str]:
        return list(self.meta["edge_types"])

    @property
    def is_homogeneous(self) -> bool:
        return len(self.node_types) == 1 and len(self.edge_types) == 1

    def num_nodes(self, ntype: str | None = None) -> int:
        if ntype is None:
            return sum(t["num_nodes"] for t in self.meta["node_types"].values())
        return self.meta["node_types"][ntype]["num_nodes"]

    def num_edges(self, etype: str | None = None) -> int:
        if etype is None:
            return sum(e["num_edges"] for e in self.meta["edge_types"].values())
        return self.meta["edge_types"][etype]["num_edges"]

    def edge_type_triple(self, etype: str) -> tuple[str, str, str]:
        e = self.meta["edge_types"][etype]
        return e["src_type"], e["relation"], e["dst_type"]

    def path(self, rel: str) -> Path:
        return self.root / rel

    def _load(self, rel: str, mmap: bool = True) -> np.ndarray:
        p = self.path(rel)
        if not p.is_file():
            raise DataError(p, "missing file listed in metadata.json")
        try:
            return np.load(p, mmap_mode="r" if mmap else None)
        except ValueError as e:
            raise DataError(p, f"not a readable .npy file: {e}") from None

    def csc(self, etype: str) -> tuple[np.ndarray, np.ndarray]:
        """(indptr over destination nodes, source ids): in-edges, what samplers need."""
        return self._load(f"topology/{etype}/csc_indptr.npy"), self._load(f"topology/{etype}/csc_indices.npy")

    def csr(self, etype: str) -> tuple[np.ndarray, np.ndarray]:
        """(indptr over source nodes, destination ids): out-edges."""
        return self._load(f"topology/{etype}/csr_indptr.npy"), self._load(f"topology/{etype}/csr_indices.npy")

    # ---- labels, splits, static scores -----------------------------------------------------
    @property
    def label_type(self) -> str:
        return self.meta["labels"]["node_type"]

    @property
    def num_classes(self) -> int:
        return self.meta["labels"]["num_classes"]

    def labels(self) -> np.ndarray:
        """int64 class per node of the labelled type; -1 where unlabelled."""
        return self._load(f"labels/{self.label_type}.npy")

    def split(self, name: str) -> np.ndarray:
        if name not in ("train", "val", "test"):
            raise ValueError(f"split must be train, val or test, not {name!r}")
        return self._load(f"splits/{name}.npy")

    def pagerank_u8(self, ntype: str | None = None) -> np.ndarray:
        """PageRank percentile byte per node (0 = least central, 255 = most)."""
        return self._load(f"static/{ntype or self.label_type}.pagerank_u8.npy")

    def degree(self, ntype: str | None = None) -> np.ndarray:
        return self._load(f"static/{ntype or self.label_type}.degree.npy")

    def static_method(self) -> dict | None:
        """How the static scores were computed (metadata `static`: the PageRank normalisation,
        damping, iterations); None for a dataset written before the metadata recorded it (those
        used the out-degree normalisation)."""
        return self.meta.get("static")

    def static_scores(self) -> np.ndarray:
        """PageRank bytes over the flat feature-row id space (concatenated in type order)."""
        lay = self.features()
        out = np.zeros(lay.num_rows, dtype=np.uint8)
        for t, off in lay.type_offsets.items():
            pr = self.pagerank_u8(t)
            out[off: off + len(pr)] = pr
        return out

    # ---- features --------------------------------------------------------------------------
    def features(self) -> FeatureLayout:
        """The feature layout, checked against metadata.json and the file's size when opened."""
        return self._layout

    def feature_array(self) -> np.ndarray:
        """All features as a (rows, dim) read-only memmap view (for the in-memory ideal and tests)."""
        return self.features().view("r")

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, nodes={self.num_nodes()}, edges={self.num_edges()}, "
                f"types={self.node_types})")


class DatasetWriter:
    """Builds a dataset directory; `commit()` writes metadata.json and renames it into place."""

    def __init__(self, root: str | os.PathLike, name: str, source: dict | None = None, overwrite: bool = False):
        self.root = Path(root)
        if self.root.exists() and not overwrite:
            raise InputError(f"{self.root}: already exists; pass overwrite=True (CLI: --force) to replace it")
        # one writer per directory (a second is refused); a killed writer's temporary copy is removed
        make_parent(self.root)
        self._lock = contextlib.ExitStack()
        self._lock.enter_context(exclusive(self.root, "dataset directory"))
        try:
            remove_leftovers(self.root)
            self.tmp = temp_dir(self.root)
        except BaseException:
            self._lock.close()
            raise
        self.meta: dict = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "name": name,
                           "source": source or {}, "node_types": {}, "edge_types": {},
                           "features": None, "labels": None, "splits": {}, "files": {}}
        self._hashes: dict[str, str] = {}
        self._committed = False
        self._labels: np.ndarray | None = None
        self._splits: tuple[dict, dict] | None = None
        self._static: set[str] = set()
        self._unlabelled_ok: tuple[str, ...] = ()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or not self._committed:
            self.abort()
        if exc_type is not None and issubclass(exc_type, OSError) and exc.errno in WRITE_ERRNOS:
            raise OutputError.from_os_error(self.root, exc) from None

    def abort(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._lock.close()

    def _save(self, rel: str, arr: np.ndarray):
        p = self.tmp / rel
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            np.save(p, arr)
        except OSError as e:
            if e.errno is None:  # numpy's short write ("N requested and M written"): the disk is full
                raise OutputError(self.root, f"cannot write {rel}: {e} (the file system is full or a "
                                             "file-size limit was reached)") from None
            raise

    def add_node_type(self, ntype: str, num_nodes: int):
        n = validate.node_count(num_nodes, f"add_node_type({ntype!r})")
        self.meta["node_types"][ntype] = {"num_nodes": n}

    def _num_nodes(self, ntype: str, origin) -> int:
        if ntype not in self.meta["node_types"]:
            validate.fail(origin, f"node type {ntype!r} not declared (call add_node_type first)",
                          expected=f"one of {sorted(self.meta['node_types'])}", found=repr(ntype))
        return self.meta["node_types"][ntype]["num_nodes"]

    def add_edges(self, src_type: str, relation: str, dst_type: str, src: np.ndarray, dst: np.ndarray, *,
                  origin=None):
        """Store one relation as CSC (by destination) and CSR (by source), int64, sorted neighbours.

        Ids must be integers (floats are refused, never truncated) within the node counts;
        `origin` (a path or an argument name) is what errors name.
        """
        etype = f"{src_type}__{relation}__{dst_type}"
        origin = origin if origin is not None else f"add_edges({etype})"
        n_src = self._num_nodes(src_type, origin)
        n_dst = self._num_nodes(dst_type, origin)
        src = validate.integer_ids(src, origin, "src", what="node ids")
        dst = validate.integer_ids(dst, origin, "dst", what="node ids")
        if src.shape != dst.shape:
            validate.fail(origin, "fields src and dst: one source and one destination per edge",
                          expected="equal lengths", found=f"{src.size} and {dst.size}")
        validate.ids_in_range(src, n_src, origin, "src", entry="edge")
        validate.ids_in_range(dst, n_dst, origin, "dst", entry="edge")
        for kind, major, minor, n in (("csc", dst, src, n_dst), ("csr", src, dst, n_src)):
            order = np.lexsort((minor, major))
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(major, minlength=n), out=indptr[1:])
            self._save(f"topology/{etype}/{kind}_indptr.npy", indptr)
            self._save(f"topology/{etype}/{kind}_indices.npy", minor[order])
            del order
        self.meta["edge_types"][etype] = {"src_type": src_type, "relation": relation, "dst_type": dst_type,
                                          "num_edges": int(src.size)}
        return etype

    def add_csc(self, src_type: str, relation: str, dst_type: str, indptr: np.ndarray, indices: np.ndarray, *,
                origin=None):
        """Store a relation given directly as CSC (derives the CSR)."""
        etype = f"{src_type}__{relation}__{dst_type}"
        origin = origin if origin is not None else f"add_csc({etype})"
        n_dst = self._num_nodes(dst_type, origin)
        indptr = validate.integer_ids(indptr, origin, "indptr", what="offsets")
        indices = validate.integer_ids(indices, origin, "indices", what="node ids")
        if indptr.shape != (n_dst + 1,) or indptr[0] != 0 or indptr[-1] != indices.size or (np.diff(indptr) < 0).any():
            validate.fail(origin, "field indptr: CSC offsets over the destination nodes",
                          expected=f"{n_dst + 1} non-decreasing offsets from 0 to {indices.size}",
                          found=f"{indptr.size} offsets from {indptr[:1].tolist()} to {indptr[-1:].tolist()}")
        dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        return self.add_edges(src_type, relation, dst_type, indices, dst, origin=origin)

    def feature_file(self, dim: int, dtype="float32", type_order: list[str] | None = None) -> "FeatureFileWriter":
        """Open features.bin for streaming rows in global-id order (node types concatenated)."""
        order = type_order or list(self.meta["node_types"])
        offsets, total = {}, 0
        for t in order:
            offsets[t] = total
            total += self.meta["node_types"][t]["num_nodes"]
        return FeatureFileWriter(self, dim, np.dtype(dtype), offsets, total)

    def set_labels(self, ntype: str, labels: np.ndarray, num_classes: int, *, origin=None):
        """int64 class per node of `ntype` (-1 = unlabelled), each below `num_classes`."""
        origin = origin if origin is not None else f"set_labels({ntype!r})"
        n = self._num_nodes(ntype, origin)
        labels = validate.labels(labels, n, num_classes, origin)
        self._save(f"labels/{ntype}.npy", labels)
        self.meta["labels"] = {"node_type": ntype, "num_classes": int(num_classes),
                               "num_labeled": int((labels >= 0).sum())}
        self._labels = labels
        if self._splits is not None:
            self._check_splits(*self._splits)

    def set_splits(self, train: np.ndarray, val: np.ndarray, test: np.ndarray, *, origins: dict | None = None,
                   unlabelled_ok: tuple[str, ...] = ()):
        """Node ids of the labelled type: integers in range, pairwise disjoint and (checked once the
        labels are set, whichever comes first) labelled, except in the splits named in
        `unlabelled_ok` (MAG240M's test labels are hidden). `origins` maps a split name to what
        errors name (a path or an argument)."""
        origins = {k: (origins or {}).get(k, f"set_splits({k})") for k in ("train", "val", "test")}
        self._unlabelled_ok = tuple(unlabelled_ok)
        if self.meta["labels"] is not None:
            n = self.meta["node_types"][self.meta["labels"]["node_type"]]["num_nodes"]
        elif len(self.meta["node_types"]) == 1:
            n = next(iter(self.meta["node_types"].values()))["num_nodes"]
        else:
            n = None  # the labelled type is not known yet: ranges are checked with the labels
        parts = {"train": train, "val": val, "test": test}
        if n is not None:
            parts = validate.splits(parts, n, None, origins)
        else:
            parts = {k: validate.integer_ids(v, origins[k], k, what="split ids") for k, v in parts.items()}
        self._splits = (parts, origins)
        if self._unlabelled_ok:  # so that `dataset verify` accepts them too
            self.meta["splits_unlabelled_ok"] = list(self._unlabelled_ok)
        if self.meta["labels"] is not None:
            self._check_splits(parts, origins)
        for name, ids in parts.items():
            self._save(f"splits/{name}.npy", ids)
            self.meta["splits"][name] = int(ids.size)

    def _check_splits(self, parts: dict, origins: dict):
        n = self.meta["node_types"][self.meta["labels"]["node_type"]]["num_nodes"]
        validate.splits(parts, n, self._labels, origins, unlabelled_ok=self._unlabelled_ok)

    def set_static(self, ntype: str, pagerank_u8: np.ndarray, degree: np.ndarray, *, origin=None):
        """PageRank percentile byte (integers 0..255) and degree (integers >= 0) per node of `ntype`."""
        origin = origin if origin is not None else f"set_static({ntype!r})"
        n = self._num_nodes(ntype, origin)
        pagerank_u8, degree = validate.static_scores(pagerank_u8, degree, n, origin)
        self._save(f"static/{ntype}.pagerank_u8.npy", np.asarray(pagerank_u8, dtype=np.uint8))
        self._save(f"static/{ntype}.degree.npy", np.asarray(degree, dtype=np.int64))
        self._static.add(ntype)

    def set_static_method(self, method: dict):
        """How the static scores were computed (`pagerank.method()`), recorded as metadata `static`."""
        self.meta["static"] = dict(method)

    def add_static_scores(self, type_order: list[str] | None = None, *, normalisation: str | None = None):
        """PageRank byte and degree of every node type from the relations added so far (on the
        homogeneous view; `pagerank.static_scores` with `normalisation`, the authors' in-degree by
        default), stored with `set_static`; the method is recorded in the metadata."""
        from lsm_gnn.datasets.pagerank import NORMALISATION, method, static_scores

        normalisation = normalisation or NORMALISATION
        self.set_static_method(method(normalisation))

        counts = {t: v["num_nodes"] for t, v in self.meta["node_types"].items()}
        rels = []
        for et, e in self.meta["edge_types"].items():
            indptr = np.load(self.tmp / f"topology/{et}/csc_indptr.npy", mmap_mode="r")
            indices = np.load(self.tmp / f"topology/{et}/csc_indices.npy", mmap_mode="r")
            rels.append((e["src_type"], e["dst_type"], indptr, indices))
        for t, (pr, deg) in static_scores(counts, rels, type_order, normalisation=normalisation).items():
            self.set_static(t, pr, deg)

    def commit(self) -> Dataset:
        if self.meta["features"] is None:
            raise ValueError("no features written (use feature_file())")
        if self.meta["labels"] is None:
            raise ValueError("no labels set (use set_labels())")
        missing = [t for t in self.meta["node_types"] if t not in self._static]
        if missing:
            validate.fail("DatasetWriter.commit", "static scores missing for node types " + ", ".join(missing),
                          expected="set_static() or add_static_scores() for every node type", found="none")
        files = {}
        for p in sorted(self.tmp.rglob("*")):
            if p.is_file():
                rel = p.relative_to(self.tmp).as_posix()
                files[rel] = {"bytes": p.stat().st_size, "sha256": self._hashes.get(rel) or sha256_file(p)}
        self.meta["files"] = files
        (self.tmp / "metadata.json").write_text(json.dumps(self.meta, indent=2) + "\n")
        replace_dir(self.tmp, self.root)
        self._committed = True
        self._lock.close()
        return Dataset(self.root)


def encode_rows(rows: np.ndarray, dim: int, dtype: np.dtype, row_stride: int, room: int) -> memoryview:
    """The bytes of `rows` as stored in features.bin (each row zero-padded to `row_stride`)."""
    rows = np.ascontiguousarray(rows, dtype=dtype)
    if rows.ndim != 2 or rows.shape[1] != dim:
        raise ValueError(f"feature rows: expected shape (n, {dim}), found {rows.shape}")
    if len(rows) > room:
        raise ValueError(f"feature rows: {len(rows)} more rows than the {room} still declared")
    row_bytes = dim * np.dtype(dtype).itemsize
    if row_stride != row_bytes:
        padded = np.zeros((len(rows), row_stride), dtype=np.uint8)
        padded[:, :row_bytes] = rows.view(np.uint8).reshape(len(rows), -1)
        rows = padded
    return memoryview(rows).cast("B")


class FeatureFileWriter:
    """Streams feature rows to features.bin with the padded stride; hashes while writing."""

    def __init__(self, writer: DatasetWriter, dim: int, dtype: np.dtype, offsets: dict, total: int):
        self.w, self.dim, self.dtype, self.offsets, self.total = writer, dim, dtype, offsets, total
        self.row_bytes = dim * dtype.itemsize
        self.row_stride = row_stride_for(self.row_bytes)
        self.path = writer.tmp / FEATURE_FILE
        self.f = open(self.path, "wb")
        self.h = hashlib.sha256()
        self.rows = 0

    def __enter__(self):
        return self

    def write(self, rows: np.ndarray):
        """Append rows (n, dim) in global-id order."""
        mv = encode_rows(rows, self.dim, self.dtype, self.row_stride, room=self.total - self.rows)
        self.f.write(mv)
        self.h.update(mv)
        self.rows += len(mv) // self.row_stride

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.f.close()

    def close(self):
        if self.rows != self.total:
            self.f.close()
            raise ValueError(f"feature rows: wrote {self.rows}, declared {self.total}")
        data_bytes = self.rows * self.row_stride
        pad = (-data_bytes) % BLOCK  # whole last block, so O_DIRECT reads never run short
        if pad:
            z = b"\0" * pad
            self.f.write(z)
            self.h.update(z)
        self.f.close()
        self.w._hashes[FEATURE_FILE] = self.h.hexdigest()
        self.w.meta["features"] = {"file": FEATURE_FILE, "num_rows": self.total, "dim": self.dim,
                                   "dtype": self.dtype.name, "row_bytes": self.row_bytes,
                                   "row_stride": self.row_stride, "file_bytes": data_bytes + pad,
                                   "type_offsets": self.offsets}

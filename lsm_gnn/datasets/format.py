"""The lsm-gnn on-disk dataset format (version 1). Specification: docs/dataset-format.md.

`DatasetWriter` builds a dataset directory under a temporary name and renames it into place on
`commit()`, so an interrupted preparation never leaves a directory that looks complete.
`Dataset` opens one, checking `metadata.json` and naming the file of any problem.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lsm_gnn.utils.errors import DataError

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
        f = self.meta["features"]
        return FeatureLayout(path=self.path(f["file"]), num_rows=int(f["num_rows"]), dim=int(f["dim"]),
                             dtype=np.dtype(f["dtype"]), row_bytes=int(f["row_bytes"]),
                             row_stride=int(f["row_stride"]), file_bytes=int(f["file_bytes"]),
                             type_offsets=dict(f["type_offsets"]))

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
            raise FileExistsError(f"{self.root}: already exists (pass overwrite=True / --force)")
        self.root.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.root.name}.", suffix=".partial", dir=self.root.parent))
        self.meta: dict = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "name": name,
                           "source": source or {}, "node_types": {}, "edge_types": {},
                           "features": None, "labels": None, "splits": {}, "files": {}}
        self._hashes: dict[str, str] = {}
        self._committed = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or not self._committed:
            self.abort()

    def abort(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _save(self, rel: str, arr: np.ndarray):
        p = self.tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        np.save(p, arr)

    def add_node_type(self, ntype: str, num_nodes: int):
        self.meta["node_types"][ntype] = {"num_nodes": int(num_nodes)}

    def add_edges(self, src_type: str, relation: str, dst_type: str, src: np.ndarray, dst: np.ndarray):
        """Store one relation as CSC (by destination) and CSR (by source), int64, sorted neighbours."""
        etype = f"{src_type}__{relation}__{dst_type}"
        n_src = self.meta["node_types"][src_type]["num_nodes"]
        n_dst = self.meta["node_types"][dst_type]["num_nodes"]
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        if src.shape != dst.shape:
            raise ValueError(f"{etype}: src and dst differ in length ({src.shape} vs {dst.shape})")
        if src.size and (src.min() < 0 or src.max() >= n_src or dst.min() < 0 or dst.max() >= n_dst):
            raise ValueError(f"{etype}: edge endpoint out of range")
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

    def add_csc(self, src_type: str, relation: str, dst_type: str, indptr: np.ndarray, indices: np.ndarray):
        """Store a relation given directly as CSC (derives the CSR)."""
        dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        return self.add_edges(src_type, relation, dst_type, indices, dst)

    def feature_file(self, dim: int, dtype="float32", type_order: list[str] | None = None) -> "FeatureFileWriter":
        """Open features.bin for streaming rows in global-id order (node types concatenated)."""
        order = type_order or list(self.meta["node_types"])
        offsets, total = {}, 0
        for t in order:
            offsets[t] = total
            total += self.meta["node_types"][t]["num_nodes"]
        return FeatureFileWriter(self, dim, np.dtype(dtype), offsets, total)

    def set_labels(self, ntype: str, labels: np.ndarray, num_classes: int):
        labels = np.asarray(labels, dtype=np.int64)
        n = self.meta["node_types"][ntype]["num_nodes"]
        if labels.shape != (n,):
            raise ValueError(f"labels for {ntype}: expected shape ({n},), found {labels.shape}")
        if labels.size and (labels.max() >= num_classes or labels.min() < -1):
            raise ValueError(f"labels for {ntype}: values must lie in [-1, {num_classes})")
        self._save(f"labels/{ntype}.npy", labels)
        self.meta["labels"] = {"node_type": ntype, "num_classes": int(num_classes),
                               "num_labeled": int((labels >= 0).sum())}

    def set_splits(self, train: np.ndarray, val: np.ndarray, test: np.ndarray):
        for name, ids in (("train", train), ("val", val), ("test", test)):
            ids = np.asarray(ids, dtype=np.int64)
            self._save(f"splits/{name}.npy", ids)
            self.meta["splits"][name] = int(ids.size)

    def set_static(self, ntype: str, pagerank_u8: np.ndarray, degree: np.ndarray):
        n = self.meta["node_types"][ntype]["num_nodes"]
        if len(pagerank_u8) != n or len(degree) != n:
            raise ValueError(f"static scores for {ntype}: expected {n} entries")
        self._save(f"static/{ntype}.pagerank_u8.npy", np.asarray(pagerank_u8, dtype=np.uint8))
        self._save(f"static/{ntype}.degree.npy", np.asarray(degree, dtype=np.int64))

    def commit(self) -> Dataset:
        if self.meta["features"] is None:
            raise ValueError("no features written (use feature_file())")
        if self.meta["labels"] is None:
            raise ValueError("no labels set (use set_labels())")
        files = {}
        for p in sorted(self.tmp.rglob("*")):
            if p.is_file():
                rel = p.relative_to(self.tmp).as_posix()
                files[rel] = {"bytes": p.stat().st_size, "sha256": self._hashes.get(rel) or sha256_file(p)}
        self.meta["files"] = files
        (self.tmp / "metadata.json").write_text(json.dumps(self.meta, indent=2) + "\n")
        if self.root.exists():
            shutil.rmtree(self.root)
        os.replace(self.tmp, self.root)
        self._committed = True
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

"""Check a dataset directory against its metadata.json; every problem names its file.

`verify(root)` never raises for a bad dataset: it returns the list of `Problem`s (empty when the
dataset is sound). Checked: presence, byte size and sha256 of every listed file (`quick` skips
hashing features.bin), unlisted files, .npy dtypes and shapes, CSC/CSR indptr (starts at 0,
monotone, ends at the edge count) and index ranges, CSC and CSR agreeing on every degree, the
feature layout (row stride, block padding, type offsets; non-finite values unless `quick`),
label range and count, split sizes, ranges, overlaps and labelled-ness, and the static scores.
"""

from __future__ import annotations

import hashlib
import json
import re
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lsm_gnn.datasets.format import (BLOCK, FEATURE_FILE, FORMAT_NAME, FORMAT_VERSION, HASH_CHUNK,
                                     row_stride_for, sha256_file)

CHECK_CHUNK = 1 << 22  # elements per pass over big index arrays (bounded memory)


# Per-owner feature files derived from the dataset and kept beside it (lsm_gnn.multidevice.owner_files,
# which checks its own manifest against features.bin's checksum).
DERIVED_DIR = re.compile(r"owners-\d+")


@dataclass(frozen=True)
class Problem:
    file: str       # path relative to the dataset root ("metadata.json", "features.bin", ...)
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.message}"


class _Checker:
    def __init__(self, root: Path, quick: bool, progress: bool):
        self.root, self.quick, self.progress = root, quick, progress
        self.problems: list[Problem] = []
        self.meta: dict = {}

    def add(self, file: str, message: str):
        self.problems.append(Problem(file, message))

    def load(self, rel: str, dtype=None, shape=None):
        """Memory-map a listed .npy file, checking dtype and shape; None (and a problem) if bad."""
        p = self.root / rel
        if not p.is_file():
            self.add(rel, "missing")
            return None
        try:
            arr = np.load(p, mmap_mode="r")
        except (ValueError, OSError, EOFError) as e:
            self.add(rel, f"not a readable .npy file ({e})")
            return None
        if dtype is not None and arr.dtype != np.dtype(dtype):
            self.add(rel, f"dtype: expected {np.dtype(dtype)}, found {arr.dtype}")
            return None
        if shape is not None and arr.shape != tuple(shape):
            self.add(rel, f"shape: expected {tuple(shape)}, found {arr.shape}")
            return None
        return arr

    # ---- metadata ------------------------------------------------------------------------
    def metadata(self) -> bool:
        p = self.root / "metadata.json"
        if not self.root.is_dir():
            self.add(".", f"dataset directory {self.root} does not exist")
            return False
        if not p.is_file():
            self.add("metadata.json", "missing; not an lsm-gnn dataset directory")
            return False
        try:
            self.meta = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            self.add("metadata.json", f"not valid JSON ({e})")
            return False
        if not isinstance(self.meta, dict):
            self.add("metadata.json", f"expected a JSON object, found {type(self.meta).__name__}")
            return False
        ok = True
        if self.meta.get("format") != FORMAT_NAME:
            self.add("metadata.json", f"format: expected {FORMAT_NAME!r}, found {self.meta.get('format')!r}")
            ok = False
        if self.meta.get("format_version") != FORMAT_VERSION:
            self.add("metadata.json", f"format_version: expected {FORMAT_VERSION}, "
                     f"found {self.meta.get('format_version')!r}")
            ok = False
        for key, kind in (("node_types", dict), ("edge_types", dict), ("features", dict), ("labels", dict),
                          ("splits", dict), ("files", dict)):
            if not isinstance(self.meta.get(key), kind):
                self.add("metadata.json", f"field {key}: expected an object, found {self.meta.get(key)!r:.60}")
                ok = False
        if ok:
            for t, info in self.meta["node_types"].items():
                if not isinstance(info, dict) or not isinstance(info.get("num_nodes"), int) or info["num_nodes"] < 0:
                    self.add("metadata.json", f"node_types.{t}.num_nodes: expected a non-negative integer")
                    ok = False
        return ok

    def n(self, ntype: str) -> int | None:
        info = self.meta["node_types"].get(ntype)
        return info["num_nodes"] if info else None

    # ---- files and checksums -------------------------------------------------------------
    def files(self):
        listed = self.meta["files"]
        for rel, info in sorted(listed.items()):
            p = self.root / rel
            if not p.is_file():
                self.add(rel, "missing (listed in metadata.json)")
                continue
            size = p.stat().st_size
            if size != info.get("bytes"):
                self.add(rel, f"size: expected {info.get('bytes')} bytes, found {size}")
                continue
            if rel == (self.meta.get("features") or {}).get("file", FEATURE_FILE):
                continue  # hashed in features(), in the same pass as the value checks
            if sha256_file(p) != info.get("sha256"):
                self.add(rel, "sha256 differs from metadata.json (file changed or corrupt)")
        for p in sorted(self.root.rglob("*")):
            rel = p.relative_to(self.root).as_posix()
            if DERIVED_DIR.fullmatch(rel.split("/", 1)[0]):
                continue
            if p.is_file() and rel != "metadata.json" and rel not in listed:
                self.add(rel, "not listed in metadata.json (left over from an interrupted write?)")

    # ---- topology ------------------------------------------------------------------------
    def topology(self):
        for et, info in sorted(self.meta["edge_types"].items()):
            base = f"topology/{et}"
            try:
                src_t, dst_t, num_edges = info["src_type"], info["dst_type"], int(info["num_edges"])
            except (KeyError, TypeError, ValueError):
                self.add("metadata.json", f"edge_types.{et}: needs src_type, dst_type and num_edges")
                continue
            n_src, n_dst = self.n(src_t), self.n(dst_t)
            if n_src is None or n_dst is None:
                self.add("metadata.json", f"edge_types.{et}: node type {src_t if n_src is None else dst_t!r} "
                         "is not in node_types")
                continue
            degs = {}
            for kind, n_major, n_minor in (("csc", n_dst, n_src), ("csr", n_src, n_dst)):
                indptr = self.load(f"{base}/{kind}_indptr.npy", np.int64, (n_major + 1,))
                indices = self.load(f"{base}/{kind}_indices.npy", np.int64, (num_edges,))
                if indptr is not None and self._indptr_ok(f"{base}/{kind}_indptr.npy", indptr, num_edges):
                    degs[f"{kind}_major"] = np.diff(indptr)
                if indices is not None:
                    counts = self._indices_ok(f"{base}/{kind}_indices.npy", indices, n_minor)
                    if counts is not None:
                        degs[f"{kind}_minor"] = counts
            # CSC and CSR must describe the same edges: in-degrees and out-degrees agree
            for major, minor, rel in (("csc_major", "csr_minor", f"{base}/csr_indices.npy"),
                                      ("csr_major", "csc_minor", f"{base}/csc_indices.npy")):
                if major in degs and minor in degs and not np.array_equal(degs[major], degs[minor]):
                    bad = int(np.flatnonzero(degs[major] != degs[minor])[0])
                    self.add(rel, f"disagrees with the other orientation: node {bad} has degree "
                             f"{degs[major][bad]} there and {degs[minor][bad]} here")

    def _indptr_ok(self, rel, indptr, num_edges) -> bool:
        ok = True
        if indptr[0] != 0:
            self.add(rel, f"indptr[0]: expected 0, found {indptr[0]}")
            ok = False
        if indptr[-1] != num_edges:
            self.add(rel, f"indptr[-1]: expected num_edges={num_edges}, found {indptr[-1]}")
            ok = False
        for start in range(0, indptr.size - 1, CHECK_CHUNK):
            part = np.asarray(indptr[start: start + CHECK_CHUNK + 1])
            drops = np.flatnonzero(np.diff(part) < 0)
            if drops.size:
                i = start + int(drops[0])
                self.add(rel, f"not monotone: indptr[{i + 1}]={indptr[i + 1]} < indptr[{i}]={indptr[i]}")
                return False
        return ok

    def _indices_ok(self, rel, indices, n_minor):
        counts = np.zeros(n_minor, dtype=np.int64)
        for start in range(0, indices.size, CHECK_CHUNK):
            part = np.asarray(indices[start: start + CHECK_CHUNK])
            if part.size and (part.min() < 0 or part.max() >= n_minor):
                bad = int(np.flatnonzero((part < 0) | (part >= n_minor))[0])
                self.add(rel, f"id out of range: entry {start + bad} is {part[bad]}, expected [0, {n_minor})")
                return None
            counts += np.bincount(part, minlength=n_minor)
        return counts

    # ---- features ------------------------------------------------------------------------
    def features(self):
        f = self.meta["features"]
        try:
            dim, rows, stride = int(f["dim"]), int(f["num_rows"]), int(f["row_stride"])
            row_bytes, file_bytes, offsets = int(f["row_bytes"]), int(f["file_bytes"]), dict(f["type_offsets"])
            dtype = np.dtype(f["dtype"])
            rel = f["file"]
        except (KeyError, TypeError, ValueError) as e:
            self.add("metadata.json", f"features: malformed ({e})")
            return
        ok = True
        if row_bytes != dim * dtype.itemsize:
            self.add("metadata.json", f"features.row_bytes: expected dim*itemsize={dim * dtype.itemsize}, found {row_bytes}")
            ok = False
        if stride != row_stride_for(max(row_bytes, 1)):
            self.add("metadata.json", f"features.row_stride: expected {row_stride_for(max(row_bytes, 1))}, found {stride}")
            ok = False
        expected_bytes = -(-rows * stride // BLOCK) * BLOCK
        if file_bytes != expected_bytes:
            self.add("metadata.json", f"features.file_bytes: expected {expected_bytes} (rows padded to whole "
                     f"{BLOCK}-byte blocks), found {file_bytes}")
            ok = False
        pos = 0
        for t, off in offsets.items():
            if self.n(t) is None:
                self.add("metadata.json", f"features.type_offsets: node type {t!r} is not in node_types")
                ok = False
                continue
            if off != pos:
                self.add("metadata.json", f"features.type_offsets.{t}: expected {pos}, found {off}")
                ok = False
            pos += self.n(t)
        if pos != rows:
            self.add("metadata.json", f"features.num_rows: expected {pos} (sum of featured types), found {rows}")
            ok = False
        p = self.root / rel
        if not p.is_file():
            if rel not in self.meta["files"]:
                self.add(rel, "missing")
            return
        size = p.stat().st_size
        if size != file_bytes:
            self.add(rel, f"size: expected {file_bytes} bytes, found {size}")
            return
        if self.quick or not ok:
            return
        self._scan_features(rel, p, rows, stride, row_bytes, dtype)

    def _scan_features(self, rel, path, rows, stride, row_bytes, dtype):
        """One pass: sha256 of the file, non-finite values, non-zero padding."""
        from tqdm import tqdm

        h = hashlib.sha256()
        rows_per_chunk = max(1, HASH_CHUNK // stride)
        nonfinite = bad_pad = 0
        first_bad = None
        with open(path, "rb") as fh, tqdm(total=rows, unit="rows", desc="verify features",
                                          disable=not self.progress) as bar:
            for start in range(0, rows, rows_per_chunk):
                k = min(rows_per_chunk, rows - start)
                buf = fh.read(k * stride)
                h.update(buf)
                raw = np.frombuffer(buf, dtype=np.uint8).reshape(k, stride)
                vals = raw[:, :row_bytes].copy().view(dtype) if stride != row_bytes else raw.view(dtype)
                if dtype.kind == "f":
                    bad = ~np.isfinite(vals)
                    if bad.any():
                        nonfinite += int(bad.sum())
                        if first_bad is None:
                            first_bad = start + int(np.flatnonzero(bad.any(axis=1))[0])
                if stride != row_bytes and raw[:, row_bytes:].any():
                    bad_pad += 1
                bar.update(k)
            tail = fh.read()
            h.update(tail)
        if nonfinite:
            self.add(rel, f"{nonfinite} non-finite values (first in row {first_bad})")
        if bad_pad or any(tail):
            self.add(rel, "padding bytes are not zero")
        listed = self.meta["files"].get(rel)
        if listed and h.hexdigest() != listed.get("sha256"):
            self.add(rel, "sha256 differs from metadata.json (file changed or corrupt)")

    # ---- labels, splits, static scores ----------------------------------------------------
    def labels(self):
        lab = self.meta["labels"]
        t, classes = lab.get("node_type"), lab.get("num_classes")
        if self.n(t) is None or not isinstance(classes, int) or classes < 1:
            self.add("metadata.json", f"labels: needs a known node_type and num_classes >= 1, found {lab!r:.80}")
            return None
        rel = f"labels/{t}.npy"
        arr = self.load(rel, np.int64, (self.n(t),))
        if arr is None:
            return None
        arr = np.asarray(arr)
        if arr.size and (arr.min() < -1 or arr.max() >= classes):
            bad = int(np.flatnonzero((arr < -1) | (arr >= classes))[0])
            self.add(rel, f"label out of range: node {bad} has {arr[bad]}, expected -1 or [0, {classes})")
        labeled = int((arr >= 0).sum())
        if lab.get("num_labeled") != labeled:
            self.add(rel, f"labelled count: metadata says {lab.get('num_labeled')}, file has {labeled}")
        return arr

    def splits(self, labels):
        t = self.meta["labels"].get("node_type")
        n = self.n(t)
        if n is None:
            return
        seen = np.zeros(n, dtype=bool)
        for name in ("train", "val", "test"):
            rel = f"splits/{name}.npy"
            size = self.meta["splits"].get(name)
            arr = self.load(rel, np.int64)
            if arr is None:
                continue
            arr = np.asarray(arr)
            if arr.ndim != 1 or arr.size != size:
                self.add(rel, f"shape: expected ({size},) as in metadata.json, found {arr.shape}")
                continue
            if arr.size and (arr.min() < 0 or arr.max() >= n):
                bad = int(np.flatnonzero((arr < 0) | (arr >= n))[0])
                self.add(rel, f"id out of range: entry {bad} is {arr[bad]}, expected [0, {n})")
                continue
            if np.unique(arr).size != arr.size:
                self.add(rel, "contains duplicate ids")
            if seen[arr].any():
                self.add(rel, f"{int(seen[arr].sum())} ids also appear in an earlier split")
            seen[arr] = True
            # MAG240M's test labels are hidden: its writer names such splits in the metadata
            if labels is not None and name not in self.meta.get("splits_unlabelled_ok", ()) \
                    and (labels[arr] < 0).any():
                self.add(rel, f"{int((labels[arr] < 0).sum())} ids are unlabelled (label -1)")

    def static(self):
        types = list(self.meta["features"].get("type_offsets", {})) or list(self.meta["node_types"])
        for t in types:
            n = self.n(t)
            if n is None:
                continue
            self.load(f"static/{t}.pagerank_u8.npy", np.uint8, (n,))
            deg = self.load(f"static/{t}.degree.npy", np.int64, (n,))
            if deg is not None and n and np.asarray(deg).min() < 0:
                self.add(f"static/{t}.degree.npy", "negative degree")


def verify(root: str | os.PathLike, quick: bool = False, progress: bool = False) -> list[Problem]:
    """All problems found in the dataset at `root` (empty list: sound). `quick` skips features.bin's
    sha256 and value scan (its size is still checked)."""
    c = _Checker(Path(root), quick, progress)
    if not c.metadata():
        return c.problems
    c.files()
    c.topology()
    c.features()
    labels = c.labels()
    c.splits(labels)
    c.static()
    # one problem per (file, message), in file order
    return sorted(dict.fromkeys(c.problems), key=lambda p: p.file)

"""Chunked conversions from raw arrays to the lsm-gnn format; memory is bounded by the chunk
sizes below plus O(nodes) index arrays, never by the edge or feature file sizes.

* `build_compressed`: edge chunks -> (indptr, indices) `.npy` files by an external counting
  sort: pass 1 counts degrees, pass 2 scatters neighbour ids into a disk-backed memmap at each
  node's cursor, pass 3 sorts each node's neighbour list block by block. Output equals
  `DatasetWriter.add_edges` (int64, neighbours ascending, duplicates and self loops kept).
  Memory: three int64 arrays of n_major + 1 entries plus one edge chunk; the indices memmap
  is written at random offsets, so it runs fastest when the page cache can hold it.
* `convert_labels`: float/int class ids (NaN or negative = unlabelled) -> int64 with -1.
* `FeatureFile`: features.bin with the padded row stride of `format.row_stride_for`, written in
  chunks with a resumable row checkpoint, hashed (sha256) while written.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numpy as np

from lsm_gnn.datasets import checksums
from lsm_gnn.datasets.format import BLOCK, CHECKSUM_FILE, encode_rows, row_stride_for
from lsm_gnn.utils.atomic import write_json
from lsm_gnn.utils.errors import DataError

EDGE_CHUNK = 1 << 24             # edges per chunk (16 Mi edges: 256 MiB of int64 src + dst)
LABEL_CHUNK = 1 << 24
FEATURE_CHUNK_BYTES = 64 << 20
HASH_CHUNK = 1 << 24

EdgeChunks = Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]


def _open_out(path: Path, dtype, n: int) -> tuple[np.ndarray, Path]:
    tmp = path.with_name(path.name + ".partial")
    arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=(n,))
    return arr, tmp


def _finish(arr: np.ndarray, tmp: Path, path: Path):
    if isinstance(arr, np.memmap):
        arr.flush()
    del arr
    os.replace(tmp, path)


def build_compressed(chunks: EdgeChunks, n_major: int, n_minor: int, indptr_path: Path, indices_path: Path,
                     bar=None) -> int:
    """Write the compressed form grouped by `major`: indptr (n_major + 1) and minor ids.

    `chunks()` yields (major, minor) int64 arrays and must give the same edges each time it is
    called (it is called twice). Returns the number of edges.
    """
    counts = np.zeros(n_major, dtype=np.int64)
    for major, _ in chunks():
        counts += np.bincount(major, minlength=n_major)
        if bar is not None:
            bar.update(len(major))
    indptr = np.zeros(n_major + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    del counts
    num_edges = int(indptr[-1])
    indices, tmp = _open_out(indices_path, np.int64, num_edges)
    cursor = indptr[:-1].copy()
    for major, minor in chunks():
        order = np.argsort(major, kind="stable")
        m = major[order]
        if m.size:
            starts = np.flatnonzero(np.r_[True, m[1:] != m[:-1]])
            lengths = np.diff(np.r_[starts, m.size])
            heads = m[starts]
            rank = np.arange(m.size, dtype=np.int64) - np.repeat(starts, lengths)
            indices[cursor[m] + rank] = minor[order]
            cursor[heads] += lengths
        if bar is not None:
            bar.update(len(major))
    del cursor
    _sort_segments(indptr, indices, n_minor)
    _finish(indices, tmp, indices_path)
    out, tmp = _open_out(indptr_path, np.int64, n_major + 1)
    out[:] = indptr
    _finish(out, tmp, indptr_path)
    return num_edges


def _sort_segments(indptr: np.ndarray, indices: np.ndarray, n_minor: int):
    """Sort every node's neighbour list, a block of about EDGE_CHUNK edges at a time."""
    n = indptr.size - 1
    # key = local node * n_minor + neighbour must fit in int64
    max_nodes = max(1, (1 << 62) // max(n_minor, 1))
    lo = 0
    while lo < n:
        hi = int(np.searchsorted(indptr, indptr[lo] + EDGE_CHUNK, side="right")) - 1
        hi = min(max(hi, lo + 1), n, lo + max_nodes)
        a, b = int(indptr[lo]), int(indptr[hi])
        if b - a > 1:
            deg = np.diff(indptr[lo: hi + 1])
            seg = np.repeat(np.arange(hi - lo, dtype=np.int64), deg)
            key = seg * n_minor + np.asarray(indices[a:b])
            key.sort()
            indices[a:b] = key - seg * n_minor  # seg is non-decreasing, so it still lines up
        lo = hi


def edge_chunks(edges, src_range: tuple[int, int], dst_range: tuple[int, int], *, by: str,
                src_offset: int = 0, dst_offset: int = 0) -> EdgeChunks:
    """Chunks of (major, minor) from an `npy.EdgeArray`, range-checked against the node counts.

    by="dst" gives CSC (major = destination), by="src" CSR. Offsets shift ids into a flat space.
    """
    def gen():
        for lo in range(0, edges.num_edges, EDGE_CHUNK):
            hi = min(lo + EDGE_CHUNK, edges.num_edges)
            src, dst = edges.chunk(lo, hi)
            for ids, (n_lo, n_hi), col in ((src, src_range, "source"), (dst, dst_range, "destination")):
                if ids.size and (ids.min() < n_lo or ids.max() >= n_hi):
                    bad = int(np.flatnonzero((ids < n_lo) | (ids >= n_hi))[0])
                    raise DataError(edges.path, f"edge {lo + bad}: {col} id out of range",
                                    expected=f"[{n_lo}, {n_hi})", found=int(ids[bad]))
            if src_offset:
                src = src + src_offset
            if dst_offset:
                dst = dst + dst_offset
            yield (dst, src) if by == "dst" else (src, dst)
    return gen


def chain(*gens: EdgeChunks) -> EdgeChunks:
    def gen():
        for g in gens:
            yield from g()
    return gen


def convert_labels(src: np.ndarray, path, num_nodes: int, num_classes: int, n_labeled: int | None,
                   out_path: Path, bar=None) -> int:
    """Class ids -> int64 labels of `num_nodes` rows; NaN, negative, rows beyond the file and rows
    beyond `n_labeled` become -1. Returns the number of labelled nodes."""
    if src.ndim == 2 and src.shape[1] == 1:
        src = src[:, 0]
    if src.ndim != 1:
        raise DataError(path, "labels must be (N,) or (N, 1)", found=f"shape {src.shape}")
    rows = src.shape[0]
    if rows > num_nodes:
        raise DataError(path, "more label rows than nodes", expected=f"at most {num_nodes}", found=rows)
    limit = min(rows, num_nodes if n_labeled is None else n_labeled)
    out, tmp = _open_out(out_path, np.int64, num_nodes)
    labeled = 0
    for lo in range(0, num_nodes, LABEL_CHUNK):
        hi = min(lo + LABEL_CHUNK, num_nodes)
        block = np.full(hi - lo, -1, dtype=np.int64)
        take = max(0, min(hi, limit) - lo)
        if take:
            x = np.asarray(src[lo: lo + take])
            if x.dtype.kind == "f":
                missing = ~np.isfinite(x) | (x < 0)
                vals = np.where(missing, 0, x)
                if np.any(vals != np.floor(vals)):
                    bad = int(np.flatnonzero(vals != np.floor(vals))[0])
                    raise DataError(path, f"row {lo + bad}: class id is not a whole number",
                                    found=float(x[bad]))
                v = vals.astype(np.int64)
            elif x.dtype.kind in "iu":
                v = x.astype(np.int64)
                missing = v < 0
            else:
                raise DataError(path, "labels must be numeric", found=x.dtype)
            v[missing] = -1
            if np.any(v >= num_classes):
                bad = int(np.flatnonzero(v >= num_classes)[0])
                raise DataError(path, f"row {lo + bad}: class id out of range",
                                expected=f"[0, {num_classes})", found=int(v[bad]))
            block[:take] = v
        out[lo:hi] = block
        labeled += int((block >= 0).sum())
        if bar is not None:
            bar.update(hi - lo)
    _finish(out, tmp, out_path)
    return labeled


class FeatureFile:
    """features.bin in the lsm-gnn layout, written in chunks and resumable.

    Byte-identical to `FeatureFileWriter` (same stride, zero padding, final 4 KiB block padding);
    a checkpoint file records how many rows are safely on disk (after fsync). Reopening resumes
    after the last checkpoint, re-hashing the rows already written.
    """

    def __init__(self, path: Path, dim: int, dtype, total_rows: int):
        self.path, self.dim, self.dtype, self.total = Path(path), int(dim), np.dtype(dtype), int(total_rows)
        self.row_bytes = self.dim * self.dtype.itemsize
        self.row_stride = row_stride_for(self.row_bytes)
        self.ckpt = self.path.with_name(self.path.name + ".rows.json")
        self.h = hashlib.sha256()
        self.sums: list[np.ndarray] = []  # per-row checksums (datasets/checksums.py), as sha256: while written
        self.rows = 0
        if self.path.exists() and self.ckpt.exists():
            import json

            rows = int(json.loads(self.ckpt.read_text())["rows"])
            if self.path.stat().st_size >= rows * self.row_stride:
                self.rows = rows
        self.f = open(self.path, "r+b" if self.rows else "wb")
        self.f.truncate(self.rows * self.row_stride)
        self._rehash()
        self.f.seek(self.rows * self.row_stride)

    def _rehash(self):
        left = self.rows * self.row_stride
        step = max(1, HASH_CHUNK // self.row_stride) * self.row_stride  # whole rows, for the row checksums
        self.f.seek(0)
        while left:
            chunk = self.f.read(min(step, left))
            self.h.update(chunk)
            self._sum(chunk)
            left -= len(chunk)

    def _sum(self, data) -> None:
        rows = np.frombuffer(data, np.uint8).reshape(-1, self.row_stride)
        self.sums.append(checksums.row_checksums(rows, self.row_bytes))

    @property
    def chunk_rows(self) -> int:
        return max(1, FEATURE_CHUNK_BYTES // self.row_stride)

    def write(self, rows: np.ndarray):
        mv = encode_rows(rows, self.dim, self.dtype, self.row_stride, room=self.total - self.rows)
        self.f.write(mv)
        self.h.update(mv)
        self._sum(mv)
        self.rows += len(mv) // self.row_stride

    def checkpoint(self):
        self.f.flush()
        os.fsync(self.f.fileno())
        write_json(self.ckpt, {"rows": self.rows})

    def close(self) -> dict:
        """Pad to a whole block; returns the `features` metadata and the sha256."""
        if self.rows != self.total:
            self.f.close()
            raise ValueError(f"feature rows: wrote {self.rows}, declared {self.total}")
        data_bytes = self.rows * self.row_stride
        pad = (-data_bytes) % BLOCK
        if pad:
            z = b"\0" * pad
            self.f.write(z)
            self.h.update(z)
        self.f.close()
        self.ckpt.unlink(missing_ok=True)
        checksums.save(self.path.with_name(CHECKSUM_FILE),
                       np.concatenate(self.sums) if self.sums else np.zeros(0, np.uint64))
        return {"checksums": {"file": CHECKSUM_FILE, "algorithm": checksums.ALGORITHM, "unit": "row"},
                "num_rows": self.total, "dim": self.dim, "dtype": self.dtype.name, "row_bytes": self.row_bytes,
                "row_stride": self.row_stride, "file_bytes": data_bytes + pad, "sha256": self.h.hexdigest()}

    def abort(self):
        if not self.f.closed:
            self.f.close()


def copy_rows(ff: FeatureFile, parts: Iterable[tuple[np.ndarray, list]], bar=None):
    """Append the rows of each part after those already in `ff` (resuming mid-way).

    A part is (array (N, dim), patches); a patch (start, array) overrides rows start.. of the part.
    """
    done = ff.rows
    base = 0
    for arr, patches in parts:
        n = arr.shape[0]
        if done >= base + n:
            base += n
            continue
        step = ff.chunk_rows
        for lo in range(max(done - base, 0), n, step):
            hi = min(lo + step, n)
            block = np.array(arr[lo:hi], dtype=ff.dtype)
            for start, patch in patches:
                a, b = max(lo, start), min(hi, start + patch.shape[0])
                if a < b:
                    block[a - lo: b - lo] = patch[a - start: b - start]
            ff.write(block)
            ff.checkpoint()
            if bar is not None:
                bar.update(hi - lo)
        base += n

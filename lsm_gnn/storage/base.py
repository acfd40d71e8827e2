"""The feature-store interface every reader implements (direct, buffered, mmap, memory, GPU).

A store reads the rows of given ids (any order, duplicates allowed) into a caller's buffer and
counts exactly what it did: rows requested, distinct rows, I/O operations, bytes read from storage
(read amplification included) and time.

`FeatureStore.read_rows` validates the ids and the output buffer once for every reader, then
calls the reader's `_read(ids, out)`, which fills `out` and reports (distinct rows, I/O
operations, bytes read from storage), and, where the store was given the file's row checksums
(`row_checksums`, set by `open_feature_store`), verifies every row read against its checksum: a
row that differs is a DataError naming the file and the row (lsm_gnn.datasets.checksums).
"""

from __future__ import annotations

import abc
import os
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from lsm_gnn.utils.counts import Counts
from lsm_gnn.utils.errors import InputError


@dataclass
class IOCounters(Counts):
    rows_requested: int = 0
    distinct_rows: int = 0
    io_ops: int = 0
    bytes_read: int = 0
    """Bytes read from storage, in whole blocks (so read amplification is included)."""
    seconds: float = 0.0
    useful_bytes: int = 0
    """Bytes of the distinct rows themselves (distinct_rows * row_bytes)."""
    batches: int = 0

    @property
    def read_amplification(self) -> float:
        """Bytes read from storage per useful byte (1.0 = no waste; 0 when nothing was read)."""
        return self.bytes_read / self.useful_bytes if self.useful_bytes else 0.0


def storage_description(store) -> dict:
    """What a run record says about a store: its path (`path_info`) and whether its reads are
    verified against the rows' checksums (`checksums`)."""
    info = dict(getattr(store, "path_info", None) or {})
    if hasattr(store, "checksum_state"):
        info["checksums"] = store.checksum_state
    if hasattr(store, "emulation_stats"):  # the emulated device's pacing (lsm_gnn.storage.emulated)
        info["emulation"] = store.emulation_stats()
    return info


def aligned_empty(shape, dtype, align: int = 4096) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an `align`-byte boundary.

    The direct reader reads a batch of consecutive rows straight into such an `out` (O_DIRECT
    needs aligned memory), skipping its staging buffer and the copy out of it.
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    skip = -raw.ctypes.data % align
    return raw[skip: skip + nbytes].view(dtype).reshape(shape)


class FeatureStore(abc.ABC):
    """Rows of a feature file. Subclasses implement `_read` (or override `read_rows` entirely)."""

    reader_name: str = "abstract"

    def __init__(self, num_rows: int, dim: int, dtype: np.dtype, *, path: str | os.PathLike | None = None,
                 row_map: Callable[[np.ndarray], np.ndarray] | None = None):
        self.num_rows, self.dim, self.dtype = num_rows, dim, np.dtype(dtype)
        self.row_bytes = dim * self.dtype.itemsize
        self.path = os.fspath(path) if path is not None else "<memory>"
        self.row_map = row_map
        self.counters = IOCounters()
        self.path_info: dict = {"reader": self.reader_name}  # recorded in run records: which path ran
        self.row_checksums: np.ndarray | None = None  # one per row of the file: reads are verified
        self.checksum_state = "off"  # what the record says: verified, verified on load, off, absent, ...

    def verify_with(self, row_checksums: np.ndarray | None) -> "FeatureStore":
        """Verify every row read against `row_checksums` (None: stop verifying)."""
        self.row_checksums = row_checksums
        self.checksum_state = "verified" if row_checksums is not None else "off"
        return self

    def read_rows(self, ids: np.ndarray, out: np.ndarray | None = None, *,
                  counters: IOCounters | None = None) -> np.ndarray:
        """Rows of `ids` in the order given; `out` is (len(ids), dim) of the store's dtype.
        `counters`: where this read is counted (default: the store's own); a read-ahead counts
        into its own and adds them to the store's when its rows are used, so a batch's counts
        do not depend on how far a background read has got."""
        t0 = time.perf_counter()
        asked = ids
        ids = self.check_ids(ids)
        out = self.check_out(out, len(ids))
        distinct = io_ops = nbytes = 0
        if len(ids):
            distinct, io_ops, nbytes = self._read(ids, out)
            if self.row_checksums is not None:
                from lsm_gnn.datasets.checksums import check_rows

                check_rows(self.path, out, ids, self.row_checksums, self.row_bytes,
                           names=np.asarray(asked) if self.row_map is not None else None)
        c = self.counters if counters is None else counters
        c.rows_requested += len(ids)
        c.distinct_rows += distinct
        c.io_ops += io_ops
        c.bytes_read += nbytes
        c.useful_bytes += distinct * self.row_bytes
        c.batches += 1
        c.seconds += time.perf_counter() - t0
        return out

    def _read(self, ids: np.ndarray, out: np.ndarray) -> tuple[int, int, int]:
        """Fill `out[i]` with row `ids[i]` (valid int64 ids); return (distinct rows, I/O ops, bytes read)."""
        raise NotImplementedError(f"{type(self).__name__} must implement _read or read_rows")

    # ---- validation shared by every reader ------------------------------------------------
    def check_ids(self, ids) -> np.ndarray:
        """ids as a 1-D int64 array of local rows, after the row map; InputError if invalid."""
        arr = np.asarray(ids)
        if arr.ndim != 1:
            raise InputError(f"{self.path}: ids must be a 1-D array, found shape {arr.shape}")
        if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
            raise InputError(f"{self.path}: ids must be integers, found dtype {arr.dtype}")
        if arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
            raise InputError(f"{self.path}: id {int(arr.max())} out of range [0, {self.num_rows})")
        arr = arr.astype(np.int64, copy=False)
        if self.row_map is not None and arr.size:
            arr = np.asarray(self.row_map(arr), dtype=np.int64)
        if arr.size:
            lo, hi = int(arr.min()), int(arr.max())
            if lo < 0 or hi >= self.num_rows:
                bad = lo if lo < 0 else hi
                pos = int(np.flatnonzero(arr == bad)[0])
                raise InputError(f"{self.path}: row {bad} (at position {pos}) out of range "
                                 f"[0, {self.num_rows})")
        return arr

    def empty_rows(self, n: int) -> np.ndarray:
        """An (n, dim) output buffer, page-aligned so that readers can read straight into it."""
        return aligned_empty((n, self.dim), self.dtype)

    def check_out(self, out, n: int) -> np.ndarray:
        if out is None:
            return self.empty_rows(n)
        if not isinstance(out, np.ndarray):
            raise InputError(f"{self.path}: out must be a numpy array, found {type(out).__name__}")
        if out.dtype != self.dtype:
            raise InputError(f"{self.path}: out has dtype {out.dtype}, the store's rows are {self.dtype}")
        if out.shape != (n, self.dim):
            raise InputError(f"{self.path}: out has shape {out.shape}, expected {(n, self.dim)}")
        if not out.flags.writeable:
            raise InputError(f"{self.path}: out is read-only")
        return out

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, rows={self.num_rows}, dim={self.dim}, {self.path_info})"

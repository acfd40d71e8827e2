"""The feature-store interface every reader implements (direct, buffered, mmap, memory, GPU).

A store reads the rows of given ids (any order, duplicates allowed) into a caller's buffer and
counts exactly what it did: rows requested, distinct rows, I/O operations, bytes read from storage
(read amplification included) and time.

`FeatureStore.read_rows` validates the ids and the output buffer once for every reader, then
calls the reader's `_read(ids, out)`, which fills `out` and reports (distinct rows, I/O
operations, bytes read from storage), and, where the store was given the file's row checksums
(`row_checksums`, set by `open_feature_store`), verifies every row read against its checksum: a
row that differs is a DataError naming the file and the row (lsm_gnn.datasets.checksums).

Read plans, which the block readers share (direct, gpu; mmap counts its pages with them): which
storage blocks a set of rows needs, merged into as few reads as possible. A plan turns sorted
distinct row ids into I/O operations over whole blocks (4 KiB by default): each block is read once
even if several requested rows share it (read amplification when rows are smaller than a block),
adjacent blocks are merged into one read up to `max_io_bytes`, and the blocks are packed back to
back in a staging buffer so that every row can be gathered out of it. The plan is pure arithmetic
(no I/O), which is what makes the accounting exact and testable.
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


# ---- read plans: the blocks a set of rows needs, merged into reads ---------------------------------
@dataclass(frozen=True)
class ReadPlan:
    file_offsets: np.ndarray  # int64 byte offset in the file of each read
    lengths: np.ndarray       # int64 bytes of each read (whole blocks)
    buf_offsets: np.ndarray   # int64 byte offset in the staging buffer of each read
    row_pos: np.ndarray       # int64 byte offset in the staging buffer of each distinct row
    total_bytes: int          # staging bytes = bytes read from storage
    blocks: int               # distinct blocks

    @property
    def io_ops(self) -> int:
        return len(self.lengths)


def row_blocks(rows: np.ndarray, row_stride: int, row_bytes: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """First and last block (inclusive) holding each row."""
    start = rows * row_stride
    return start // block, (start + row_bytes - 1) // block


def distinct_blocks(rows_sorted: np.ndarray, row_stride: int, row_bytes: int, block: int) -> np.ndarray:
    """The sorted distinct blocks that hold the given sorted distinct rows."""
    if len(rows_sorted) == 0:
        return np.empty(0, np.int64)
    first, last = row_blocks(rows_sorted, row_stride, row_bytes, block)
    span = last - first + 1
    if int(span.max()) == 1:
        blocks = first
    else:  # rows longer than a block, or straddling one: expand each row's block range
        rep = np.repeat(first - np.cumsum(span) + span, span)
        blocks = rep + np.arange(int(span.sum()), dtype=np.int64)
    # rows are sorted, so blocks are non-decreasing; duplicates are shared blocks
    keep = np.empty(len(blocks), bool)
    keep[0] = True
    np.not_equal(blocks[1:], blocks[:-1], out=keep[1:])
    return blocks[keep]


def plan_reads(rows_sorted: np.ndarray, row_stride: int, row_bytes: int, block: int = 4096,
               max_io_bytes: int = 1 << 20) -> ReadPlan:
    """Plan the block reads for sorted distinct `rows_sorted` (int64)."""
    rows_sorted = np.asarray(rows_sorted, dtype=np.int64)
    blocks = distinct_blocks(rows_sorted, row_stride, row_bytes, block)
    nb = len(blocks)
    if nb == 0:
        z = np.empty(0, np.int64)
        return ReadPlan(z, z, z, z, 0, 0)
    max_blocks = max(1, max_io_bytes // block)
    idx = np.arange(nb, dtype=np.int64)
    new_run = np.empty(nb, bool)
    new_run[0] = True
    np.not_equal(np.diff(blocks), 1, out=new_run[1:])
    if max_blocks < nb:  # split long runs into reads of at most max_io_bytes
        run_start = np.maximum.accumulate(np.where(new_run, idx, 0))
        new_run |= (idx - run_start) % max_blocks == 0
    starts = np.flatnonzero(new_run)
    ends = np.append(starts[1:], nb)
    first, _ = row_blocks(rows_sorted, row_stride, row_bytes, block)
    row_pos = np.searchsorted(blocks, first) * block + (rows_sorted * row_stride - first * block)
    return ReadPlan(file_offsets=blocks[starts] * block, lengths=(ends - starts) * block,
                    buf_offsets=starts * block, row_pos=row_pos, total_bytes=nb * block, blocks=nb)

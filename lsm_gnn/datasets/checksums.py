"""Per-row checksums of features.bin: one xxh3_64 per row, so a read can be verified row by row.

The checksum block is the row (its `row_bytes`, padding excluded): every read fetches whole rows,
a row is the smallest unit a cache line holds, and a mismatch names the row. xxh3_64 (Cyan4973/xxHash)
is the fastest well-kept hash available here: the pinned `xxhash` package hashed 7 GB/s in 4 KiB rows
(about 0.6 us per row, the Python call included), where zlib.crc32 managed 0.45 GB/s
(docs/dataset-format.md, "Row checksums"). It detects corruption, not tampering.

A batch of rows is hashed and checked in one compiled call that holds no GIL (lsm_gnn/utils/xxh3.py,
bit-identical to the `xxhash` package): one `xxhash` call per row from a Python loop held the GIL
for every row (about 13 ms an iteration of ~21k missed rows on the H200 host), so the fetch
thread's checks stalled the trainer's thread. `row_checksums_per_call` keeps that loop: the
reference on a big-endian host (the kernel reads little-endian words natively) and the baseline
`lsm-gnn bench checksums` measures the kernel against.

Stored in `features.xxh3.npy` (uint64, one per row, in row order) beside features.bin; owner files
(`owners-G/owner-o.bin`) hold the same rows, so their checksums are a strided view of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xxhash

from lsm_gnn.datasets.spec import CHECKSUM_FILE, HASH_CHUNK
from lsm_gnn.utils import xxh3
from lsm_gnn.utils.atomic import atomic_path
from lsm_gnn.utils.errors import DataError

ALGORITHM = "xxh3_64"
_hash = xxhash.xxh3_64_intdigest


def _row_bytes_view(rows: np.ndarray, row_bytes: int) -> tuple[np.ndarray, int, int]:
    """(the rows' bytes as one flat C-contiguous uint8 array, the row stride in bytes, rows)."""
    a = np.ascontiguousarray(rows)
    n = a.shape[0] if a.ndim else 0
    stride = a.nbytes // n if n else 0
    if n and row_bytes > stride:
        raise ValueError(f"row_bytes {row_bytes} exceed the {stride} bytes of each row")
    return a.reshape(-1).view(np.uint8), stride, n


def row_checksums(rows: np.ndarray, row_bytes: int) -> np.ndarray:
    """uint64 xxh3_64 of the first `row_bytes` bytes of each row of a 2-D array (any dtype; a
    row of the array may be longer, e.g. padded to the file's row stride), in one GIL-free call."""
    flat, stride, n = _row_bytes_view(rows, row_bytes)
    if not xxh3.NATIVE:
        return row_checksums_per_call(rows, row_bytes)
    out = np.empty(n, np.uint64)
    if n:
        xxh3.hash_rows(flat, stride, row_bytes, out)
    return out


def row_checksums_per_call(rows: np.ndarray, row_bytes: int) -> np.ndarray:
    """`row_checksums` as one `xxhash` call per row from Python (holding the GIL for each row): the
    reference and the benchmark's baseline."""
    flat, stride, n = _row_bytes_view(rows, row_bytes)
    mv = memoryview(flat)
    return np.array([_hash(mv[s: s + row_bytes]) for s in range(0, n * stride, stride)], dtype=np.uint64)


def check_rows(path, rows: np.ndarray, rows_in_file: np.ndarray, checksums: np.ndarray, row_bytes: int,
               names: np.ndarray | None = None) -> None:
    """DataError naming the file and the first row whose bytes differ from its checksum.

    `rows[i]` was read from row `rows_in_file[i]` of `path`; `checksums` holds the file's rows'
    checksums; `names[i]` (global node ids, where the file is an owner's) is what the error calls
    the row when it differs from the file's row number. The rows are hashed and compared in one
    GIL-free call (`xxh3.verify_rows`); only a failure comes back to Python for the message."""
    rows_in_file = np.asarray(rows_in_file, dtype=np.int64)
    sums = np.asarray(checksums)  # a memory-mapped file or a strided owner's view, never copied
    flat, stride, n = _row_bytes_view(rows, row_bytes)
    if n != rows_in_file.size:
        raise ValueError(f"{n} rows but {rows_in_file.size} row numbers")
    if n and (rows_in_file.min() < 0 or rows_in_file.max() >= sums.shape[0]):
        raise ValueError(f"row numbers outside the {sums.shape[0]} checksums of {path}")
    if not n:
        return
    if xxh3.NATIVE:
        got = np.empty(n, np.uint64)
        if xxh3.verify_rows(flat, stride, row_bytes, sums, rows_in_file, got) < 0:
            return
    else:
        got = row_checksums_per_call(rows, row_bytes)
    want = sums[rows_in_file]
    bad = np.flatnonzero(got != want)
    if bad.size:
        i = int(bad[0])
        row = int(rows_in_file[i])
        who = f"row {row}" if names is None or int(names[i]) == row else f"row {row} (node {int(names[i])})"
        more = f"; {bad.size} rows of this read differ" if bad.size > 1 else ""
        raise DataError(path, f"{who} fails its {ALGORITHM} checksum ({CHECKSUM_FILE}): the file changed "
                        f"or is corrupt{more}; `lsm-gnn dataset verify` checks every row",
                        expected=f"{int(want[i]):016x}", found=f"{int(got[i]):016x}")


IDENTITY_ROWS = 64
"""Rows whose checksums make a dataset's identity (`identity`): spread evenly over the file."""


def identity_rows(num_rows: int) -> np.ndarray:
    """The rows `identity` samples: up to IDENTITY_ROWS, evenly spread, first and last included."""
    if num_rows <= 0:
        return np.zeros(0, np.int64)
    return np.unique(np.linspace(0, num_rows - 1, min(num_rows, IDENTITY_ROWS)).astype(np.int64))


def identity(sums: np.ndarray) -> str:
    """The dataset's identity: xxh3_64 over its row count and the checksums of `identity_rows`,
    16 hex digits. Written into metadata.json (features.checksums.identity) when the dataset is
    committed, checked when it is opened: a feature file and its checksum file swapped in together
    from another dataset agree with each other, but not with this metadata."""
    n = int(len(sums))
    picked = np.asarray(sums[identity_rows(n)], dtype=np.uint64)
    return f"{xxhash.xxh3_64_intdigest(np.int64(n).tobytes() + picked.tobytes()):016x}"


def file_checksums(path: str | os.PathLike, num_rows: int, row_stride: int, row_bytes: int,
                   progress: bool = False) -> np.ndarray:
    """Checksums of every row of a feature file, read sequentially in 16 MiB chunks."""
    from tqdm import tqdm

    out = np.empty(num_rows, np.uint64)
    per = max(1, HASH_CHUNK // row_stride)
    with open(path, "rb") as fh, tqdm(total=num_rows, unit="rows", desc="row checksums",
                                      disable=not progress) as bar:
        for start in range(0, num_rows, per):
            k = min(per, num_rows - start)
            buf = fh.read(k * row_stride)
            if len(buf) < k * row_stride:
                raise DataError(path, f"file ends in row {start + len(buf) // row_stride}",
                                expected=f"{num_rows} rows", found=f"{start + len(buf) // row_stride}")
            out[start: start + k] = row_checksums(np.frombuffer(buf, np.uint8).reshape(k, row_stride), row_bytes)
            bar.update(k)
    return out


def save(path: str | os.PathLike, checksums: np.ndarray) -> None:
    """Write the checksum file atomically."""
    with atomic_path(path, suffix=".npy") as tmp:
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(checksums, dtype=np.uint64))


def load(path: Path) -> np.ndarray:
    """The checksums, memory-mapped (opening costs a header read)."""
    return np.load(path, mmap_mode="r")

"""Per-row checksums of features.bin: one xxh3_64 per row, so a read can be verified row by row.

The checksum block is the row (its `row_bytes`, padding excluded): every read fetches whole rows,
a row is the smallest unit a cache line holds, and a mismatch names the row. xxh3_64 (the pinned
`xxhash` package, Cyan4973/xxHash) is the fastest well-kept hash available here: on this machine
it hashed 7 GB/s in 4 KiB rows (about 0.6 us per row, the Python call included), where zlib.crc32
managed 0.45 GB/s (docs/dataset-format.md, "Row checksums"). It detects corruption, not tampering.

Stored in `features.xxh3.npy` (uint64, one per row, in row order) beside features.bin; owner files
(`owners-G/owner-o.bin`) hold the same rows, so their checksums are a strided view of it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xxhash

from lsm_gnn.datasets.spec import CHECKSUM_FILE, HASH_CHUNK
from lsm_gnn.utils.atomic import atomic_path
from lsm_gnn.utils.errors import DataError

ALGORITHM = "xxh3_64"
_hash = xxhash.xxh3_64_intdigest


def row_checksums(rows: np.ndarray, row_bytes: int) -> np.ndarray:
    """uint64 xxh3_64 of the first `row_bytes` bytes of each row of a 2-D array (any dtype; a
    row of the array may be longer, e.g. padded to the file's row stride)."""
    a = np.ascontiguousarray(rows)
    n = a.shape[0] if a.ndim else 0
    if n == 0:
        return np.zeros(0, np.uint64)
    stride = a.nbytes // n
    if row_bytes > stride:
        raise ValueError(f"row_bytes {row_bytes} exceed the {stride} bytes of each row")
    mv = memoryview(a.reshape(-1).view(np.uint8))
    return np.array([_hash(mv[s: s + row_bytes]) for s in range(0, n * stride, stride)], dtype=np.uint64)


def check_rows(path, rows: np.ndarray, rows_in_file: np.ndarray, checksums: np.ndarray, row_bytes: int,
               names: np.ndarray | None = None) -> None:
    """DataError naming the file and the first row whose bytes differ from its checksum.

    `rows[i]` was read from row `rows_in_file[i]` of `path`; `checksums` holds the file's rows'
    checksums; `names[i]` (global node ids, where the file is an owner's) is what the error calls
    the row when it differs from the file's row number."""
    got = row_checksums(rows, row_bytes)
    want = np.asarray(checksums[rows_in_file])
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

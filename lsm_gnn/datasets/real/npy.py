"""Layout-tolerant array files: real `.npy` or headerless raw memmaps with a `.npy` suffix.

IGB large/full ship `node_feat.npy` and the label files as raw float32 bytes without the
`\\x93NUMPY` header (np.load fails on them). `open_array` looks at the first bytes: with the
magic it trusts the header (and checks the file holds exactly the bytes it announces, so a
truncated download is caught); without it the caller must say the dtype and row shape, and the
row count is the file length divided by the row bytes, which must divide evenly.

Nothing is read into memory: every array returned is a read-only memmap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lsm_gnn.datasets.spec import read_npy_header
from lsm_gnn.utils.errors import DataError

MAGIC = b"\x93NUMPY"


@dataclass(frozen=True)
class ArrayInfo:
    path: Path
    shape: tuple
    dtype: np.dtype
    fortran_order: bool
    offset: int          # bytes before the data (0 for headerless files)
    headerless: bool


def inspect(path: str | os.PathLike, *, dtype=None, row_shape: tuple | None = None) -> ArrayInfo:
    """Shape, dtype and data offset of `path`; `dtype`/`row_shape` describe a headerless file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "missing file")
    nbytes = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(len(MAGIC))
        if head == MAGIC:
            f.seek(0)
            shape, fortran, dt, offset = read_npy_header(f, path, "corrupt .npy header")
            if dt.hasobject:
                raise DataError(path, "holds pickled Python objects (for example an id-mapping dict), "
                                "not a numeric array that can be memory-mapped")
            expected = offset + int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            if nbytes != expected:
                what = "truncated" if nbytes < expected else "has trailing bytes"
                raise DataError(path, f"{what}: the .npy header announces shape {tuple(shape)} of {dt} "
                                f"after a {offset}-byte header", expected=f"{expected} bytes",
                                found=f"{nbytes} bytes")
            return ArrayInfo(path, tuple(shape), dt, bool(fortran), offset, False)
    if dtype is None or row_shape is None:
        raise DataError(path, "no .npy header (\\x93NUMPY magic missing) and no raw layout is known "
                        "for this file")
    dt = np.dtype(dtype)
    row_bytes = int(np.prod(row_shape, dtype=np.int64)) * dt.itemsize
    if nbytes % row_bytes:
        raise DataError(path, f"headerless file is not a whole number of rows of {tuple(row_shape)} {dt} "
                        f"({row_bytes} bytes per row); truncated or wrong layout",
                        expected=f"a multiple of {row_bytes} bytes", found=f"{nbytes} bytes")
    return ArrayInfo(path, (nbytes // row_bytes, *row_shape), dt, False, 0, True)


def open_array(path: str | os.PathLike, *, dtype=None, row_shape: tuple | None = None) -> np.ndarray:
    """A read-only memmap of `path` (header or headerless; see `inspect`)."""
    info = inspect(path, dtype=dtype, row_shape=row_shape)
    if int(np.prod(info.shape, dtype=np.int64)) == 0:
        return np.zeros(info.shape, dtype=info.dtype)
    return np.memmap(info.path, dtype=info.dtype, mode="r", offset=info.offset, shape=info.shape,
                     order="F" if info.fortran_order else "C")


def check_rows(arr: np.ndarray, path, *, dim: int | None = None, rows: int | None = None,
               max_rows: int | None = None, kinds: str = "fiu") -> None:
    """Raise DataError unless `arr` has the expected dtype kind, row width and row count."""
    if arr.dtype.kind not in kinds:
        raise DataError(path, "unexpected dtype", expected=f"kind in {kinds!r}", found=arr.dtype)
    if dim is not None and (arr.ndim != 2 or arr.shape[1] != dim):
        raise DataError(path, "unexpected shape", expected=f"(N, {dim})", found=arr.shape)
    if rows is not None and arr.shape[0] != rows:
        raise DataError(path, "unexpected row count", expected=rows, found=arr.shape[0])
    if max_rows is not None and arr.shape[0] > max_rows:
        raise DataError(path, "more rows than nodes", expected=f"at most {max_rows}", found=arr.shape[0])


class EdgeArray:
    """Edges stored (E, 2) (IGB: rows are edges) or (2, E) (OGB: rows are src, dst).

    `layout` is what the dataset documents; a file in the other layout is accepted when its shape
    says so unambiguously (a (2, 2) file is read in the documented layout).
    """

    def __init__(self, path: str | os.PathLike, layout: str):
        if layout not in ("E2", "2E"):
            raise ValueError(f"layout must be 'E2' or '2E', not {layout!r}")
        self.path = Path(path)
        arr = open_array(self.path, dtype=np.int64, row_shape=(2,))
        if arr.ndim != 2 or 2 not in arr.shape:
            raise DataError(self.path, "edge array must be (E, 2) or (2, E)", found=f"shape {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise DataError(self.path, "edge array must hold integers", found=arr.dtype)
        if arr.shape == (2, 2):
            self.layout = layout
        else:
            self.layout = "E2" if arr.shape[1] == 2 else "2E"
        self.arr = arr
        self.num_edges = int(arr.shape[0] if self.layout == "E2" else arr.shape[1])

    def chunk(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of edges lo..hi-1 as int64 arrays."""
        if self.layout == "E2":
            block = np.asarray(self.arr[lo:hi])
            return block[:, 0].astype(np.int64), block[:, 1].astype(np.int64)
        return (np.asarray(self.arr[0, lo:hi]).astype(np.int64),
                np.asarray(self.arr[1, lo:hi]).astype(np.int64))

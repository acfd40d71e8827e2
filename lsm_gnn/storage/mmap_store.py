"""The mmap reader: a numpy memmap gather, what DGL's mmap-based loaders do.

The kernel reads the pages the gather touches (page faults, with its own readahead), so the
accounting counts what the gather can be held to exactly: one I/O operation per distinct 4 KiB
page that holds a requested row, and those pages' bytes. Actual device traffic may be higher
(fault-around and readahead) or lower (pages already cached).
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from lsm_gnn.storage.base import FeatureStore, distinct_blocks
from lsm_gnn.utils.errors import DataError

PAGE = mmap.PAGESIZE


class MmapStore(FeatureStore):
    reader_name = "mmap"

    def __init__(self, path, num_rows: int, dim: int, dtype, row_stride: int, file_bytes: int | None = None,
                 *, row_map=None, advice: str = "normal"):
        super().__init__(num_rows, dim, dtype, path=path, row_map=row_map)
        self.row_stride = row_stride
        need = num_rows * row_stride if file_bytes is None else file_bytes
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            raise DataError(self.path, "feature file does not exist") from None
        except OSError as e:
            raise DataError(self.path, f"cannot open feature file: {e.strerror}") from None
        if size < need:
            raise DataError(self.path, "file is shorter than its metadata says", expected=f"{need} bytes",
                            found=f"{size} bytes")
        try:
            raw = np.memmap(self.path, dtype=np.uint8, mode="r", shape=(max(num_rows * row_stride, 1),))
        except OSError as e:
            raise DataError(self.path, f"cannot map feature file: {e.strerror}") from None
        self._raw = raw
        # "random" (MADV_RANDOM) turns kernel readahead off: under a small page-cache cap,
        # readahead of neighbouring pages evicts the rows being gathered and the loader thrashes
        if advice not in ("normal", "random"):
            raise ValueError(f"advice must be 'normal' or 'random', found {advice!r}")
        if advice == "random" and getattr(raw, "_mmap", None) is not None and hasattr(mmap, "MADV_RANDOM"):
            raw._mmap.madvise(mmap.MADV_RANDOM)
        self.rows = np.lib.stride_tricks.as_strided(
            raw[: num_rows * row_stride].view(self.dtype) if num_rows else raw[:0].view(np.uint8),
            shape=(num_rows, dim), strides=(row_stride, self.dtype.itemsize), writeable=False)
        self.path_info = {"reader": "mmap", "backend": "page-faults", "file": self.path, "madvise": advice}

    def _read(self, ids, out):
        uniq = np.unique(ids)
        if self.rows.flags.c_contiguous:
            np.take(self.rows, ids, axis=0, out=out)
        else:  # padded rows: fancy indexing walks the strided map without copying it first
            out[...] = self.rows[ids]
        pages = len(distinct_blocks(uniq, self.row_stride, self.row_bytes, PAGE))
        return len(uniq), pages, pages * PAGE

    def close(self) -> None:
        self.rows = self._raw = None  # the mapping goes when the last view of it does

"""The memory reader: every feature row in RAM (the ideal every storage path is compared with)."""

from __future__ import annotations

import time

import numpy as np

from lsm_gnn.storage.base import FeatureStore
from lsm_gnn.utils.errors import InputError


class MemoryStore(FeatureStore):
    """Rows held in a (num_rows, dim) array; no storage I/O (io_ops and bytes_read stay 0)."""

    reader_name = "memory"

    def __init__(self, features: np.ndarray, *, path=None, row_map=None):
        features = np.asarray(features)
        if features.ndim != 2:
            raise InputError(f"features must be a 2-D array, found shape {features.shape}")
        super().__init__(features.shape[0], features.shape[1], features.dtype, path=path, row_map=row_map)
        self.features = np.ascontiguousarray(features)
        self.path_info = {"reader": "memory", "backend": "ram", "bytes": int(self.features.nbytes)}

    @classmethod
    def load(cls, layout, *, row_map=None, row_checksums=None, **_) -> "MemoryStore":
        """Read a whole feature file into RAM (one sequential pass through the dataset's layout),
        every row checked against `row_checksums` (when given) as it is read."""
        from lsm_gnn.storage.buffered import BufferedStore
        from lsm_gnn.storage.direct import DirectStore
        from lsm_gnn.utils.errors import DataError

        args = (layout.path, layout.num_rows, layout.dim, layout.dtype, layout.row_stride, layout.file_bytes)
        try:  # O_DIRECT keeps the page cache out of it; buffered where the filesystem lacks O_DIRECT
            src = DirectStore(*args, max_io_bytes=8 << 20)
        except DataError as e:
            if "O_DIRECT" not in str(e):
                raise
            src = BufferedStore(*args, max_io_bytes=8 << 20)
        src.verify_with(row_checksums)
        with src:
            feats = np.empty((layout.num_rows, layout.dim), layout.dtype)
            step = max(1, (64 << 20) // max(layout.row_stride, 1))
            for s in range(0, layout.num_rows, step):
                src.read_rows(np.arange(s, min(s + step, layout.num_rows)), out=feats[s: s + step])
        store = cls(feats, path=layout.path, row_map=row_map)
        store.checksum_state = "verified on load" if row_checksums is not None else "off"
        return store

    def _read(self, ids, out):
        np.take(self.features, ids, axis=0, out=out)
        return len(np.unique(ids)), 0, 0

    def read_in_place(self, ids, counters=None) -> np.ndarray:
        """The rows of `features` that hold `ids` (after the row map), for a reader of the array in
        place (a GPU kernel over it mapped as pinned memory: lsm_gnn.sources.cached_device), checked
        and counted as `read_rows` counts them, nothing copied."""
        t0 = time.perf_counter()
        rows = self.check_ids(ids)
        distinct = len(np.unique(rows)) if len(rows) else 0
        c = self.counters if counters is None else counters
        c.rows_requested += len(rows)
        c.distinct_rows += distinct
        c.useful_bytes += distinct * self.row_bytes
        c.batches += 1
        c.seconds += time.perf_counter() - t0
        return rows

"""The plain storage loader: every request read from a FeatureStore, no cache."""

from __future__ import annotations

import numpy as np

from lsm_gnn.cache.budget import device_memory
from lsm_gnn.cache.rowpool import OutputRows
from lsm_gnn.contract import FeatureSource, TierCounters, check_feature_ids


class StoreFeatureSource(FeatureSource):
    """Every request read from a FeatureStore (no cache): the plain storage loader. With a
    `heartbeat` (lsm_gnn.multidevice.health), every fetch stamps the rank's progress. The store
    checks the ids (and maps them to an owner file's rows); `close()` closes it.
    `feature_bytes`: the bytes of the whole feature file (default: the store's), for memory()."""

    fetch_stage = "fetch_storage"

    def __init__(self, store, heartbeat=None, *, feature_bytes: int | None = None):
        self.store = store
        self.heartbeat = heartbeat
        self.counters = TierCounters()
        self.feature_bytes = int(store.num_rows * store.row_bytes if feature_bytes is None else feature_bytes)
        self._out = OutputRows(store.dim, store.dtype)

    @property
    def reuse_outputs(self) -> bool:
        """Outputs reused across batches (OutputRows, as the cache and the ideal); False: a fresh
        array per fetch (what a page-cache cap's accounting of new memory needs)."""
        return self._out is not None

    @reuse_outputs.setter
    def reuse_outputs(self, on: bool) -> None:
        self._out = OutputRows(self.store.dim, self.store.dtype) if on else None

    def check_ids(self, ids, what: str = "ids") -> np.ndarray:
        arr = check_feature_ids(ids, None, what)
        self.store.check_ids(arr)  # the range (and an owner file's ownership), after the store's row map
        return arr

    def _fetch(self, ids: np.ndarray) -> np.ndarray:
        if self.heartbeat is not None:
            self.heartbeat.beat()
        rows = self.store.read_rows(ids, out=None if self._out is None else self._out.get(len(ids)))
        self.counters.requests += len(ids)
        distinct = len(np.unique(ids))
        self.counters.distinct += distinct
        self.counters.storage_rows += distinct
        return rows

    def io_counters(self):
        return self.store.counters

    def storage_info(self) -> dict:
        from lsm_gnn.storage.base import storage_description

        return storage_description(self.store)

    def memory(self) -> dict:
        """What holds rows: the memory reader its rows, mmap the page cache (uncapped: every
        row), the block readers nothing."""
        reader = self.store.reader_name
        held = self.store.num_rows * self.store.row_bytes if reader == "memory" else \
            self.feature_bytes if reader == "mmap" else 0
        return device_memory(held, 0, self.feature_bytes)

    def close(self) -> None:
        self.store.close()

"""A FeatureStore over an in-memory array, for the cache tests."""

from __future__ import annotations

import numpy as np

from lsm_gnn.storage.base import FeatureStore


class ArrayStore(FeatureStore):
    """Test store: rows of an array (a memmap of a dataset's feature file reads the real file)."""

    reader_name = "test-array"

    def __init__(self, array):
        super().__init__(array.shape[0], array.shape[1], array.dtype)
        self.array = array

    def read_rows(self, ids, out=None):
        ids = np.asarray(ids)
        self.counters.rows_requested += len(ids)
        self.counters.distinct_rows += len(np.unique(ids))
        rows = np.array(self.array[ids])
        if out is not None:
            out[...] = rows
            return out
        return rows

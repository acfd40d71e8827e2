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

    def _read(self, ids, out):
        # the base class validates, counts and fills `out`; no I/O: 0 operations, 0 bytes read
        out[...] = self.array[ids]
        return len(np.unique(ids)), 0, 0

"""The in-memory ideal: the same model and sampler with every feature row in memory.

On the host (`device=None`) it gathers rows into reused host arrays (the loader uploads them); on a
torch device (`device="cuda"`: every row in the GPU's memory, as the factory builds it when
`train.device` is cuda) it gathers there and returns device tensors, so no row crosses PCIe during
training. The first GPU call (2026-12-04, one H200) showed why: with the rows on the host, 34.6 of
the ideal's 39.4 ms per iteration were the host gather and the upload of 133 MB of rows. The same
torch code runs with `device="cpu"` (the contract tests)."""

from __future__ import annotations

import numpy as np
import torch

from lsm_gnn.cache.budget import device_memory
from lsm_gnn.cache.rowpool import OutputRows
from lsm_gnn.contract import FeatureSource, TierCounters
from lsm_gnn.utils.native import gather_rows


class MemoryFeatureSource(FeatureSource):
    """The ideal: every feature row already in memory."""

    def __init__(self, features: np.ndarray, device: str | torch.device | None = None):
        self.features = np.ascontiguousarray(features)   # the host rows (evaluation reads them too)
        self.num_rows = len(self.features)
        self.counters = TierCounters()
        self._out = None
        self.rows = None
        if device is not None:
            self.device = torch.device(device)
            self.rows = torch.from_numpy(self.features).to(self.device)

    def _fetch(self, ids: np.ndarray):
        f = self.features
        self.counters.requests += len(ids)
        self.counters.distinct += len(np.unique(ids))
        self.counters.local_hits += len(ids)
        if self.rows is not None:
            return self.rows.index_select(0, torch.from_numpy(ids).to(self.device))
        if not (len(ids) and f.ndim == 2 and f.flags.c_contiguous):
            return f[ids]
        # the same memcpy row gather and reused outputs as the cache: the ideal is not handicapped
        if self._out is None:
            self._out = OutputRows(f.shape[1], f.dtype)
        out = self._out.get(len(ids))
        gather_rows(f.view(np.uint8).reshape(len(f), -1), ids, out.view(np.uint8).reshape(len(ids), -1))
        return out

    def memory(self) -> dict:
        """Every feature row on the device."""
        return device_memory(self.features.nbytes, 0, self.features.nbytes)

"""Static: evict the lowest PageRank byte (the paper's static policy)."""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.policies.base import EvictionPolicy, lowest_pagerank


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(ps, si, base, ways, t, window, pagerank, tag):
    """Minimum of the packed key (PageRank, way): branch-free int32 arithmetic LLVM vectorizes
    (ways < 2048, so the way fits in the low 11 bits)."""
    pr_ = pagerank[base: base + ways]
    best = np.int32(1 << 30)
    for w in range(ways):
        best = min(best, (np.int32(pr_[w]) << np.int32(11)) | np.int32(w))
    return np.int64(best & 2047)


class Static(EvictionPolicy):
    name, uses_static = "static", True
    description = "lowest PageRank byte"
    kernels = {"victim": kernel_victim}

    def victim(self, state, lines, t, window):
        return lowest_pagerank(lines, range(len(lines)))

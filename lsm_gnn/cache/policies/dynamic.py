"""Dynamic: evict the farthest next reuse in the window (the paper's dynamic policy)."""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.policies.base import EvictionPolicy, effective
from lsm_gnn.cache.window import NO_REUSE


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(ps, si, base, ways, t, window, pagerank, tag):
    """Max effective tag, lowest way: the minimum of (-(effective tag), way)."""
    tg_ = tag[base: base + ways]
    best = np.int64(1) << 62
    for w in range(ways):
        tg = np.int64(tg_[w])
        e = NO_REUSE if tg <= t else tg
        best = min(best, ((NO_REUSE - e) << 11) | w)
    return np.int64(best & 2047)


class Dynamic(EvictionPolicy):
    name, uses_window = "dynamic", True
    description = "farthest next reuse in the window (NO_REUSE > FRESH > any known reuse)"
    kernels = {"victim": kernel_victim}

    def victim(self, state, lines, t, window):
        return max(range(len(lines)), key=lambda w: (effective(lines[w].tag, t), -w))

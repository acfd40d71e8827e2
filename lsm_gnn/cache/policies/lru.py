"""LRU: evict the least recently used line; recency is the iteration of the last hit or fill."""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.policies.base import STAMP, EvictionPolicy


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_on_hit(ps, sl, now):
    """on_hit and on_fill: stamp := t + 1."""
    ps[STAMP][sl] = now


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_on_fill(ps, sl, si, base, w, now):
    ps[STAMP][sl] = now


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(ps, si, base, ways, t, window, pagerank, tag):
    st_ = ps[STAMP][base: base + ways]
    best = np.int64(1) << 62
    for w in range(ways):
        best = min(best, (st_[w] << 11) | w)
    return np.int64(best & 2047)


class LeastRecentlyUsed(EvictionPolicy):
    name = "lru"
    description = "least recently used; recency is the iteration of the last hit or fill"
    state = ("stamp",)
    kernels = {"on_hit": kernel_on_hit, "victim": kernel_victim, "on_fill": kernel_on_fill}

    def new_set_state(self, ways):
        return [0] * ways

    def on_hit(self, state, way, t):
        state[way] = t + 1

    def on_fill(self, state, way, t):
        state[way] = t + 1

    def victim(self, state, lines, t, window):
        return min(range(len(lines)), key=lambda w: (state[w], w))

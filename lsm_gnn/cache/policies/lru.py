"""LRU: evict the least recently used line; recency is the iteration of the last hit or fill."""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.policies.base import LRU, EvictionPolicy


class LeastRecentlyUsed(EvictionPolicy):
    name, code = "lru", LRU
    description = "least recently used; recency is the iteration of the last hit or fill"
    state = ("stamp",)

    def new_set_state(self, ways):
        return [0] * ways

    def on_hit(self, state, way, t):
        state[way] = t + 1

    def on_fill(self, state, way, t):
        state[way] = t + 1

    def victim(self, state, lines, t, window):
        return min(range(len(lines)), key=lambda w: (state[w], w))


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_touch(stamp, sl, now):
    """on_hit and on_fill: stamp := t + 1."""
    stamp[sl] = now


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(stamp, base, ways):
    st_ = stamp[base: base + ways]
    best = np.int64(1) << 62
    for w in range(ways):
        best = min(best, (st_[w] << 11) | w)
    return np.int64(best & 2047)

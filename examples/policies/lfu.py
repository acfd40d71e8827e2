"""LFU, least frequently used, as a policy of your own: this file and nothing in the package.

The rule: in a full set, evict the line with the fewest hits since it was filled; among lines with
as few hits, the one filled longest ago (the lowest fill iteration); among lines filled in the
same iteration, the lowest way. A hit counts once per batch (the engines look every distinct id
of a batch up once); a filled line starts at 0 hits, so a line that came in with this batch's
misses is evicted before any line that was hit since (LFU's known weakness on a shifting working
set, which is why the paper's hybrid rule reads the future window instead).

Run it (the name is `path/to/file.py:Class`, or `package.module:Class` when it is importable):

    lsm-gnn simulate DATASET --policy examples/policies/lfu.py:LFU --policy hybrid
    lsm-gnn train --devices 2 --set cache.policy=examples/policies/lfu.py:LFU

It runs on the reference engine (the Python hooks below), the CPU engine (the numba hooks), the
simulator, and the GPU engine (the CUDA hooks in `cuda_source`; without them the GPU engine
refuses the policy and says what is missing). docs/cache.md ("A policy of your own") walks
through this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.policies import EvictionPolicy, StateSlot

# the slots below, in the order declared: the numba hooks get them as ps[HITS], ps[FILLED]
HITS, FILLED = 0, 1


# ---- numba hooks (the CPU engine inlines them; signatures: lsm_gnn.cache.policies.base.KERNEL_HOOKS).
# Not cached on disk, unlike the built-in policies' hooks: numba's cache keys a function by its file
# and records the module it was compiled in, and this file may be imported under two module names
# (by its path, or as examples.policies.lfu), the one reading the other's entry fails to import it.
# The engine's kernels, which inline these hooks, are cached by the engine as for any policy.
@njit(forceinline=True, _nrt=False)
def lfu_on_hit(ps, sl, now):
    ps[HITS][sl] += 1


@njit(forceinline=True, _nrt=False)
def lfu_on_fill(ps, sl, si, base, w, now):
    ps[HITS][sl] = 0
    ps[FILLED][sl] = now  # now = t + 1: the iteration of the fill, plus one


@njit(forceinline=True, _nrt=False)
def lfu_victim(ps, si, base, ways, t, window, pagerank, tag):
    hits, filled = ps[HITS], ps[FILLED]
    best = 0
    for w in range(1, ways):  # the minimum of (hits, filled, way): ties to the older fill, then the lower way
        a, b = base + w, base + best
        if hits[a] < hits[b] or (hits[a] == hits[b] and filled[a] < filled[b]):
            best = w
    return np.int64(best)


class LFU(EvictionPolicy):
    name = "lfu"
    description = "least frequently used: fewest hits since the fill; ties to the oldest fill, then the lowest way"
    # two arrays of its own, one element per cache line, both engines allocate them
    slots = {"hits": StateSlot(np.int64, "line", 0), "filled": StateSlot(np.int64, "line", 0)}
    victim_choice = "key"  # a pure minimum over the ways: the victim hook mutates nothing
    kernels = {"on_hit": lfu_on_hit, "on_fill": lfu_on_fill, "victim": lfu_victim}
    # the same hooks for the GPU engine (signatures: lsm_gnn.cache.gpu_codegen.CUDA_HOOKS); a slot is
    # the PolicyState field <name>_<slot>. A "key" victim: the way of the least key, ties to the
    # lowest way, so the key is (hits, filled) packed in one integer (filled < 2**32 iterations)
    cuda_source = """
__device__ __forceinline__ void lfu_on_hit(PolicyState ps, long long sl, long long now) { ps.lfu_hits[sl] += 1; }

__device__ __forceinline__ void lfu_on_fill(PolicyState ps, long long sl, long long si, long long base, int w,
                                            long long now) {
    ps.lfu_hits[sl] = 0;
    ps.lfu_filled[sl] = now;
}

__device__ __forceinline__ long long lfu_victim_key(PolicyState ps, const unsigned char* pagerank, const TAG_T* tag,
                                                    long long sl, long long t, long long window) {
    return (ps.lfu_hits[sl] << 32) | ps.lfu_filled[sl];
}
"""

    # ---- the reference engine's hooks: the same rule, written to be read
    def new_set_state(self, ways):
        return {"hits": [0] * ways, "filled": [0] * ways}

    def on_hit(self, state, way, t):
        state["hits"][way] += 1

    def on_fill(self, state, way, t):
        state["hits"][way] = 0
        state["filled"][way] = t + 1

    def victim(self, state, lines, t, window):
        return min(range(len(lines)), key=lambda w: (state["hits"][w], state["filled"][w], w))

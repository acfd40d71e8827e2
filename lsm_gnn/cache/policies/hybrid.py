"""Hybrid (the paper's LSM-GNN rule) and its prefetcher order hybrid_pvp.

Lowest PageRank within the first non-empty group of: (1) no reuse in the window; (2) a known
reuse farther than W // 8; (3) filled since the last refresh (FRESH); (4) all ways. With the
victim buffer on, hybrid runs as hybrid_pvp, which takes group (2) first: those lines are
spilled and prefetched back (as the paper's code does).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from lsm_gnn.cache.policies.base import EvictionPolicy, effective, lowest_pagerank
from lsm_gnn.cache.window import FRESH, NO_REUSE


@njit(cache=True, forceinline=True, _nrt=False)
def ranked_victim(w_none, w_far, pagerank, tag, base, ways, t, window):
    """Min over ways of (case rank, PageRank, way): the same as the four cases in order, since
    case 4 ("all") only decides when cases 1-3 are empty. rank = 3 - w_none * none - w_far * far
    - fresh: hybrid (w_none 3, w_far 2) none 0, far 1, fresh 2, near 3; hybrid_pvp (2, 3) far 0,
    none 1, fresh 2, near 3."""
    tg_ = tag[base: base + ways]
    pr_ = pagerank[base: base + ways]
    t32 = np.int32(t)
    lim = np.int32(t + 1 + window // 8)  # known reuse r = tag - t - 1 > W // 8 <=> tag > lim
    w_none, w_far = np.int32(w_none), np.int32(w_far)
    no_reuse, fresh_tag = np.int32(NO_REUSE), np.int32(FRESH)
    best = np.int32(1 << 30)
    for w in range(ways):
        tg = tg_[w]
        none = np.int32((tg == no_reuse) | (tg <= t32))
        far = np.int32((tg > lim) & (tg < fresh_tag))
        fresh = np.int32(tg == fresh_tag)
        rank = np.int32(3) - w_none * none - w_far * far - fresh
        best = min(best, (rank << np.int32(19)) | (np.int32(pr_[w]) << np.int32(11)) | np.int32(w))
    return np.int64(best & 2047)


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(ps, si, base, ways, t, window, pagerank, tag):
    return ranked_victim(3, 2, pagerank, tag, base, ways, t, window)


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim_pvp(ps, si, base, ways, t, window, pagerank, tag):
    return ranked_victim(2, 3, pagerank, tag, base, ways, t, window)


class Hybrid(EvictionPolicy):
    name, uses_static, uses_window = "hybrid", True, True
    description = "lowest PageRank among: no reuse; reuse farther than W//8; fresh; all"
    case_order: ClassVar[tuple[str, ...]] = ("none", "far", "fresh", "all")
    kernels = {"victim": kernel_victim}

    def victim(self, state, lines, t, window):
        th = window // 8
        groups = {"none": [], "far": [], "fresh": [], "all": list(range(len(lines)))}
        for w, line in enumerate(lines):
            tag = effective(line.tag, t)
            if tag == NO_REUSE:
                groups["none"].append(w)
            elif tag == FRESH:
                groups["fresh"].append(w)
            elif tag - t - 1 > th:  # r = batches strictly between now and the reuse
                groups["far"].append(w)
        for case in self.case_order:
            if groups[case]:
                return lowest_pagerank(lines, groups[case])
        raise AssertionError("a full set has at least one way")


class HybridPVP(Hybrid):
    name = "hybrid_pvp"
    description = "hybrid with the prefetcher order: far reuse first (they go to the victim buffer)"
    case_order = ("far", "none", "fresh", "all")
    configurable = False
    kernels = {"victim": kernel_victim_pvp}

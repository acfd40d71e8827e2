"""Horizon: Belady's rule over a long lookahead, a PageRank predictor past it, admission control.

Beyond the paper (docs/cache.md, "Beyond the paper"). The policy reads K = cache.lookahead future
batches (not W): a resident line's tag is the **exact** first iteration in [t+1, t+K] that
requests it, refreshed every iteration, and a filled line is tagged at once (no FRESH). In a full
set it evicts, in order:

1. lines with no request inside the lookahead, the lowest PageRank byte first (the predictor: a
   row that PageRank ranks low is the one least likely to come back soon);
2. else the line whose next request is the farthest (Belady's MIN inside the lookahead).

Admission control: the miss itself is ranked the same way, and if it comes back no sooner than
the victim (a tie included) it is **not cached** (served from the read buffer, nothing evicted).
The same ranking decides the host tier when one is configured: an evicted line whose next
request is within the W victim queues' reach is spilled, everything else is dropped. By default
the policy gives the host tier no memory (host_fraction 0: the whole budget is cache lines),
because the lines it evicts rarely come back within W batches (measured in docs/cache.md).

The CPU engine keeps the lookahead as a ring of occurrence records (`cache.window.LookaheadRing`:
for every distinct id of every batch ingested, its owner-local row and the batch of its next
occurrence), so that a batch entering the lookahead costs O(its ids) and the serve of batch t reads
each id's next use in O(1); the GPU engine and the reference recompute the same tags from the K
window batches every iteration. Both give the tags of docs/cache-semantics.md §2.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.policies.base import EvictionPolicy, effective
from lsm_gnn.cache.window import FRESH, NO_REUSE

def rank(line, t: int) -> int:
    """Eviction rank (the lowest goes first): PageRank byte without a request in the lookahead,
    else 256 + (NO_REUSE - next request), so that farther requests rank lower."""
    tag = effective(line.tag, t)
    if tag in (NO_REUSE, FRESH):
        return int(line.pagerank)
    return 256 + int(NO_REUSE - tag)


# ---- kernel hooks -------------------------------------------------------------------------------
@njit(cache=True, forceinline=True, _nrt=False)
def kernel_rank(tg, pr, t):
    tg = np.int64(tg)
    known = np.int64((tg > t) & (tg < FRESH))
    return known * (256 + NO_REUSE - tg) + (1 - known) * np.int64(pr)


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(ps, si, base, ways, t, window, pagerank, tag):
    best = np.int64(1) << 62
    for w in range(ways):
        best = min(best, (kernel_rank(tag[base + w], pagerank[base + w], t) << 11) | w)
    return np.int64(best & 2047)


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_admit(ps, in_tag, in_pr, sl, t, pagerank, tag):
    return kernel_rank(in_tag, in_pr, t) > kernel_rank(tag[sl], pagerank[sl], t)


class Horizon(EvictionPolicy):
    name = "horizon"
    description = ("exact next use within K batches (Belady), PageRank past them, admission control, "
                   "the whole budget as cache lines")
    uses_static = uses_window = long_lookahead = admission = True
    host_fraction = 0.0
    kernels = {"victim": kernel_victim, "admit": kernel_admit}

    def victim(self, state, lines, t, window):
        return min(range(len(lines)), key=lambda w: (rank(lines[w], t), w))

    def admit(self, state, lines, way, incoming, t):
        return rank(incoming, t) > rank(lines[way], t)

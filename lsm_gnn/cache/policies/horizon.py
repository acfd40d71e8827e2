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

The CPU engine keeps the lookahead as a ring of occurrence records (`LookaheadRing`: for every
distinct id of every batch ingested, its owner-local row and the batch of its next occurrence),
so that a batch entering the lookahead costs O(its ids) and the serve of batch t reads each id's
next use in O(1); the GPU engine and the reference recompute the same tags from the K window
batches every iteration. Both give the tags of docs/cache-semantics.md §2.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.policies.base import EvictionPolicy, effective
from lsm_gnn.cache.window import FRESH, NO_REUSE, ROW_SLOT
from lsm_gnn.ownership import local_row_of_id

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


# ---- the CPU engine's lookahead ring ------------------------------------------------------------
# meta: [batches ingested (the next batch to ingest), first live record, next record] (absolute
# record numbers; record n lives at n % capacity)
INGESTED, LO, HI = 0, 1, 2


class LookaheadRing:
    """Occurrence records of the batches in the lookahead (and the batch being served).

    Record n (absolute; stored at n % capacity): `row` (owner-local row of a distinct id of its
    batch, batches in order, ids in order of first occurrence) and `next` (the batch of that row's
    next occurrence among the batches ingested so far, NO_REUSE if none yet). Per row, `last`: its
    latest record (-1: none). `base[b % (K + 2)]`: the first record of batch b.
    """

    def __init__(self, lookahead: int, local_rows: int, capacity: int = 1024):
        self.K = int(lookahead)
        cap = max(int(capacity), 1)
        self.row = np.zeros(cap, np.int32)
        self.next = np.full(cap, NO_REUSE, np.int32)
        self.base = np.zeros(self.K + 2, np.int64)
        self.last = np.full(int(local_rows), -1, np.int64)
        self.meta = np.zeros(3, np.int64)

    @property
    def arrays(self) -> tuple:
        return (self.row, self.next, self.base, self.last, self.meta)

    @property
    def capacity(self) -> int:
        return len(self.row)

    def live(self) -> int:
        return int(self.meta[HI] - self.meta[LO])

    def ensure(self, extra: int) -> None:
        """Room for `extra` more records; grows (doubling) keeping every live record at n % cap."""
        need = self.live() + int(extra)
        if need <= self.capacity:
            return
        cap = max(need, 2 * self.capacity)
        lo, hi = int(self.meta[LO]), int(self.meta[HI])
        n = np.arange(lo, hi, dtype=np.int64)
        row, nxt = np.zeros(cap, np.int32), np.full(cap, NO_REUSE, np.int32)
        row[n % cap], nxt[n % cap] = self.row[n % self.capacity], self.next[n % self.capacity]
        self.row, self.next = row, nxt

    @property
    def nbytes(self) -> int:
        """Bytes of lookahead state the engine holds (records, batch starts, per-row last record)."""
        return int(self.row.nbytes + self.next.nbytes + self.base.nbytes + self.last.nbytes + self.meta.nbytes)


def ring_capacity(offsets: np.ndarray, lookahead: int) -> int:
    """Records a replay needs: the most ids in K + 1 consecutive batches (duplicates counted)."""
    offsets = np.asarray(offsets, np.int64)
    nb = len(offsets) - 1
    if nb <= 0:
        return 1
    ends = offsets[np.minimum(np.arange(nb) + lookahead + 1, nb)]
    return int(max((ends - offsets[:-1]).max(), 1))


@njit(cache=True, nogil=True)
def ingest(ids, e, G, K, ring, rows, tag):
    """Batch e enters the lookahead (batches enter in increasing order; skipped ones hold no
    records). Each distinct id gets a record; the row's previous live record learns that its next
    occurrence is e; a resident line without a known next use gets tag e. The caller has made
    room for len(ids) records (LookaheadRing.ensure)."""
    row, nxt, base, last, meta = ring
    cap = len(row)
    lo, hi = meta[LO], meta[HI]
    for b in range(meta[INGESTED], e + 1):
        base[b % (K + 2)] = hi
    start = hi
    for v in ids:
        r = local_row_of_id(v, G)
        p = last[r]
        if p >= start:
            continue  # a duplicate inside batch e
        if p >= lo:
            nxt[p % cap] = e
        n = hi % cap
        row[n] = r
        nxt[n] = NO_REUSE
        last[r] = hi
        hi += 1
        s = rows[r, ROW_SLOT]
        if s >= 0 and tag[s] == NO_REUSE:
            tag[s] = e
    meta[HI] = hi
    meta[INGESTED] = e + 1


@njit(cache=True, forceinline=True, _nrt=False)
def batch_records(ring, t, K):
    """(first record, number of records) of batch t, which has been ingested."""
    row, nxt, base, last, meta = ring
    start = base[t % (K + 2)]
    end = base[(t + 1) % (K + 2)] if meta[INGESTED] > t + 1 else meta[HI]
    return start, end - start

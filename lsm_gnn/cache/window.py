"""Lookahead window: per-line next-reuse tags from the next W mini-batches' requests.

A tag is the absolute iteration at which a resident line is next requested inside the window,
or one of two special values (docs/cache-semantics.md, "Reuse tags"):

* ``NO_REUSE``: no request for the line inside the window (the paper's 0xFFFF...);
* ``FRESH``: the line was filled since the last refresh, so nothing is known yet (0xFFFE...).

Tags are recomputed every ``refresh_every`` iterations, at the start of the iteration, from the
window ``batches[t+1 : t+1+W]``. Between refreshes a known tag that is ``<= t`` has expired (the
reuse it announced has happened) and is read as ``NO_REUSE`` by every rule.

A long-lookahead policy (horizon) reads K future batches instead; the CPU engine keeps them as
a ring of occurrence records (`LookaheadRing`, at the end of this module), the window's other form.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from lsm_gnn.cache.memhint import PREFETCH_DISTANCE, prefetch_record
from lsm_gnn.ownership import local_row_of_id

# Tags are int32 (iterations up to 2**31 - 3): half the bytes a 32-way victim scan reads.
TAG_DTYPE = np.int32
NO_REUSE = np.int64(np.iinfo(np.int32).max)
FRESH = np.int64(np.iinfo(np.int32).max - 1)
MAX_ITERATIONS = int(FRESH) - 1


def hybrid_threshold(window: int) -> int:
    """The hybrid policy's threshold th = W // 8 (reuses with distance r > th are 'far')."""
    return window // 8


# ---- owner-local row records -------------------------------------------------------------------
# The CPU engine keeps, per owner-local row v // G, one int32 record so that an id touches one
# cache line: the slot holding it (-1: not resident), its position in the batch being deduped,
# its position in the landing buffer, and its window mask (below).
ROW_SLOT, ROW_DPOS, ROW_LAND, ROW_MASK = 0, 1, 2, 3
ROW_FIELDS = 4


@njit(cache=True, inline="always")
def effective_tag(tag, t):
    """The tag as every rule reads it in iteration t: an expired known tag means no reuse."""
    if tag <= t:
        return NO_REUSE
    return tag


@njit(cache=True, nogil=True)
def refresh_tags(t, win_ids, win_offsets, num_owners, rows, tag, dirty, in_dirty, dirty_n):
    """Recompute every resident line's tag for iteration t.

    Equivalent to: every tag := NO_REUSE, then for k = 0..len(window)-1 and every id v of window
    batch k (iteration t+1+k) that is resident, tag := min(tag, t+1+k). Only the slots whose tag
    differs from NO_REUSE (listed in `dirty`) are reset, so a refresh costs O(window), not
    O(capacity). Scanning the window in order makes the first write the minimum.
    """
    for i in range(dirty_n[0]):
        s = dirty[i]
        tag[s] = NO_REUSE
        in_dirty[s] = 0
    dirty_n[0] = 0
    nb = len(win_offsets) - 1
    for k in range(nb):
        b = t + 1 + k
        for j in range(win_offsets[k], win_offsets[k + 1]):
            s = rows[local_row_of_id(win_ids[j], num_owners), ROW_SLOT]
            if s >= 0 and tag[s] == NO_REUSE:
                tag[s] = b
                if in_dirty[s] == 0:
                    in_dirty[s] = 1
                    dirty[dirty_n[0]] = s
                    dirty_n[0] += 1


# ---- incremental tags for a known trace (replay): identical results, O(batch) per iteration ----
# The mask of a row has bit (b % 32) set while batch b, inside the horizon [t+1, t+W], requests
# it; a resident line's tag is the first set bit after t. Only the rows of batches entering or
# leaving the horizon, and lines filled since the last refresh, can change tag, so a refresh
# touches those alone. Needs W <= MASK_WINDOW_MAX (distinct residues); larger windows rescan.
MASK_WINDOW_MAX = 31


@njit(cache=True, inline="always")
def first_reuse(m, t):
    """First batch in [t+1, t+31] whose bit is set in the 32-bit mask m, else NO_REUSE.

    Bit t itself (batch t, being served) is ignored, so it may still be set.
    """
    u = np.int64(m) & 0xFFFFFFFF  # the stored int32 is sign-extended: keep 32 bits
    r = (t + 1) % 32
    rot = ((u >> r) | (u << (32 - r))) & 0x7FFFFFFF
    if rot == 0:
        return NO_REUSE
    return np.int64(t + 1) + np.int64(trailing_zeros(rot))


@njit(cache=True, nogil=True)
def mask_update(ids, b, num_owners, rows, on, retag, t, tag):
    """Set (on) or clear the bit of batch b for every id of that batch; with `retag`, resident
    lines among them also get their tag for iteration t from the updated mask."""
    bit = np.int64(1) << np.int64(b % 32)
    keep = 0xFFFFFFFF ^ bit
    n = len(ids)
    for i in range(n):
        if i + PREFETCH_DISTANCE < n:
            prefetch_record(rows, local_row_of_id(ids[i + PREFETCH_DISTANCE], num_owners))
        v = ids[i]
        r = rows[local_row_of_id(v, num_owners)]
        m = np.int64(r[ROW_MASK]) & 0xFFFFFFFF
        m = (m | bit) if on else (m & keep)
        r[ROW_MASK] = m
        if retag and r[ROW_SLOT] >= 0:
            tag[r[ROW_SLOT]] = first_reuse(m, t)


@njit(cache=True, nogil=True)
def retag_rows(ids, t, num_owners, rows, tag):
    """Resident lines among `ids` get their tag from the masks."""
    for v in ids:
        r = rows[local_row_of_id(v, num_owners)]
        if r[ROW_SLOT] >= 0:
            tag[r[ROW_SLOT]] = first_reuse(r[ROW_MASK], t)


@njit(cache=True, nogil=True)
def retag_fresh(t, num_owners, keys, rows, tag, dirty, in_dirty, dirty_n):
    """Lines filled since the last refresh (listed in `dirty`) get their tag from the masks."""
    for i in range(dirty_n[0]):
        s = dirty[i]
        tag[s] = first_reuse(rows[local_row_of_id(keys[s], num_owners), ROW_MASK], t)
        in_dirty[s] = 0
    dirty_n[0] = 0


class LookaheadWindow:
    """The next W batches' requests, flattened once for the kernels.

    `set(batches)` replaces the window (the fetcher calls it from `advance`); `flat` is the pair
    (ids, offsets) with batch k at ids[offsets[k]:offsets[k+1]]. Batches beyond W are ignored.
    """

    def __init__(self, window: int):
        self.window = int(window)
        self.clear()

    def clear(self) -> None:
        self.ids = np.zeros(0, np.int64)
        self.offsets = np.zeros(1, np.int64)

    def set(self, batches: Sequence[np.ndarray]) -> None:
        batches = list(batches)[: self.window]
        if not batches:
            self.clear()
            return
        arrays = [np.asarray(b, dtype=np.int64).ravel() for b in batches]
        self.offsets = np.zeros(len(arrays) + 1, np.int64)
        np.cumsum([len(a) for a in arrays], out=self.offsets[1:])
        self.ids = np.concatenate(arrays)

    @property
    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        return self.ids, self.offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1


@njit(cache=True, nogil=True)
def retag_pending(pending, tag, dirty, in_dirty, dirty_n):
    """Lines filled since the last refresh take the tag prepared when they were filled."""
    for i in range(dirty_n[0]):
        s = dirty[i]
        tag[s] = pending[s]
        in_dirty[s] = 0
    dirty_n[0] = 0


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

"""Victim buffer (W queues x depth lines) and the PVP landing buffer.

A line evicted with a known, unexpired reuse tag b goes to queue ``b % W`` if that queue has room
(docs/cache-semantics.md, "Victim buffer and PVP"). At the end of iteration t the prefetcher (PVP)
moves queue ``(t+1) % W`` into the landing buffer and empties the queue; requests of iteration
t+1 that find their id there are victim hits.

The queues and the landing buffer hold ids and counts, plain arrays the kernels update in place;
on the CPU engine the row data lives in lsm_gnn.cache.rowpool, which moves a row between tiers by
moving its index, following the spill records and prefetches the engine reports.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.memhint import PREFETCH_DISTANCE, prefetch_record
from lsm_gnn.cache.window import ROW_LAND
from lsm_gnn.ownership import local_row_of_id


class VictimQueues:
    """Ids of W queues of `depth` lines each."""

    def __init__(self, window: int, depth: int):
        self.window, self.depth = int(window), int(depth)
        self.ids = np.full(max(self.window, 1) * self.depth, -1, np.int64)
        self.count = np.zeros(max(self.window, 1), np.int64)

    def queue(self, q: int) -> np.ndarray:
        """Ids currently held by queue q (a view)."""
        start = q * self.depth
        return self.ids[start: start + self.count[q]]

    def resident_ids(self) -> np.ndarray:
        return np.concatenate([self.queue(q) for q in range(self.window)]) if self.window else self.ids[:0]


class LandingBuffer:
    """Ids of the device-side copy of the next batch's victim queue."""

    def __init__(self, depth: int):
        self.ids = np.full(depth, -1, np.int64)
        self.n = np.zeros(1, np.int64)

    @property
    def current(self) -> np.ndarray:
        return self.ids[: self.n[0]]


@njit(cache=True, nogil=True)
def prefetch_queue(t, window, depth, num_owners, q_ids, q_count, land_ids, land_n, rows):
    """End of iteration t: queue (t+1) % W becomes the landing buffer; returns the queue index.

    The previous landing contents are forgotten. A row's landing position is valid only while it
    points back at the row (land_ids[pos] == v, pos < land_n), so nothing needs clearing. A line
    can sit in a queue twice (evicted, re-read from storage and evicted again before its reuse);
    the first copy is the one found.
    """
    q = (t + 1) % window
    n = q_count[q]
    start = q * depth
    for i in range(n):
        if i + PREFETCH_DISTANCE < n:
            prefetch_record(rows, local_row_of_id(q_ids[start + i + PREFETCH_DISTANCE], num_owners))
        v = q_ids[start + i]
        land_ids[i] = v
        r = rows[local_row_of_id(v, num_owners)]
        p = r[ROW_LAND]
        if not (p >= 0 and p < i and land_ids[p] == v):
            r[ROW_LAND] = i
    land_n[0] = n
    q_count[q] = 0
    return q

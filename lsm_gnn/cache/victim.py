"""Victim buffer (W queues x depth lines) and the PVP landing buffer.

A line evicted with a known, unexpired reuse tag b goes to queue ``b % W`` if that queue has room
(docs/cache-semantics.md, "Victim buffer and PVP"). At the end of iteration t the prefetcher (PVP)
moves queue ``(t+1) % W`` into the landing buffer and empties the queue; requests of iteration
t+1 that find their id there are victim hits.

On the CPU engine "pinned host memory" is `multiprocessing.shared_memory` (another process, such
as a peer rank, can attach to it by name) and the "device-side" landing buffer is a private
array. The queue ids and counts are plain arrays that the kernels update in place; the row data
is moved by the fetcher with the spill records the engine returns.
"""

from __future__ import annotations

from multiprocessing import shared_memory

import numpy as np
from numba import njit

from lsm_gnn.cache.memhint import PREFETCH_DISTANCE, prefetch_record
from lsm_gnn.cache.window import ROW_LAND


class VictimQueues:
    """Ids (and optionally row data) of W queues of `depth` lines each."""

    def __init__(self, window: int, depth: int, row_shape: tuple[int, ...] = (), dtype=np.float32):
        self.window, self.depth = int(window), int(depth)
        self.ids = np.full(max(self.window, 1) * self.depth, -1, np.int64)
        self.count = np.zeros(max(self.window, 1), np.int64)
        self._shm = None
        self.data = None
        if row_shape:
            nbytes = self.window * self.depth * int(np.prod(row_shape)) * np.dtype(dtype).itemsize
            if nbytes > 0:
                self._shm = shared_memory.SharedMemory(create=True, size=nbytes)
                self.data = np.ndarray((self.window * self.depth, *row_shape), dtype=dtype,
                                       buffer=self._shm.buf)

    @property
    def shm_name(self) -> str | None:
        return None if self._shm is None else self._shm.name

    @property
    def nbytes(self) -> int:
        return 0 if self.data is None else int(self.data.nbytes)

    def queue(self, q: int) -> np.ndarray:
        """Ids currently held by queue q (a view)."""
        start = q * self.depth
        return self.ids[start: start + self.count[q]]

    def resident_ids(self) -> np.ndarray:
        return np.concatenate([self.queue(q) for q in range(self.window)]) if self.window else self.ids[:0]

    def close(self) -> None:
        if self._shm is not None:
            self.data = None
            self._shm.close()
            self._shm.unlink()
            self._shm = None


class LandingBuffer:
    """The device-side copy of the next batch's victim queue (ids, optional data)."""

    def __init__(self, depth: int, row_shape: tuple[int, ...] = (), dtype=np.float32):
        self.ids = np.full(depth, -1, np.int64)
        self.n = np.zeros(1, np.int64)
        self.data = np.empty((depth, *row_shape), dtype=dtype) if row_shape else None

    @property
    def current(self) -> np.ndarray:
        return self.ids[: self.n[0]]


@njit(cache=True)
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
            prefetch_record(rows, q_ids[start + i + PREFETCH_DISTANCE] // num_owners)
        v = q_ids[start + i]
        land_ids[i] = v
        r = rows[v // num_owners]
        p = r[ROW_LAND]
        if not (p >= 0 and p < i and land_ids[p] == v):
            r[ROW_LAND] = i
    land_n[0] = n
    q_count[q] = 0
    return q

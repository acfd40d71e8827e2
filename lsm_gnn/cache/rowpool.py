"""Row data of the CPU engine: one host pool for cache lines, victim queues and landing buffer.

On a GPU the cache lines live in device memory, the victim queues in pinned host memory and the
landing buffer on the device again: a spill and a prefetch are PCIe copies, done by copy engines
beside the compute. On the CPU engine all three tiers are the same host RAM, so copying a row
from one to another would only spend the CPU time that training needs, an artifact of the
emulation. The pool therefore moves a row between tiers by moving its index: every pool row
belongs to exactly one cache slot, victim-queue entry, landing entry, or the free list. Rows are
copied only where a system without these tiers copies them too: into the batch's output, and from
storage into the cache line it fills. The bytes a device would move are still counted by the
fetcher (stats `victim_bytes`, `prefetch_bytes`).

The module also holds `OutputRows`, the output arrays every host source hands its rows out in.

Sizes: lines + W x depth + depth rows with the PVP on (every queue entry and landing entry can
hold a row while every slot holds one), lines without it.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit

from lsm_gnn.cache.engine import HIT, STORAGE
from lsm_gnn.utils.errors import ConfigError, InputError
from lsm_gnn.utils.native import memcpy


@njit(cache=True, nogil=True)
def _gather(want, status, inverse, slot, src, line_row, land_row, pool, out):  # pragma: no cover - compiled
    """out[i] = the pool row of request i, for the requests whose tier is `want` (HIT or VICTIM_HIT)."""
    rb = pool.shape[1]
    pb, ob = pool.ctypes.data, out.ctypes.data
    for i in range(len(inverse)):
        d = inverse[i]
        if status[d] != want:
            continue
        r = line_row[slot[d]] if want == HIT else land_row[src[d]]
        memcpy(ob + i * rb, pb + r * rb, rb)


@njit(cache=True, nogil=True)
def _move_spills(spill_slot, spill_dst, line_row, queue_row, free, free_n):  # pragma: no cover
    """The evicted line of slot spill_slot[k] becomes queue entry spill_dst[k]; the slot takes a
    free row. Returns False (and moves nothing more) if the free list runs dry, which the pool's
    size rules out."""
    for k in range(len(spill_slot)):
        n = free_n[0] - 1
        if n < 0:
            return False
        sl = spill_slot[k]
        queue_row[spill_dst[k]] = line_row[sl]
        line_row[sl] = free[n]
        free_n[0] = n
    return True


@njit(cache=True, nogil=True)
def _place_misses(status, inverse, slot, src, distinct, keys, line_row, land_row, pool, staged,
                  out, kmap):  # pragma: no cover - compiled
    """Storage rows (staged[k] = the k-th STORAGE distinct id; staged[kmap[k]] when kmap is not
    empty) go to their requests and fill their lines; a victim hit's line takes the landing
    entry's row (the landing entry takes the slot's dead row). A slot filled twice in the batch
    keeps its last line (keys[slot] == id)."""
    rb = pool.shape[1]
    pb, ob, sb = pool.ctypes.data, out.ctypes.data, staged.ctypes.data
    nd = len(distinct)
    kpos = np.empty(nd, np.int64)
    mapped = len(kmap) > 0
    k = 0
    for d in range(nd):
        if status[d] == STORAGE:
            kpos[d] = kmap[k] if mapped else k
            k += 1
    for i in range(len(inverse)):
        d = inverse[i]
        if status[d] == STORAGE:
            memcpy(ob + i * rb, sb + kpos[d] * rb, rb)
    for d in range(nd):
        st = status[d]
        if st == HIT:
            continue
        sl = slot[d]
        if sl < 0 or keys[sl] != distinct[d]:  # not cached (admission control) or refilled later
            continue
        if st == STORAGE:
            memcpy(pb + line_row[sl] * rb, sb + kpos[d] * rb, rb)
        else:
            p = src[d]
            r = line_row[sl]
            line_row[sl] = land_row[p]
            land_row[p] = r


@njit(cache=True, nogil=True)
def _land(start, n, queue_row, land_row, land_n, free, free_n):  # pragma: no cover
    """PVP: the old landing rows return to the free list; queue entries [start, start+n) become
    the landing buffer."""
    f = free_n[0]
    for i in range(land_n[0]):
        free[f] = land_row[i]
        f += 1
        land_row[i] = -1
    free_n[0] = f
    for i in range(n):
        land_row[i] = queue_row[start + i]
        queue_row[start + i] = -1
    land_n[0] = n


_NO_MAP = np.zeros(0, np.int64)


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class RowPool:
    """Row data of `lines` cache slots (+ `window` queues and a landing buffer of `depth` rows
    with the PVP on), as uint8 rows of `row_bytes`."""

    def __init__(self, lines: int, row_bytes: int, *, window: int = 0, depth: int = 0, pvp: bool = False):
        self.lines, self.row_bytes = int(lines), int(row_bytes)
        self.window, self.depth = (int(window), int(depth)) if pvp else (0, 0)
        queued = self.window * self.depth
        total = self.lines + queued + (self.depth if pvp else 0)
        need, avail = total * self.row_bytes, _available_memory()
        if avail is not None and need > avail:
            raise ConfigError("<cache config>", "cache.capacity_fraction / cache.victim_buffer.depth",
                              f"cache lines + victim buffer need {need} bytes of memory, {avail} are available")
        self.pool = np.zeros((total, self.row_bytes), np.uint8)
        self.line_row = np.arange(self.lines, dtype=np.int64)
        self.queue_row = np.full(queued, -1, np.int64)
        self.land_row = np.full(self.depth, -1, np.int64)
        self.land_n = np.zeros(1, np.int64)
        self.free = np.arange(self.lines, total, dtype=np.int64)
        self.free_n = np.array([len(self.free)], np.int64)

    @property
    def victim_bytes(self) -> int:
        """Bytes of the victim queues (pinned host memory on a device) and the landing buffer."""
        return (self.window + 1) * self.depth * self.row_bytes

    def _rows(self, a: np.ndarray, name: str) -> np.ndarray:
        # the kernels copy with raw addresses: rows must be packed uint8 rows of row_bytes
        if a.dtype != np.uint8 or a.ndim != 2 or a.shape[1] != self.row_bytes or not a.flags.c_contiguous:
            raise InputError(f"row pool: {name} must be C-contiguous uint8 rows of {self.row_bytes} bytes, "
                             f"found {a.dtype} {a.shape}")
        return a

    def gather(self, want: int, status, inverse, slot, src, out: np.ndarray) -> None:
        out = self._rows(out, "out")
        _gather(want, status, inverse, slot, src, self.line_row, self.land_row, self.pool, out)

    def move_spills(self, spill_slot, spill_dst) -> None:
        if not _move_spills(spill_slot, spill_dst, self.line_row, self.queue_row, self.free, self.free_n):
            raise RuntimeError("row pool: no free row for a spilled line (pool sized too small)")

    def place_misses(self, status, inverse, slot, src, distinct, keys, staged, out, kmap=None) -> None:
        """`staged`: the rows read from storage, in the order of the STORAGE distinct ids, or
        anywhere in `staged` with `kmap[k]` the row of the k-th (a read-ahead's buffer)."""
        staged, out = self._rows(staged, "staged"), self._rows(out, "out")
        reads = int((status == STORAGE).sum())
        if kmap is None:
            if len(staged) != reads:
                raise InputError(f"row pool: {len(staged)} staged rows for {reads} storage reads")
            kmap = _NO_MAP
        elif len(kmap) != reads or (reads and (kmap.min() < 0 or kmap.max() >= len(staged))):
            raise InputError(f"row pool: a row map of {len(kmap)} entries in [0, {len(staged)}) for {reads} "
                             "storage reads")
        _place_misses(status, inverse, slot, src, distinct, keys, self.line_row, self.land_row, self.pool,
                      staged, out, np.ascontiguousarray(kmap, dtype=np.int64))

    def land(self, queue: int, n: int) -> None:
        _land(queue * self.depth, n, self.queue_row, self.land_row, self.land_n, self.free,
              self.free_n)

    def line(self, slot: int) -> np.ndarray:
        """The bytes of cache slot `slot` (tests, inspection)."""
        return self.pool[self.line_row[slot]]

    def owners_consistent(self) -> bool:
        """Every pool row is owned by exactly one slot, queued entry, landing entry or free-list entry."""
        owned = np.concatenate([self.line_row, self.queue_row[self.queue_row >= 0],
                                self.land_row[: self.land_n[0]], self.free[: self.free_n[0]]])
        return len(owned) == len(self.pool) and bool((np.sort(owned) == np.arange(len(self.pool))).all())


class OutputRows:
    """Output arrays for a source's batches, reused once nothing refers to them any more.

    A fresh 175 MB output per batch (the small graph) costs the kernel a page fault and a zeroed
    page per 4 KiB before a row is written, in the thread that competes with training for the
    cores. A buffer is handed out again only when its reference count shows that no view of it
    (the batch's tensor, autograd's saved input, a user's copy of the reference) is alive, so a
    batch's rows never change under its holder. At most `keep` buffers are kept.
    """

    def __init__(self, dim: int, dtype, keep: int = 4):
        self.dim, self.dtype, self.keep = int(dim), np.dtype(dtype), int(keep)
        self._bufs: list[np.ndarray] = []

    def get(self, n: int) -> np.ndarray:
        """An uninitialised (n, dim) C-contiguous array."""
        bufs, buf = self._bufs, None
        free = []
        for i in range(len(bufs)):
            # references to the buffer: the list, `buf` and getrefcount's argument; one more is a
            # holder. (No enumerate here: its reused result tuple holds one more reference, under
            # which no buffer ever looked free and every batch faulted in a fresh one.)
            buf = bufs[i]
            if sys.getrefcount(buf) <= 3:
                if len(buf) >= n:
                    return buf[:n]
                free.append(i)
        del buf   # not a reference the next call would count
        buf = np.empty((n + n // 8 + 64, self.dim), self.dtype)  # room for the next, larger batch
        if len(bufs) < self.keep:
            bufs.append(buf)
        elif free:
            bufs[free[0]] = buf   # a free buffer too small for this batch makes room
        return buf[:n]

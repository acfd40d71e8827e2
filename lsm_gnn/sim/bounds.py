"""Bounds on the storage rows of any cache replaying a trace: compulsory misses, Belady MIN
(fully associative and per set) and the optimal static cache.

Semantics (docs/simulator.md):

* Rows are unit-size. Duplicates inside a batch coalesce into one request, so the sequence the
  bounds see is, per batch, the distinct ids in first-occurrence order (`RequestSequence`).
* **MIN is batch-granular and may bypass.** Before batch b the cache holds a set S of at most C
  rows; batch b costs |B_b \\ S| storage rows; afterwards the cache may keep any C rows of
  S ∪ B_b. Belady's rule (keep the C rows whose next use is soonest) is optimal for this
  problem, and it lower-bounds every policy whose state evolves batch by batch, whatever order it
  serves a batch in and whether it fills on demand or not. A demand-fill cache cannot always
  reach it; a cache with a victim buffer can go below it, which is why MIN is also given at
  C + victim capacity.
* **Optimal static** is the best fixed set of C rows chosen knowing the whole trace. It starts
  empty and reads each of its rows once, on first use (so it pays compulsory misses like every
  other cache and is never below MIN); it never evicts. Hence: top-C rows by (uses - 1).
* `brute_force_min` solves the same problem by exhaustive search, for tests on tiny traces.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Sequence

import numba
import numpy as np

from lsm_gnn.ownership import local_row_of_id
from lsm_gnn.utils.errors import InputError

NO_NEXT_USE = np.iinfo(np.int32).max  # key of a row that is never requested again


@numba.njit(cache=True)
def _coalesce_kernel(ids, offsets, num_rows):
    """Distinct ids per batch in first-occurrence order (one pass, a stamp per row)."""
    stamp = np.full(num_rows, -1, np.int64)
    out = np.empty(len(ids), np.int32)
    out_offsets = np.zeros(len(offsets), np.int64)
    k = 0
    for b in range(len(offsets) - 1):
        for i in range(offsets[b], offsets[b + 1]):
            v = ids[i]
            if stamp[v] != b:
                stamp[v] = b
                out[k] = v
                k += 1
        out_offsets[b + 1] = k
    return out[:k], out_offsets


@numba.njit(cache=True)
def _next_use_kernel(ids, batch, num_rows):
    """For each position, the batch of the row's next request (NO_NEXT_USE if none)."""
    last = np.full(num_rows, NO_NEXT_USE, np.int32)
    nxt = np.empty(len(ids), np.int32)
    for i in range(len(ids) - 1, -1, -1):
        v = ids[i]
        nxt[i] = last[v]
        last[v] = batch[i]
    return nxt


@numba.njit(cache=True)
def _heap_push(keys, vals, size, key, val):
    i = size
    keys[i] = key
    vals[i] = val
    while i > 0:
        p = (i - 1) >> 1
        if keys[p] >= keys[i]:
            break
        keys[p], keys[i] = keys[i], keys[p]
        vals[p], vals[i] = vals[i], vals[p]
        i = p
    return size + 1


@numba.njit(cache=True)
def _heap_pop(keys, vals, size):
    """Remove the max; the popped entry is left at index size-1."""
    size -= 1
    keys[0], keys[size] = keys[size], keys[0]
    vals[0], vals[size] = vals[size], vals[0]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        c = left
        if left + 1 < size and keys[left + 1] > keys[left]:
            c = left + 1
        if keys[i] >= keys[c]:
            break
        keys[c], keys[i] = keys[i], keys[c]
        vals[c], vals[i] = vals[i], vals[c]
        i = c
    return size


@numba.njit(cache=True)
def _min_kernel(ids, batch, nxt, seg_offsets, capacity, num_rows, num_batches):
    """Batch-granular bypass MIN over independent segments (one per set, or one in all).

    Per batch: count the rows not resident, make every batch row resident with its next use,
    then drop the rows with the farthest next use until at most `capacity` remain. Lazy
    deletion: a heap entry is live only while it equals the row's current key.
    """
    per_batch = np.zeros(num_batches, np.int64)
    key_of = np.full(num_rows, -1, np.int32)  # next use of a resident row, -1 if absent
    heap_k = np.empty(len(ids), np.int32)
    heap_v = np.empty(len(ids), np.int32)
    for s in range(len(seg_offsets) - 1):
        size = 0
        count = 0
        i = seg_offsets[s]
        end = seg_offsets[s + 1]
        while i < end:
            b = batch[i]
            while i < end and batch[i] == b:
                v = ids[i]
                if key_of[v] < 0:
                    per_batch[b] += 1
                    count += 1
                key_of[v] = nxt[i]
                size = _heap_push(heap_k, heap_v, size, nxt[i], v)
                i += 1
            while count > capacity:
                size = _heap_pop(heap_k, heap_v, size)
                k, v = heap_k[size], heap_v[size]
                if key_of[v] == k:
                    key_of[v] = -1
                    count -= 1
        for j in range(size):  # reset for the next segment
            key_of[heap_v[j]] = -1
    return per_batch


@numba.njit(cache=True)
def _group_by_set(ids, num_owners, num_sets):
    """Counting sort of positions by set `(v // G) % sets`, stable (request order kept per set)."""
    bounds = np.zeros(num_sets + 1, np.int64)
    for v in ids:
        bounds[local_row_of_id(v, num_owners) % num_sets + 1] += 1
    for k in range(num_sets):
        bounds[k + 1] += bounds[k]
    fill = bounds[:-1].copy()
    order = np.empty(len(ids), np.int64)
    for i in range(len(ids)):
        k = local_row_of_id(ids[i], num_owners) % num_sets
        order[fill[k]] = i
        fill[k] += 1
    return order, bounds


@dataclass(frozen=True)
class RequestSequence:
    """The coalesced request sequence of one cache: per batch, distinct ids in first-occurrence
    order, concatenated (`ids`), with `offsets[b]:offsets[b+1]` delimiting batch b."""

    ids: np.ndarray      # int32
    offsets: np.ndarray  # int64, num_batches + 1
    num_rows: int

    @classmethod
    def from_batches(cls, batches: Sequence[np.ndarray], num_rows: int) -> "RequestSequence":
        if num_rows < 0 or num_rows >= np.iinfo(np.int32).max:
            raise InputError(f"num_rows must lie in [0, 2**31 - 1), found {num_rows}")
        lens = np.fromiter((len(b) for b in batches), dtype=np.int64, count=len(batches))
        offsets = np.zeros(len(batches) + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        raw = np.concatenate([np.asarray(b).ravel() for b in batches]) if len(batches) else np.zeros(0, np.int64)
        if raw.size and not np.issubdtype(raw.dtype, np.integer):
            raise InputError(f"trace ids must be integers, found dtype {raw.dtype}")
        if raw.size and (raw.min() < 0 or raw.max() >= num_rows):
            raise InputError(f"trace ids must lie in [0, {num_rows}), found [{raw.min()}, {raw.max()}]")
        ids, offsets = _coalesce_kernel(raw.astype(np.int64, copy=False), offsets, max(num_rows, 1))
        return cls(ids, offsets, num_rows)

    @property
    def num_batches(self) -> int:
        return len(self.offsets) - 1

    def __len__(self) -> int:
        return len(self.ids)

    @functools.cached_property
    def _batch_index(self) -> np.ndarray:
        return np.repeat(np.arange(self.num_batches, dtype=np.int32), np.diff(self.offsets))

    @functools.cached_property
    def _next_use(self) -> np.ndarray:
        return _next_use_kernel(self.ids, self._batch_index, max(self.num_rows, 1))

    def batch_index(self) -> np.ndarray:
        """Batch of each position (computed once)."""
        return self._batch_index

    def next_use(self) -> np.ndarray:
        """Batch of the next request of each position's row, NO_NEXT_USE if none (computed once)."""
        return self._next_use


def compulsory_misses(seq: RequestSequence) -> int:
    """Rows requested at least once: every cache that starts empty reads each of them once."""
    if len(seq) == 0:
        return 0
    return int(np.count_nonzero(np.bincount(seq.ids, minlength=seq.num_rows)))


def belady_min(seq: RequestSequence, capacity: int, *, per_batch: bool = False):
    """Fewest storage rows of any cache of `capacity` rows (fully associative) on `seq`."""
    _check_capacity(capacity)
    counts = _min_kernel(seq.ids, seq.batch_index(), seq.next_use(), np.array([0, len(seq)], np.int64),
                         int(capacity), max(seq.num_rows, 1), seq.num_batches)
    return counts if per_batch else int(counts.sum())


def belady_min_per_set(seq: RequestSequence, ways: int, num_sets: int, *, num_owners: int = 1,
                       per_batch: bool = False):
    """MIN when each of `num_sets` sets holds at most `ways` rows and row v may only live in set
    `(v // num_owners) % num_sets` (the set-associative cache's geometry)."""
    _check_capacity(ways)
    if num_sets < 1 or num_owners < 1:
        raise InputError(f"num_sets and num_owners must be >= 1, found {num_sets} and {num_owners}")
    order, bounds = _group_by_set(seq.ids, num_owners, num_sets)
    counts = _min_kernel(seq.ids[order], seq.batch_index()[order], seq.next_use()[order],
                         bounds, int(ways), max(seq.num_rows, 1), seq.num_batches)
    return counts if per_batch else int(counts.sum())


def optimal_static(seq: RequestSequence, capacity: int) -> int:
    """Storage rows of the best fixed set of `capacity` rows, filled on first use, never evicted."""
    _check_capacity(capacity)
    if len(seq) == 0:
        return 0
    gain = np.bincount(seq.ids, minlength=seq.num_rows) - 1  # reads saved by holding the row
    gain = gain[gain > 0]
    if capacity == 0:
        return len(seq)
    if capacity < len(gain):
        gain = np.partition(gain, len(gain) - capacity)[len(gain) - capacity:]
    return int(len(seq) - gain.sum())


def brute_force_min(seq: RequestSequence, capacity: int, max_states: int = 200_000) -> int:
    """MIN by dynamic programming over every reachable cache content (exponential; for tests).

    State after batch b: the set S of resident rows. From S, batch B costs |B \\ S| and may leave
    any subset of S ∪ B of size <= capacity.
    """
    _check_capacity(capacity)
    best = {frozenset(): 0}
    for b in range(seq.num_batches):
        batch = frozenset(seq.ids[seq.offsets[b]: seq.offsets[b + 1]].tolist())
        nxt: dict[frozenset, int] = {}
        for state, cost in best.items():
            c = cost + len(batch - state)
            pool = sorted(state | batch)
            for k in range(min(capacity, len(pool)) + 1):
                for keep in itertools.combinations(pool, k):
                    key = frozenset(keep)
                    if c < nxt.get(key, c + 1):
                        nxt[key] = c
                    if len(nxt) > max_states:
                        raise InputError(f"brute_force_min: more than {max_states} states; use a smaller trace")
        best = nxt
    return min(best.values())


def _check_capacity(capacity: int) -> None:
    if int(capacity) != capacity or capacity < 0:
        raise InputError(f"capacity must be a non-negative integer number of rows, found {capacity!r}")

"""`CachedFeatureSource`: feature rows served through the LSM-GNN cache of one owner.

Per iteration the loop calls `advance(window)` with the next W batches' ids, then `fetch(ids)`.
The CPU engine decides (lookup, victims, spills); this module moves the rows accordingly:

1. rows of cache hits are gathered from the cache lines (before any line is overwritten);
2. lines evicted with a known reuse are copied into their victim queue (shared memory);
3. victim hits are copied from the PVP landing buffer, the rest is read from the store;
4. the filled lines are written (the last fill of a slot in the batch wins) and the rows are
   put back in request order;
5. PVP: the next batch's victim queue is copied to the landing buffer.

Every row returned equals the row in storage; the counters say where it came from.
"""

from __future__ import annotations

import os
import time
from typing import Sequence

import numpy as np

from lsm_gnn.cache.engine import HIT, STORAGE, VICTIM_HIT, CpuCacheEngine
from lsm_gnn.cache.geometry import capacity_rows_for, check_owned_ids, check_owner_args
from lsm_gnn.cache.victim import LandingBuffer, VictimQueues
from lsm_gnn.cache.window import LookaheadWindow
from lsm_gnn.features import TierCounters
from lsm_gnn.storage.base import FeatureStore
from lsm_gnn.utils.errors import ConfigError, InputError

SHM_DIR = "/dev/shm"


class CachedFeatureSource:
    """A FeatureSource (lsm_gnn.features) backed by a FeatureStore and the cache engine.

    `capacity_rows` overrides the capacity from `cfg` (capacity_bytes // row bytes, else
    capacity_fraction of num_rows). Only ids owned by `owner` (v % num_owners == owner) may be
    requested. `close()` releases the victim buffer's shared memory; the store stays open.
    """

    def __init__(self, store: FeatureStore, num_rows: int, row_dim: int, dtype, cfg,
                 static_scores: np.ndarray, *, num_owners: int = 1, owner: int = 0,
                 capacity_rows: int | None = None):
        check_owner_args(num_rows, num_owners, owner)
        self.dtype = np.dtype(dtype)
        # a store over an owner's own file maps global ids to its rows (storage.owner_row_map):
        # it holds just the rows this owner owns
        rows = num_rows if getattr(store, "row_map", None) is None else len(range(owner, num_rows, num_owners))
        if (store.num_rows, store.dim, store.dtype) != (rows, row_dim, self.dtype):
            raise InputError(f"store holds ({store.num_rows} rows, dim {store.dim}, {store.dtype}), "
                             f"expected ({rows} rows, dim {row_dim}, {self.dtype})")
        self.store, self.num_rows, self.dim = store, int(num_rows), int(row_dim)
        self.num_owners, self.owner = int(num_owners), int(owner)
        self.row_bytes = self.dim * self.dtype.itemsize
        if capacity_rows is None:
            capacity_rows = capacity_rows_for(cfg, num_rows, self.row_bytes)
        self.capacity_rows = int(capacity_rows)
        self.enabled = bool(cfg.enabled) and self.capacity_rows >= 1
        self.pvp = bool(cfg.victim_buffer.enabled) and cfg.window > 0 and self.enabled
        self.window = LookaheadWindow(cfg.window)
        self.counters = TierCounters()
        self._last = None  # (status, inverse) of the last fetch, for last_tiers
        self.stats = {k: 0 for k in ("iterations", "evictions", "spilled", "spill_dropped", "prefetched",
                                     "prefetched_used", "victim_bytes", "prefetch_bytes")}
        self.stats.update(time_cache_s=0.0, time_victim_s=0.0, time_storage_s=0.0)
        self.engine = None
        self.victims = None
        if not self.enabled:
            self.stats["victim_buffer_bytes"] = 0
            return
        depth = cfg.victim_buffer.depth_for(self.capacity_rows)
        row_shape = (self.dim,) if self.pvp else ()
        if self.pvp:
            self._check_shm(cfg.window * depth * self.row_bytes)
        self.victims = VictimQueues(cfg.window, depth, row_shape, self.dtype)
        self.landing = LandingBuffer(depth, row_shape, self.dtype)
        self.engine = CpuCacheEngine(self.capacity_rows, num_rows, static_scores, ways=cfg.ways,
                                     policy=cfg.policy, window=cfg.window, refresh_every=cfg.refresh_every,
                                     pvp=self.pvp, victim_depth=depth, num_owners=num_owners, owner=owner,
                                     victims=self.victims, landing=self.landing)
        self.lines = np.zeros((self.engine.geometry.lines, self.dim), self.dtype)  # "device memory"
        self.stats["victim_buffer_bytes"] = self.victims.nbytes
        self.stats["policy"] = self.engine.policy_name

    @staticmethod
    def _check_shm(nbytes: int) -> None:
        # shared memory beyond the tmpfs size is a SIGBUS on first touch, not an error: check first
        if os.path.isdir(SHM_DIR):
            st = os.statvfs(SHM_DIR)
            free = st.f_bavail * st.f_frsize
            if nbytes > free:
                raise ConfigError("<cache config>", "cache.victim_buffer.depth",
                                  f"victim buffer needs {nbytes} bytes of shared memory, {SHM_DIR} has {free} free")

    @property
    def last_tiers(self) -> np.ndarray | None:
        """Tier of each request of the last fetch (HIT / VICTIM_HIT / STORAGE) at its first
        occurrence, -1 on the duplicates that coalesced into it, so the tiers add up to the
        distinct-row counts. Computed on demand: only the shared cache needs it."""
        if self._last is None:
            return None
        status, inverse = self._last
        tiers = np.full(len(inverse), -1, np.int8)
        tiers[np.unique(inverse, return_index=True)[1]] = status
        return tiers

    # ---- FeatureSource protocol ---------------------------------------------------------------
    def advance(self, window: Sequence[np.ndarray]) -> None:
        """The next W batches' ids (this owner's); used by the next `fetch` only."""
        self.window.set([check_owned_ids(b, self.num_rows, self.num_owners, self.owner, "window")
                         for b in list(window)[: self.window.window]])

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        ids = check_owned_ids(ids, self.num_rows, self.num_owners, self.owner, "ids")
        self._last = None
        if not self.enabled:
            return self._fetch_uncached(ids)
        st = self.stats
        t0 = time.perf_counter()
        res = self.engine.step(ids, *self.window.flat)
        status, slot = res.status, res.slot
        hit = status == HIT
        rows = np.empty((len(res.distinct), self.dim), self.dtype)
        rows[hit] = self.lines[slot[hit]]
        t1 = time.perf_counter()
        if len(res.spill_slot):
            self.victims.data[res.spill_dst] = self.lines[res.spill_slot]
        vhit = status == VICTIM_HIT
        if vhit.any():
            rows[vhit] = self.landing.data[res.src[vhit]]
        t2 = time.perf_counter()
        from_storage = status == STORAGE
        if from_storage.any():
            rows[from_storage] = self.store.read_rows(res.distinct[from_storage])
        t3 = time.perf_counter()
        miss = ~hit
        miss_slots = slot[miss]
        final = self.engine.keys[miss_slots] == res.distinct[miss]  # a slot filled twice keeps its last line
        self.lines[miss_slots[final]] = rows[miss][final]
        out = rows[res.inverse]
        self._last = (status, res.inverse)
        t4 = time.perf_counter()
        q = self.engine.end_iteration()
        if q >= 0:
            n = int(self.landing.n[0])
            start = q * self.victims.depth
            self.landing.data[:n] = self.victims.data[start: start + n]
            st["prefetched"] += n
            st["prefetch_bytes"] += n * self.row_bytes
        t5 = time.perf_counter()
        self.window.clear()
        c = res.counts
        self.counters.requests += c["requests"]
        self.counters.distinct += c["distinct"]
        self.counters.local_hits += c["hits"]
        self.counters.victim_hits += c["victim_hits"]
        self.counters.storage_rows += c["storage_rows"]
        st["iterations"] += 1
        st["evictions"] += c["evictions"]
        st["spilled"] += c["spills"]
        st["spill_dropped"] += c["spill_dropped"]
        st["prefetched_used"] += c["victim_hits"]
        st["victim_bytes"] += c["spills"] * self.row_bytes
        st["time_cache_s"] += (t1 - t0) + (t4 - t3)
        st["time_victim_s"] += (t2 - t1) + (t5 - t4)
        st["time_storage_s"] += t3 - t2
        return out

    def _fetch_uncached(self, ids: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        uniq, inverse = np.unique(ids, return_inverse=True)
        rows = self.store.read_rows(uniq) if len(uniq) else np.empty((0, self.dim), self.dtype)
        self.stats["time_storage_s"] += time.perf_counter() - t0
        self.stats["iterations"] += 1
        self.counters.requests += len(ids)
        self.counters.distinct += len(uniq)
        self.counters.storage_rows += len(uniq)
        self.window.clear()
        return rows[inverse]

    def close(self) -> None:
        if self.victims is not None:
            self.victims.close()
            self.victims = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

"""What every cache over one owner's rows sets up before its data plane (the host one in
lsm_gnn.sources.cached, the torch one in lsm_gnn.sources.cached_device): the store it falls back on,
the owner's id space, its memory budget, the future batches its policy reads and its tier
counters, and what both say about themselves through the FeatureSource contract (id checks, the
window, stage seconds, storage, memory), and the fetch order itself, read-ahead included. One
place, so the two data planes cannot size, check, order or report themselves differently: a plane
says only where rows land (its hooks, `OwnerShard`'s docstring).

The fetch order of one batch (both planes):

0. the engine decides (lookup, victims, spills); the storage reads of the misses are issued at
   once, on a reader thread, so that they run while steps 1-3 copy rows (the stats time the wait
   for them, `time_storage_s`, and their own duration, `time_storage_busy_s`); with
   `cache.readahead` they were issued one batch earlier (read-ahead, below) and this step only
   waits for them;
1. the engine ends the iteration (PVP: the next batch's victim queue becomes its landing buffer,
   ids only) and, with read-ahead, the next batch's misses are queued on the reader thread;
2. rows of cache hits are copied to the output (before any line is refilled);
3. lines evicted with a known reuse join their victim queue; victim hits are copied to the output
   from the PVP landing buffer;
4. the rows read from the store go to the output and fill their lines, and a victim hit's line
   takes its landing row (the last fill of a slot in the batch wins);
5. PVP: the next batch's victim queue becomes the landing buffer (the rows now).

Read-ahead (`cache.readahead`): as soon as the engine has decided this batch (and moved the next
landing buffer), the next batch's storage misses are known: the distinct ids of the window's first
batch (batch t+1) whose row is neither resident nor in the landing buffer, since nothing changes
either before that batch is looked up (the rows' steps above change no decision, advance only
retags). Their read is queued on the reader thread right behind this batch's, before a row of this
batch moves, so the storage device goes from one batch's reads to the next without waiting for
the rows' copies, the exchange, the reorder, the train step or the next announcement. The two
read-ahead buffers are used in turn (one holds this batch's rows until step 4). The next fetch
uses the rows where they lie (a row map, no copy) and reads any row the prediction lacked; a
read-ahead counts its I/O into the store's counters when the next fetch uses it, so every batch's
counts stay deterministic. It needs an engine that can answer `storage_misses` (the CPU engine;
the GPU engine's data plane reads a batch's misses when it is served, and its stats say so).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from lsm_gnn.cache.budget import MemoryBudget, for_devices, memory_budget
from lsm_gnn.cache.geometry import check_owned_ids, check_owner_store
from lsm_gnn.ownership import local_rows
from lsm_gnn.cache.policies import lookahead_horizon
from lsm_gnn.cache.window import LookaheadWindow
from lsm_gnn.contract import STAGES, FeatureSource, TierCounters
from lsm_gnn.storage.base import IOCounters


def add_step_counts(counters: TierCounters, stats, c: dict, row_bytes: int) -> None:
    """One engine step's counts into a cache source's tier counters and stats (both data planes)."""
    counters.requests += c["requests"]
    counters.distinct += c["distinct"]
    counters.local_hits += c["hits"]
    counters.victim_hits += c["victim_hits"]
    counters.storage_rows += c["storage_rows"]
    stats["iterations"] += 1
    stats["bypassed"] += c["bypassed"]
    stats["evictions"] += c["evictions"]
    stats["spilled"] += c["spills"]
    stats["spill_dropped"] += c["spill_dropped"]
    stats["prefetched_used"] += c["victim_hits"]
    stats["victim_bytes"] += c["spills"] * row_bytes


def cache_stage_seconds(stats: dict) -> dict:
    """Per-stage seconds of a cache's stats (time_cache_s, time_victim_s, time_storage_s)."""
    return {s: float(stats.get(f"time_{s}_s", 0.0)) for s in STAGES}


class OwnerShard(FeatureSource):
    """A FeatureSource over one owner's rows and the fetch order of both data planes (the module
    docstring). A plane sets `stats` (then `_init_readahead`), `engine` and `pool`, and says
    where rows land through the hooks below:

        _decide(ids) -> res            the engine's step (res.distinct / res.status on the host
                                       or a device), in the engine's stream
        _storage_ids(res) -> ndarray   the distinct ids read from storage, on the host (the
                                       device plane plans the batch here: the ids are the plan's
                                       one copy to the host)
        _prepare(res)                  the plane's plan of the batch (after the reads are issued,
                                       before the engine ends the iteration)
        _end_iteration() -> q          the engine's end_iteration, in the engine's stream
        _copy_hits(res, out)           step 2 (`out` from `_output(n)`)
        _copy_victims(res, out)        step 3
        _arrived(staged)               the read rows where step 4 reads them (a device: uploaded)
        _read_in_place(ids)            with `_in_place` set: the rows of ids where they lie
                                       (counted as a read; no staging, no reader thread)
        _place_misses(res, staged, kmap, out)   step 4 (kmap: staged row of each storage read)
        _land(q) -> rows landed        step 5
        _served(res, out, storage_rows, landed) the plane's own byte counts; returns the rows
        _grown(buf, n)                 a host buffer of >= n rows the reader can fill
        _fetch_uncached(ids)           the cache off
        _release_pool()                its rows' memory freed (`close`; by default dropped)

    and `_last_on_host` where its decisions live on a device."""

    _owns_store = False   # close() closes the store too (what make_feature_source asks for)
    _in_place = None      # a plane that reads the store's rows where they lie sets it (no staging)

    def _init_shard(self, store, num_rows: int, row_dim: int, dtype, cfg, num_owners: int, owner: int,
                    budget: MemoryBudget | None) -> None:
        self.dtype = check_owner_store(store, num_rows, row_dim, dtype, num_owners, owner)
        self.store, self.num_rows, self.dim = store, int(num_rows), int(row_dim)
        self.num_owners, self.owner = int(num_owners), int(owner)
        self.row_bytes = self.dim * self.dtype.itemsize
        if budget is None:
            budget = memory_budget(cfg, num_rows, self.row_bytes, owned_rows=local_rows(num_rows, num_owners))
        self.budget = budget
        self.capacity_rows = int(budget.cache_rows)
        self.enabled = bool(cfg.enabled) and self.capacity_rows >= 1
        # the future batches the policy reads: W, or K for a long-lookahead policy (horizon)
        self.window = LookaheadWindow(lookahead_horizon(cfg))
        self.counters = TierCounters()
        self._last = None  # (status, inverse) of the last fetch, for last_tiers

    # ---- FeatureSource contract (both data planes) ------------------------------------------
    @property
    def last_tiers(self) -> np.ndarray | None:
        """Tier of each request of the last fetch (HIT / VICTIM_HIT / STORAGE) at its first
        occurrence, -1 on the duplicates that coalesced into it, so the tiers add up to the
        distinct-row counts. Computed on demand: only the shared cache needs it."""
        if self._last is None:
            return None
        status, inverse = self._last_on_host()
        tiers = np.full(len(inverse), -1, np.int8)
        tiers[np.unique(inverse, return_index=True)[1]] = status
        return tiers

    def _last_on_host(self) -> tuple[np.ndarray, np.ndarray]:
        """(status, inverse) of the last fetch as numpy arrays (a data plane whose decisions live
        on a device copies them here)."""
        return self._last

    def check_ids(self, ids, what: str = "ids") -> np.ndarray:
        """Ids in [0, num_rows) owned by this owner (InputError otherwise): the check of a fetch
        that enters here; the shared source validates its ids itself and calls `_fetch`."""
        return check_owned_ids(ids, self.num_rows, self.num_owners, self.owner, "window" if what != "ids" else what)

    # ---- the fetch order (the module docstring) ----------------------------------------------
    def _init_readahead(self, enabled: bool) -> None:
        self._staged = self._reader = None
        self.readahead = bool(enabled)
        self._ahead = None        # the read-ahead in flight: (ids, rows, future, counters)
        self._ahead_rows = [None, None]   # its buffers, used in turn (one holds this batch's rows)
        self._ahead_turn = 0
        self.stats.update(readahead=self.readahead, readahead_rows=0, readahead_unused_rows=0,
                          readahead_missed_rows=0, readahead_buffer_bytes=0)

    def _fetch(self, ids: np.ndarray):
        self._last = None
        if not self.enabled:
            return self._fetch_uncached(ids)
        st = self.stats
        t0 = time.perf_counter()
        res = self._decide(ids)
        # the storage reads go out first and run (without the GIL) while the hits and victim hits
        # are copied: the read time hides the copying
        storage_ids = self._storage_ids(res)
        ahead, self._ahead = self._ahead, None
        kmap = None
        if ahead is not None:
            staged, kmap, reading = self._use_ahead(ahead, storage_ids)
        elif self._in_place is not None:   # the rows are read where they lie: nothing to wait for
            staged, reading = self._read_in_place(storage_ids), None
        else:
            staged = self._staging(len(storage_ids))
            reading = self._read_async(storage_ids, staged) if len(storage_ids) else None
        # (a plane's plan of the batch reads the decisions before the engine moves on)
        # this batch's decisions are complete: the engine's state is now batch t+1's, so its
        # storage misses are known before a row of this batch moves (the steps below change no
        # decision); queued on the reader thread behind this batch's read, they keep the device
        # busy while the rows of this batch are copied and travel on
        self._prepare(res)
        q = self._end_iteration()
        if self.readahead and len(self.window):
            self._ahead = self._read_ahead()
        out = self._output(len(ids))
        self._copy_hits(res, out)
        t1 = time.perf_counter()
        self._copy_victims(res, out)
        t2 = time.perf_counter()
        if reading is not None:
            st["time_storage_busy_s"] += reading.result()
        if ahead is not None:
            self.store.counters.add(ahead[3])   # the read-ahead's I/O belongs to this batch
        staged = self._arrived(staged)
        t3 = time.perf_counter()
        self._place_misses(res, staged, kmap, out)
        self._last = (res.status, res.inverse)
        t4 = time.perf_counter()
        landed = self._land(q) if q >= 0 else 0
        st["prefetched"] += landed
        st["prefetch_bytes"] += landed * self.row_bytes
        t5 = time.perf_counter()
        self.window.clear()
        add_step_counts(self.counters, st, res.counts, self.row_bytes)
        st["time_cache_s"] += (t1 - t0) + (t4 - t3)
        st["time_victim_s"] += (t2 - t1) + (t5 - t4)
        st["time_storage_s"] += t3 - t2
        return self._served(res, out, len(staged), landed)

    def _read_async(self, ids: np.ndarray, out: np.ndarray, counters: IOCounters | None = None):
        """Read `ids` into `out` on the source's reader thread (every read of the store runs
        there, one after another); the future gives the read's seconds."""
        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="lsm-gnn-cache-read")

        def read():
            t0 = time.perf_counter()
            self.store.read_rows(ids, out=out, counters=counters)
            return time.perf_counter() - t0

        return self._reader.submit(read)

    def _read_ahead(self):
        """Start reading the next batch's storage misses (the module docstring's read-ahead), into
        the read-ahead buffer this batch's rows are not in."""
        ids, offsets = self.window.flat
        want = self.engine.storage_misses(ids[offsets[0]: offsets[1]])
        if not len(want):
            return None
        bufs, k = self._ahead_rows, self._ahead_turn
        bufs[k] = self._grown(bufs[k], len(want))
        self._ahead_turn = 1 - k
        self.stats["readahead_buffer_bytes"] = sum(b.nbytes for b in bufs if b is not None)
        rows, counters = bufs[k][: len(want)], IOCounters()
        return want, rows, self._read_async(want, rows, counters), counters

    def _use_ahead(self, ahead, storage_ids: np.ndarray):
        """(staged rows, row map, pending read) for this batch's storage reads from the read-ahead
        `ahead`: the rows where the read-ahead put them; a row it lacks (a prediction cannot miss
        one unless the cache changed between the batches) is read now, after it."""
        want, rows, reading, counters = ahead
        st = self.stats
        st["readahead_rows"] += len(want)
        pos = np.minimum(np.searchsorted(want, storage_ids), len(want) - 1)
        found = want[pos] == storage_ids
        st["readahead_unused_rows"] += len(want) - int(found.sum())
        if found.all():
            return rows, pos, reading
        # the rare path: a copy of what was read ahead, then the rest from storage
        missing = storage_ids[~found]
        st["readahead_missed_rows"] += len(missing)
        st["time_storage_busy_s"] += reading.result()
        staged = self._staging(len(storage_ids))
        staged[found] = rows[pos[found]]
        t0 = time.perf_counter()
        staged[~found] = self.store.read_rows(missing)   # the reader thread is idle: its read is done
        st["time_storage_busy_s"] += time.perf_counter() - t0
        return staged, None, None

    def _staging(self, n: int) -> np.ndarray:
        """An (n, dim) buffer for the rows read from storage, reused across batches."""
        self._staged = self._grown(self._staged, n)
        return self._staged[:n]

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader.shutdown(wait=True)
            self._reader = None
        self._staged = self._ahead = None
        self._ahead_rows = [None, None]

    # ---- the lookahead -------------------------------------------------------------------------
    def _advance(self, window: Sequence[np.ndarray]) -> None:
        """The next W batches' ids (this owner's); used by the next `fetch` only."""
        self.window.set(list(window)[: self.window.window])

    def stage_seconds(self) -> dict:
        return cache_stage_seconds(self.stats)

    def io_counters(self):
        return self.store.counters

    def storage_info(self) -> dict:
        from lsm_gnn.storage.base import storage_description

        return storage_description(self.store)

    def memory(self) -> dict:
        """This device's budget (cache lines + victim queues + landing buffer)."""
        return for_devices(self.budget.record(), 1)

    def close(self) -> None:
        """Stop the reader thread, release the rows (`_release_pool`), close the store if this
        source owns it."""
        self._close_reader()
        self._release_pool()
        self._close_store()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _release_pool(self) -> None:
        self.pool = None

    def _close_store(self) -> None:
        if self._owns_store:
            self._owns_store = False
            self.store.close()

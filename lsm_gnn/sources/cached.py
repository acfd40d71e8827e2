"""`CachedFeatureSource`: feature rows served through the LSM-GNN cache of one owner.

Per iteration the loop calls `advance(window)` with the next W batches' ids, then `fetch(ids)`.
The CPU engine decides (lookup, victims, spills); the row pool (lsm_gnn.cache.rowpool) holds the
rows of the cache lines, victim queues and landing buffer, and this module moves them:

0. the storage reads of the misses are issued at once, on a reader thread, so that they run while
   steps 1-3 copy rows (the stats time the wait for them, `time_storage_s`, and their own
   duration, `time_storage_busy_s`); with `cache.readahead` they were issued one batch earlier
   (read-ahead, below) and this step only waits for them;
1. rows of cache hits are copied to the output (before any line is refilled);
2. lines evicted with a known reuse join their victim queue (the pool moves the row's index);
3. victim hits are copied to the output from the PVP landing buffer;
4. the rows read from the store go to the output and fill their lines, and a
   victim hit's line takes its landing row (the last fill of a slot in the batch wins);
5. PVP: the next batch's victim queue becomes the landing buffer (indices again; the engine
   moved its ids before step 1, the pool moves the rows now).

Read-ahead (`cache.readahead`): as soon as the engine has decided this batch (and moved the next
landing buffer), the next batch's storage misses are known: the distinct ids of the window's first
batch (batch t+1) whose row is neither resident nor in the landing buffer, since nothing changes
either before that batch is looked up (the pool's steps above change no decision, advance only
retags). Their read is queued on the reader thread right behind this batch's, before a row of this
batch moves, so the storage device goes from one batch's reads to the next without waiting for
the rows' copies, the exchange, the reorder, the train step or the next announcement. The two
read-ahead buffers are used in turn (one holds this batch's rows until step 4). The next fetch
uses the rows where they lie (a row map, no copy) and reads any row the prediction lacked; a
read-ahead counts its I/O into the store's counters when the next fetch uses it, so every batch's
counts stay deterministic.

Every row returned equals the row in storage; the counters say where it came from, and the stats
count the bytes a device would move between the tiers (victim_bytes, prefetch_bytes).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lsm_gnn.cache.engine import HIT, STORAGE, VICTIM_HIT
from lsm_gnn.cache.engines import make_engine
from lsm_gnn.cache.budget import MemoryBudget
from lsm_gnn.cache.rowpool import OutputRows, RowPool
from lsm_gnn.cache.victim import LandingBuffer, VictimQueues
from lsm_gnn.sources.shard import OwnerShard
from lsm_gnn.sources.contract import SourceStats, TierCounters
from lsm_gnn.storage.base import FeatureStore, IOCounters
from lsm_gnn.utils.errors import ConfigError


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


class CachedFeatureSource(OwnerShard):
    """A FeatureSource (lsm_gnn.sources.contract) backed by a FeatureStore and the cache engine.

    `budget` (lsm_gnn.cache.budget) splits the device's memory between cache lines, victim queues
    and landing buffer; None: the budget `cfg` gives this owner. Only ids owned by `owner`
    (v % num_owners == owner) may be requested. `close()` releases the row pool; the store stays
    open unless `owns_store` (what lsm_gnn.sources.factory.make_feature_source asks for).
    """

    def __init__(self, store: FeatureStore, num_rows: int, row_dim: int, dtype, cfg,
                 static_scores: np.ndarray, *, num_owners: int = 1, owner: int = 0,
                 budget: MemoryBudget | None = None, owns_store: bool = False):
        if getattr(cfg, "engine", "cpu") != "cpu":
            # decision replay (lsm-gnn simulate) runs on any engine; serving rows needs the CPU
            # engine's data plane, so a run must not quietly swap the engine it was asked for
            raise ConfigError("<config>", "cache.engine", f"rows are served through the 'cpu' engine; found "
                              f"{cfg.engine!r} (the gpu and reference engines replay traces: lsm-gnn simulate)")
        self._init_shard(store, num_rows, row_dim, dtype, cfg, num_owners, owner, budget)
        self.pvp = self.budget.pvp and self.enabled
        self.stats = SourceStats((k, 0) for k in ("iterations", "evictions", "spilled", "spill_dropped", "prefetched",
                                                  "prefetched_used", "victim_bytes", "prefetch_bytes", "bypassed"))
        # wall-clock segments of fetch (they add up to its time), plus the reads' own duration
        self.stats.update(time_cache_s=0.0, time_victim_s=0.0, time_storage_s=0.0, time_storage_busy_s=0.0)
        self.engine = self.pool = self.victims = self.landing = None
        self._staged = self._reader = None
        self.readahead = bool(cfg.readahead)
        self._ahead = None        # the read-ahead in flight: (ids, rows, future, counters)
        self._ahead_rows = [None, None]   # its buffers, used in turn (one holds this batch's rows)
        self._ahead_turn = 0
        self.stats.update(readahead=self.readahead, readahead_rows=0, readahead_unused_rows=0,
                          readahead_missed_rows=0, readahead_buffer_bytes=0)
        self._out = OutputRows(self.dim, self.dtype)
        if not self.enabled:
            self.stats["victim_buffer_bytes"] = 0
            self._owns_store = owns_store
            return
        depth = self.budget.engine_depth
        self.victims = VictimQueues(cfg.window, depth)
        self.landing = LandingBuffer(depth)
        self.engine = make_engine(cfg, self.budget, num_rows, static_scores, num_owners=num_owners, owner=owner,
                                  kind="cpu", victims=self.victims, landing=self.landing)
        self.pool = RowPool(self.engine.geometry.lines, self.row_bytes, window=cfg.window, depth=depth,
                            pvp=self.pvp)
        self.stats["victim_buffer_bytes"] = self.pool.victim_bytes
        self.stats["policy"] = self.engine.policy_name
        self.stats["lookahead_batches"] = self.engine.lookahead
        self.stats["lookahead_bytes"] = 0  # the window's ids + the engine's lookahead state (not feature memory)
        self._owns_store = owns_store

    def _fetch(self, ids: np.ndarray) -> np.ndarray:
        self._last = None
        if not self.enabled:
            return self._fetch_uncached(ids)
        st, pool = self.stats, self.pool
        t0 = time.perf_counter()
        res = self.engine.step(ids, *self.window.flat)
        st["lookahead_bytes"] = max(st["lookahead_bytes"], self.window.ids.nbytes + self.engine.lookahead_bytes())
        status, inverse, slot, src = res.status, res.inverse, res.slot, res.src
        # the storage reads go out first and run (without the GIL) while the hits and victim hits
        # are copied: the read time hides the copying
        storage_ids = res.distinct[status == STORAGE]
        ahead, self._ahead = self._ahead, None
        kmap = None
        if ahead is not None:
            staged, kmap, reading = self._use_ahead(ahead, storage_ids)
        else:
            staged = self._staging(len(storage_ids))
            reading = self._read_async(storage_ids, staged) if len(storage_ids) else None
        # this batch's decisions are complete: the engine's state is now batch t+1's, so its
        # storage misses are known before a row of this batch moves (the pool's steps below
        # change no decision); queued on the reader thread behind this batch's read, they keep
        # the device busy while the rows of this batch are copied and travel on
        q = self.engine.end_iteration()
        landed = int(self.landing.n[0]) if q >= 0 else 0
        if self.readahead and len(self.window):
            self._ahead = self._read_ahead()
        out = self._out.get(len(ids))
        out_bytes = out.view(np.uint8).reshape(len(ids), self.row_bytes)
        pool.gather(HIT, status, inverse, slot, src, out_bytes)
        t1 = time.perf_counter()
        if len(res.spill_slot):
            pool.move_spills(res.spill_slot, res.spill_dst)
        if res.counts["victim_hits"]:
            pool.gather(VICTIM_HIT, status, inverse, slot, src, out_bytes)
        t2 = time.perf_counter()
        if reading is not None:
            st["time_storage_busy_s"] += reading.result()
        if ahead is not None:
            self.store.counters.add(ahead[3])   # the read-ahead's I/O belongs to this batch
        t3 = time.perf_counter()
        pool.place_misses(status, inverse, slot, src, res.distinct, self.engine.keys,
                          staged.view(np.uint8).reshape(len(staged), self.row_bytes), out_bytes, kmap)
        self._last = (status, inverse)
        t4 = time.perf_counter()
        if q >= 0:
            pool.land(q, landed)
            st["prefetched"] += landed
            st["prefetch_bytes"] += landed * self.row_bytes
        t5 = time.perf_counter()
        self.window.clear()
        add_step_counts(self.counters, st, res.counts, self.row_bytes)
        st["time_cache_s"] += (t1 - t0) + (t4 - t3)
        st["time_victim_s"] += (t2 - t1) + (t5 - t4)
        st["time_storage_s"] += t3 - t2
        return out

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

    def _grown(self, buf: np.ndarray | None, n: int) -> np.ndarray:
        """`buf` if it holds n rows, else a new one of at least twice its rows (the store's
        aligned rows where it has them: the direct reader reads straight into those)."""
        if buf is not None and len(buf) >= n:
            return buf
        size = max(n, 2 * (0 if buf is None else len(buf)), 1024)
        empty = getattr(self.store, "empty_rows", None)
        return empty(size) if empty else np.empty((size, self.dim), self.dtype)

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

    # stats: the SourceStats dict above (src.stats["spilled"], src.stats() -> a copy); the
    # other reports are the shard's (lsm_gnn.sources.shard)
    def close(self) -> None:
        if self._reader is not None:
            self._reader.shutdown(wait=True)
            self._reader = None
        self.pool = self._staged = self._ahead = None
        self._ahead_rows = [None, None]
        self._close_store()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

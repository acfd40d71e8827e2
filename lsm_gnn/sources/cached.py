"""`CachedFeatureSource`: feature rows served through the LSM-GNN cache of one owner (host plane).

Per iteration the loop calls `advance(window)` with the next W batches' ids, then `fetch(ids)`.
The CPU engine decides (lookup, victims, spills); the row pool (lsm_gnn.cache.rowpool) holds the
rows of the cache lines, victim queues and landing buffer. The fetch order, read-ahead included, is
the one both data planes share (lsm_gnn.sources.shard); this plane says where rows land: in the
host row pool, where a row moves between tiers by moving its index (step 3's spills and step 5's
landing are index moves, the copies are the hits', the victim hits' and the storage rows' into the
output and the storage rows' into their lines).

Every row returned equals the row in storage; the counters say where it came from, and the stats
count the bytes a device would move between the tiers (victim_bytes, prefetch_bytes).
"""

from __future__ import annotations

import time

import numpy as np

from lsm_gnn.cache.engine import HIT, STORAGE, VICTIM_HIT
from lsm_gnn.cache.engines import make_engine
from lsm_gnn.cache.budget import MemoryBudget
from lsm_gnn.cache.rowpool import OutputRows, RowPool
from lsm_gnn.cache.victim import LandingBuffer, VictimQueues
from lsm_gnn.sources.shard import OwnerShard
from lsm_gnn.contract import SourceStats
from lsm_gnn.storage.base import FeatureStore
from lsm_gnn.utils.errors import ConfigError


def _check_budget_fits(budget: MemoryBudget, cfg) -> None:
    """The rows of a budget are allocated here (lines, queues, landing buffer): a capacity beyond this
    machine's memory is a ConfigError naming the key, before numpy is asked for it."""
    from lsm_gnn.utils.bounds import memory_bytes

    need = budget.total_rows * max(budget.row_bytes, 1)
    if need > memory_bytes():
        key = "cache.capacity_bytes" if cfg.capacity_bytes is not None else "cache.capacity_fraction"
        raise ConfigError("<config>", key, f"a budget of {budget.total_rows:,} rows ({need / 2**30:,.1f} GiB) per "
                                           f"device is more than this machine's memory "
                                           f"({memory_bytes() / 2**30:,.1f} GiB)")


class CachedFeatureSource(OwnerShard):
    """A FeatureSource (lsm_gnn.contract) backed by a FeatureStore and the cache engine.

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
        _check_budget_fits(self.budget, cfg)
        self.pvp = self.budget.pvp and self.enabled
        self.stats = SourceStats((k, 0) for k in ("iterations", "evictions", "spilled", "spill_dropped", "prefetched",
                                                  "prefetched_used", "victim_bytes", "prefetch_bytes", "bypassed"))
        # wall-clock segments of fetch (they add up to its time), plus the reads' own duration
        self.stats.update(time_cache_s=0.0, time_victim_s=0.0, time_storage_s=0.0, time_storage_busy_s=0.0)
        self.engine = self.pool = self.victims = self.landing = None
        self._init_readahead(cfg.readahead)
        self._landed = 0
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

    # ---- where rows land: the host row pool (the fetch order: lsm_gnn.sources.shard) ------------
    def _decide(self, ids: np.ndarray):
        res = self.engine.step(ids, *self.window.flat)
        st = self.stats
        st["lookahead_bytes"] = max(st["lookahead_bytes"], self.window.ids.nbytes + self.engine.lookahead_bytes())
        return res

    def _storage_ids(self, res) -> np.ndarray:
        return res.distinct[res.status == STORAGE]

    def _end_iteration(self) -> int:
        q = self.engine.end_iteration()
        self._landed = int(self.landing.n[0]) if q >= 0 else 0
        return q

    def _prepare(self, res) -> None:
        pass

    def _output(self, n: int) -> np.ndarray:
        return self._out.get(n)

    def _bytes(self, rows: np.ndarray) -> np.ndarray:
        return rows.view(np.uint8).reshape(len(rows), self.row_bytes)

    def _copy_hits(self, res, out) -> None:
        self.pool.gather(HIT, res.status, res.inverse, res.slot, res.src, self._bytes(out))

    def _copy_victims(self, res, out) -> None:
        if len(res.spill_slot):
            self.pool.move_spills(res.spill_slot, res.spill_dst)
        if res.counts["victim_hits"]:
            self.pool.gather(VICTIM_HIT, res.status, res.inverse, res.slot, res.src, self._bytes(out))

    def _arrived(self, staged: np.ndarray) -> np.ndarray:
        return staged

    def _place_misses(self, res, staged, kmap, out) -> None:
        self.pool.place_misses(res.status, res.inverse, res.slot, res.src, res.distinct, self.engine.keys,
                               self._bytes(staged), self._bytes(out), kmap)

    def _land(self, q: int) -> int:
        self.pool.land(q, self._landed)
        return self._landed

    def _served(self, res, out, storage_rows: int, landed: int) -> np.ndarray:
        return out

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
    # other reports and `close` are the shard's (lsm_gnn.sources.shard)

"""What every cache over one owner's rows sets up before its data plane (the host one in
lsm_gnn.sources.cached, the torch one in lsm_gnn.sources.cached_device): the store it falls back on,
the owner's id space, its memory budget, the future batches its policy reads and its tier
counters, and what both say about themselves through the FeatureSource contract (id checks, the
window, stage seconds, storage, memory). One place, so the two data planes cannot size, check or
report themselves differently."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from lsm_gnn.cache.budget import MemoryBudget, for_devices, memory_budget
from lsm_gnn.cache.geometry import check_owned_ids, check_owner_store
from lsm_gnn.ownership import local_rows
from lsm_gnn.cache.policies import lookahead_horizon
from lsm_gnn.cache.window import LookaheadWindow
from lsm_gnn.sources.contract import STAGES, FeatureSource, TierCounters


def cache_stage_seconds(stats: dict) -> dict:
    """Per-stage seconds of a cache's stats (time_cache_s, time_victim_s, time_storage_s)."""
    return {s: float(stats.get(f"time_{s}_s", 0.0)) for s in STAGES}


class OwnerShard(FeatureSource):
    """A FeatureSource over one owner's rows; a data plane adds `_fetch`, `stats` and `close`
    (which calls `_close_store`), and `_last_on_host` where its decisions live on a device."""

    _owns_store = False   # close() closes the store too (what make_feature_source asks for)

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

    def _close_store(self) -> None:
        if self._owns_store:
            self._owns_store = False
            self.store.close()

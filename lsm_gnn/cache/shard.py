"""What every cache over one owner's rows sets up before its data plane (the host one in
lsm_gnn.cache.fetcher, the torch one in lsm_gnn.cache.device_source): the store it falls back on,
the owner's id space, its memory budget, the future batches its policy reads and its tier
counters. One place, so the two data planes cannot size or check themselves differently."""

from __future__ import annotations

from lsm_gnn.cache.budget import MemoryBudget, memory_budget
from lsm_gnn.cache.geometry import check_owner_store, local_rows
from lsm_gnn.cache.policies import lookahead_batches
from lsm_gnn.cache.window import LookaheadWindow
from lsm_gnn.features import TierCounters


class OwnerShard:
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
        self.window = LookaheadWindow(lookahead_batches(cfg.policy, cfg.window, getattr(cfg, "lookahead", None)))
        self.counters = TierCounters()
        self._last = None  # (status, inverse) of the last fetch, for last_tiers

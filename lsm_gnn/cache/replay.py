"""Decision replay: run a request trace through one owner's cache, no feature data moved.

`replay(batches, cfg, ...)` is what the simulator calls: batches are the ids this owner serves,
one array per iteration (duplicates allowed); the lookahead window of iteration t is
batches[t+1 : t+1+W] (t+1+K for a long-lookahead policy). The result has per-batch and total counts with the same names as the
fetcher's counters.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from lsm_gnn.cache.budget import MemoryBudget, lookahead_bytes
from lsm_gnn.cache.engine import COUNT_NAMES
from lsm_gnn.cache.engines import ENGINES, make_engine
from lsm_gnn.cache.geometry import cache_geometry, check_owned_ids, check_owner_args
from lsm_gnn.ownership import local_rows
from lsm_gnn.cache.policies import get_policy, lookahead_horizon, resolve_policy
from lsm_gnn.cache.window import MAX_ITERATIONS, ring_capacity
from lsm_gnn.metrics import distinct_hit_rate
from lsm_gnn.utils.errors import InputError


@dataclass
class ReplayResult:
    """Counts per batch (`per_batch[name]`, one int64 per iteration) and in total.

    requests: ids asked for; distinct: after coalescing duplicates; hits: distinct ids found in
    the cache; victim_hits: found in the PVP landing buffer; storage_rows: read from storage
    (hits + victim_hits + storage_rows == distinct); evictions; spills: evicted lines copied to
    the victim buffer; spill_dropped: evicted with a known reuse but their queue was full;
    prefetched: lines moved to the landing buffer at the end of the iteration; bypassed: misses
    the policy did not cache (admission control). `lookahead`: the host memory of the lookahead
    window (budget.lookahead_bytes; not feature memory).
    """

    per_batch: dict[str, np.ndarray]
    policy: str
    engine: str
    capacity_rows: int
    sets: int
    ways: int
    seconds: float = 0.0
    config: dict = field(default_factory=dict)
    lookahead: dict = field(default_factory=dict)

    @property
    def totals(self) -> dict[str, int]:
        return {k: int(v.sum()) for k, v in self.per_batch.items()}

    @property
    def num_batches(self) -> int:
        return len(self.per_batch["requests"])

    def distinct_hit_rate(self) -> float:
        """(cache + victim hits) / distinct rows (lsm_gnn.metrics.distinct_hit_rate)."""
        return distinct_hit_rate(self.totals)

    def as_dict(self) -> dict:
        return {"policy": self.policy, "engine": self.engine, "capacity_rows": self.capacity_rows,
                "sets": self.sets, "ways": self.ways, "seconds": self.seconds,
                "totals": self.totals, "distinct_hit_rate": self.distinct_hit_rate(), "config": self.config,
                "lookahead": self.lookahead}


def flatten_batches(batches: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, offsets) with batch b at ids[offsets[b]:offsets[b+1]]."""
    offsets = np.zeros(len(batches) + 1, np.int64)
    np.cumsum([len(b) for b in batches], out=offsets[1:])
    flat = np.concatenate([np.asarray(b).ravel() for b in batches]) if len(batches) else np.zeros(0, np.int64)
    return flat, offsets


def replay(batches: Sequence[np.ndarray], cfg, num_rows: int, static_scores: np.ndarray, *,
           budget: MemoryBudget, num_owners: int = 1, owner: int = 0, engine: str = "cpu") -> ReplayResult:
    """Replay `batches` through the cache described by `cfg` (a CacheConfig).

    `budget` (lsm_gnn.cache.budget) gives the cache lines and the victim-buffer depth. The policy is cfg.policy (hybrid runs in the prefetcher order when the victim buffer is
    enabled and W > 0); cfg.enabled=False replays a cache of no lines (every distinct id is a
    storage read). `engine`: "cpu" (numba), "reference" (pure Python, slow) or "gpu" (CuPy, when
    lsm_gnn.cache.gpu is installed and a GPU is present).
    """
    check_owner_args(num_rows, num_owners, owner)
    if engine not in ENGINES:
        raise InputError(f"engine must be one of {ENGINES}, found {engine!r}")
    if len(batches) > MAX_ITERATIONS:
        raise InputError(f"at most {MAX_ITERATIONS} batches per replay, found {len(batches)}")
    flat, offsets = flatten_batches(batches)
    flat = check_owned_ids(flat, num_rows, num_owners, owner, "batches")
    capacity_rows = budget.cache_rows
    pvp = budget.pvp
    policy = resolve_policy(cfg.policy, pvp)
    batches_ahead = lookahead_horizon(cfg)  # resolving hybrid to hybrid_pvp keeps its (short) lookahead
    config = {"ways": cfg.ways, "window": cfg.window, "refresh_every": cfg.refresh_every,
              "victim_buffer": pvp, "victim_depth": budget.victim_depth, "lookahead": batches_ahead,
              "num_owners": num_owners, "owner": owner}
    start = time.perf_counter()
    if not cfg.enabled or capacity_rows < 1:
        rows = _no_cache(flat, offsets)
        sets = ways = capacity = 0
        policy = "none"
    else:
        geo = cache_geometry(capacity_rows, cfg.ways)
        sets, ways, capacity = geo.sets, geo.ways, int(capacity_rows)
        eng = make_engine(cfg, budget, num_rows, static_scores, num_owners=num_owners, owner=owner, kind=engine)
        if engine == "reference":
            rows = eng.replay([flat[offsets[b]: offsets[b + 1]] for b in range(len(offsets) - 1)])
        else:
            rows = eng.replay(flat, offsets)
    seconds = time.perf_counter() - start
    per_batch = {name: np.ascontiguousarray(rows[:, i]) for i, name in enumerate(COUNT_NAMES)}
    ring = get_policy(policy).long_lookahead if policy != "none" else False
    return ReplayResult(per_batch, policy, engine, capacity, sets, ways, seconds, config,
                        window_memory(offsets, batches_ahead, local_rows(num_rows, num_owners), ring=ring))


def window_memory(offsets: np.ndarray, lookahead: int, owned_rows: int, *, ring: bool = True) -> dict:
    """budget.lookahead_bytes of a trace: the most ids in `lookahead` consecutive batches (the
    window handed to the engine) and, with `ring` (a long-lookahead policy), the CPU engine's
    ring (records of lookahead + 1 batches, one per owned row)."""
    offsets = np.asarray(offsets, np.int64)
    nb = len(offsets) - 1
    window = 0
    if nb > 1 and lookahead > 0:
        ends = offsets[np.minimum(np.arange(1, nb) + lookahead, nb)]
        window = int((ends - offsets[1:nb]).max())
    if not ring:
        return {"lookahead_batches": int(lookahead), "window_ids_bytes": 8 * window, "engine_ring_bytes": 0,
                "lookahead_bytes": 8 * window}
    return lookahead_bytes(window, ring_capacity(offsets, lookahead) if lookahead else 0, owned_rows, lookahead)


def _no_cache(flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    rows = np.zeros((len(offsets) - 1, len(COUNT_NAMES)), np.int64)
    for b in range(len(offsets) - 1):
        ids = flat[offsets[b]: offsets[b + 1]]
        d = len(np.unique(ids))
        rows[b, 0], rows[b, 1], rows[b, 4] = len(ids), d, d
    return rows

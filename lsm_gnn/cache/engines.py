"""The one place a cache engine is built from the config.

`engine_settings(cfg, budget)` maps a CacheConfig (lsm_gnn.config: where every default is written)
and one device's memory budget (lsm_gnn.cache.budget) to the engines' arguments; `make_engine`
builds the engine `cache.engine` names with them: "cpu" (CpuCacheEngine, numba), "gpu"
(GpuCacheEngine, CuPy; InputError without CuPy and a GPU) or "reference" (ReferenceCache, pure
Python). The engines have no defaults of their own, so the decision replay (cache.replay), the
host data plane (sources.cached), the device data plane (sources.cached_device) and the benchmarks
run the settings of the same config the same way.
"""

from __future__ import annotations

import numpy as np

from lsm_gnn.cache.budget import MemoryBudget
from lsm_gnn.choices import ENGINES  # noqa: F401 (re-exported: the one list of cache.engine's values)
from lsm_gnn.utils.errors import InputError

def engine_settings(cfg, budget: MemoryBudget, *, num_owners: int = 1, owner: int = 0) -> dict:
    """The engines' keyword arguments for a CacheConfig and a budget: the config's ways, policy,
    window, refresh_every and lookahead; the budget's victim buffer (on when it has lines and W >
    0; its depth, at least 1); the owner of the cache among `num_owners`."""
    return dict(ways=int(cfg.ways), policy=cfg.policy, window=int(cfg.window), refresh_every=int(cfg.refresh_every),
                pvp=bool(budget.pvp), victim_depth=int(budget.engine_depth), lookahead=int(cfg.lookahead),
                num_owners=int(num_owners), owner=int(owner))


def make_engine(cfg, budget: MemoryBudget, num_rows: int, static_scores: np.ndarray, *, num_owners: int = 1,
                owner: int = 0, kind: str | None = None, victims=None, landing=None):
    """The engine of one owner's cache: `budget.cache_rows` lines over `num_rows` rows, with the
    settings of `cfg` (engine_settings). `kind` overrides cfg.engine; `victims` / `landing`: the
    victim queues and landing buffer to share (the data planes; the cpu and gpu engines)."""
    kind = cfg.engine if kind is None else kind
    if kind not in ENGINES:
        raise InputError(f"unknown cache engine {kind!r}; expected one of {', '.join(map(repr, ENGINES))}")
    kw = engine_settings(cfg, budget, num_owners=num_owners, owner=owner)
    if kind == "reference":
        if victims is not None or landing is not None:
            raise InputError("the reference engine keeps its own victim queues and landing buffer")
        from lsm_gnn.cache.reference import ReferenceCache

        return ReferenceCache(budget.cache_rows, num_rows, static_scores, **kw)
    if kind == "cpu":
        from lsm_gnn.cache.engine import CpuCacheEngine as engine_cls
    else:
        from lsm_gnn.cache.gpu_engine import GpuCacheEngine as engine_cls
    return engine_cls(budget.cache_rows, num_rows, static_scores, victims=victims, landing=landing, **kw)

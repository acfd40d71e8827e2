"""The LSM-GNN cache engine: set-associative feature cache, eviction policies, lookahead reuse
tags, victim buffer and PVP (docs/cache.md; the exact contract: docs/cache-semantics.md).

Modules: geometry (sets/ways, ownership), window (reuse tags), policies (plug-ins + kernels),
victim (victim queues, landing buffer), engine (CPU engine, numba), reference (pure Python),
replay (decision replay for the simulator), fetcher (CachedFeatureSource), bench (CLI).
"""

from lsm_gnn.cache.engine import CpuCacheEngine
from lsm_gnn.cache.fetcher import CachedFeatureSource
from lsm_gnn.cache.policies import REGISTRY, EvictionPolicy, get_policy, register_policy
from lsm_gnn.cache.replay import ReplayResult, replay

__all__ = ["CachedFeatureSource", "CpuCacheEngine", "EvictionPolicy", "REGISTRY", "ReplayResult",
           "get_policy", "register_policy", "replay"]

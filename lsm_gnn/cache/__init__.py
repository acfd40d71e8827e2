"""The LSM-GNN cache engine: set-associative feature cache, eviction policies, lookahead reuse
tags, victim buffer and PVP (docs/cache.md; the exact contract: docs/cache-semantics.md).

Modules: budget (one memory budget per device, split between cache lines and the victim buffer),
geometry (sets/ways, ownership), window (reuse tags), policies (plug-ins + kernels),
victim (victim queues, landing buffer), engines (the one factory from the config), engine (CPU
engine, numba), gpu_engine (CuPy), device_pool (a device's rows: lines, queues, landing buffer) and
serve (the plan of a batch's row moves without a host sync, run by torch or cuda/cache_serve.cu),
reference (pure Python),
replay (decision replay for the simulator), bench (CLI). The cache's feature sources (host and
device data planes) are lsm_gnn.sources.cached and lsm_gnn.sources.cached_device.
"""

from lsm_gnn.cache.budget import MemoryBudget, memory_budget
from lsm_gnn.cache.engine import CpuCacheEngine
from lsm_gnn.cache.policies import REGISTRY, EvictionPolicy, get_policy, register_policy
from lsm_gnn.cache.replay import ReplayResult, replay

__all__ = ["CpuCacheEngine", "EvictionPolicy", "MemoryBudget", "memory_budget", "REGISTRY", "ReplayResult",
           "get_policy", "register_policy", "replay"]


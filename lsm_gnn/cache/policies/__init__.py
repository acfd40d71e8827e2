"""Eviction policies as plug-ins: one module per policy, one registry.

Each module (round_robin, static, dynamic, hybrid, lru, sieve, horizon) holds the policy's
Python class, whose hooks the reference engine calls (on_hit, on_fill, victim, admit, on_evict:
base.EvictionPolicy), and its numba hooks, which the CPU engine calls through the dispatchers of
`kernels` by the policy's code; cuda/policies/<name>.cuh holds the same hooks for the GPU engine.
The registry below is the one list of policies: `lsm_gnn.config` derives the names a config may
use from it (`configurable_names`), the simulator's `--policy all` runs them all.

Adding a policy: a module with a subclass of EvictionPolicy (a new code) and its kernel hooks,
a branch in kernels.py and in cuda/cache_fill.cu, `register_policy` here.
"""

from __future__ import annotations

from lsm_gnn.cache.policies.base import (DYNAMIC, HORIZON, HYBRID, HYBRID_PVP, LRU, RR, SIEVE, STATE_ORDER,
                                         STATE_SPECS, STATIC, EvictionPolicy, LineView)
from lsm_gnn.cache.policies.dynamic import Dynamic
from lsm_gnn.cache.policies.horizon import DEFAULT_LOOKAHEAD, Horizon
from lsm_gnn.cache.policies.hybrid import Hybrid, HybridPVP
from lsm_gnn.cache.policies.lru import LeastRecentlyUsed
from lsm_gnn.cache.policies.round_robin import RoundRobin
from lsm_gnn.cache.policies.sieve import Sieve
from lsm_gnn.cache.policies.static import Static
from lsm_gnn.utils.errors import InputError

REGISTRY: dict[str, type[EvictionPolicy]] = {}


def register_policy(cls: type[EvictionPolicy]) -> type[EvictionPolicy]:
    """Add a policy class to the registry (the reference engine can run any registered policy;
    the CPU and GPU engines run those whose code is in KERNEL_CODES)."""
    REGISTRY[cls.name] = cls
    return cls


for _cls in (RoundRobin, Static, Dynamic, Hybrid, HybridPVP, LeastRecentlyUsed, Sieve, Horizon):
    register_policy(_cls)

# codes with kernel hooks (kernels.py, cuda/policies/*.cuh)
KERNEL_CODES = frozenset((RR, STATIC, DYNAMIC, HYBRID, HYBRID_PVP, LRU, SIEVE, HORIZON))


def configurable_names() -> tuple[str, ...]:
    """The names cache.policy accepts, in registration order (lsm_gnn.config.POLICIES)."""
    return tuple(name for name, cls in REGISTRY.items() if cls.configurable)


def get_policy(name: str) -> EvictionPolicy:
    try:
        return REGISTRY[name]()
    except KeyError:
        raise InputError(f"unknown eviction policy {name!r}; expected one of {sorted(REGISTRY)}") from None


def resolve_policy(policy: str, pvp: bool) -> str:
    """The policy that actually runs: hybrid uses the prefetcher order when PVP is on (as the
    paper's code does); every other name runs as given."""
    if policy == "hybrid" and pvp:
        return "hybrid_pvp"
    return policy


def lookahead_batches(policy: str, window: int, lookahead: int | None) -> int:
    """Future batches the policy reads: K (`lookahead`, default DEFAULT_LOOKAHEAD) for a
    long-lookahead policy, else the window W. The loader samples this many batches ahead and the
    feature source hands them to the engine."""
    if get_policy(policy).long_lookahead:
        return int(DEFAULT_LOOKAHEAD if lookahead is None else lookahead)
    return int(window)


def default_host_fraction(policy: str) -> float:
    """The policy's share of the budget for the host tier when the config leaves it unset."""
    return float(get_policy(policy).host_fraction)


def state_arrays(policy: str, lines: int, sets: int, xp=None) -> dict:
    """The kernel state arrays of `policy` (STATE_SPECS order; empty for state it does not keep),
    as NumPy arrays or, with `xp` (cupy), device arrays."""
    import numpy as np

    xp = xp or np
    used = set(get_policy(policy).state)
    out = {}
    for name, (dtype, per, init) in STATE_SPECS.items():
        n = (lines if per == "line" else sets) if name in used else 0
        out[name] = xp.full(n, init, dtype=dtype)
    return out


__all__ = ["REGISTRY", "KERNEL_CODES", "EvictionPolicy", "LineView", "register_policy", "get_policy",
           "resolve_policy", "configurable_names", "lookahead_batches", "default_host_fraction", "state_arrays",
           "STATE_ORDER", "STATE_SPECS", "RR", "STATIC", "DYNAMIC", "HYBRID", "HYBRID_PVP", "LRU", "SIEVE",
           "HORIZON", "DEFAULT_LOOKAHEAD"]

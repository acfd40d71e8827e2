"""Eviction policies as plug-ins: one module per policy, one registry.

Each module (round_robin, static, dynamic, hybrid, lru, sieve, horizon) holds the policy's
Python class, whose hooks the reference engine calls (on_hit, on_fill, victim, admit, on_evict:
base.EvictionPolicy), its traits (long_lookahead, admission, victim_choice, state) and its table
of numba hooks (`kernels`), which the CPU engine's kernels inline (`kernels.py` resolves them at
compile time from the registry); cuda/policies/<module>.cuh holds the same hooks for the GPU
engine, whose dispatch by policy code `lsm_gnn.cache.gpu_codegen.policy_dispatch()` generates from
the registry. The registry below is the one list of policies: `lsm_gnn.config` derives the names
a config may use from it (`configurable_names`), the simulator's `--policy all`, the tests and
the benchmarks run them all.

Adding a policy: a module with a subclass of EvictionPolicy (its reference hooks, traits and
numba hooks), its CUDA header cuda/policies/<module>.cuh, and one line in BUILTIN below (a
policy outside the package calls `register_policy` itself; tests/test_cache_policy_plugin.py
adds one in a test).
"""

from __future__ import annotations

import hashlib
import inspect
import sys

from lsm_gnn.cache.policies.base import (KERNEL_HOOKS, STATE_ORDER, STATE_SPECS, VICTIM_CHOICES, EvictionPolicy,
                                         LineView)
from lsm_gnn.cache.policies.dynamic import Dynamic
from lsm_gnn.cache.policies.horizon import Horizon
from lsm_gnn.cache.policies.hybrid import Hybrid, HybridPVP
from lsm_gnn.cache.policies.lru import LeastRecentlyUsed
from lsm_gnn.cache.policies.round_robin import RoundRobin
from lsm_gnn.cache.policies.sieve import Sieve
from lsm_gnn.cache.policies.static import Static
from lsm_gnn.utils.errors import InputError

REGISTRY: dict[str, type[EvictionPolicy]] = {}
_BY_KEY: dict[str, type[EvictionPolicy]] = {}

# the built-in policies, in the order of their codes (one line per policy)
BUILTIN = (
    RoundRobin,
    Static,
    Dynamic,
    Hybrid,
    HybridPVP,
    LeastRecentlyUsed,
    Sieve,
    Horizon,
)


def _module_digest(cls) -> str:
    """A digest of the module that defines `cls` (its numba hooks): the CPU kernels compiled for
    the policy are cached under it, so an edit of the module compiles them afresh."""
    try:
        text = inspect.getsource(sys.modules[cls.__module__])
    except (OSError, TypeError, KeyError):
        text = f"{cls.__module__}.{cls.__qualname__}@{id(cls)}"
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def register_policy(cls: type[EvictionPolicy]) -> type[EvictionPolicy]:
    """Add a policy class to the registry and give it its `code` (the next free one) and
    `kernel_key`. The reference engine can run any registered policy; the CPU engine one with a
    `kernels` table (a `victim` hook at least), the GPU engine one whose CUDA header is in cuda/."""
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        raise InputError(f"policy {cls.__qualname__}: `name` must be an identifier, found {name!r}")
    if name in REGISTRY and REGISTRY[name] is not cls:
        raise InputError(f"policy {name!r} is already registered ({REGISTRY[name].__qualname__})")
    if cls.victim_choice not in VICTIM_CHOICES:
        raise InputError(f"policy {name!r}: victim_choice must be one of {VICTIM_CHOICES}, found "
                         f"{cls.victim_choice!r}")
    unknown = set(cls.state) - set(STATE_SPECS)
    if unknown:
        raise InputError(f"policy {name!r}: unknown kernel state {sorted(unknown)}; expected names of "
                         f"{list(STATE_SPECS)}")
    hooks = set(cls.kernels)
    if hooks and ("victim" not in hooks or hooks - set(KERNEL_HOOKS)):
        raise InputError(f"policy {name!r}: kernels must name a 'victim' hook and only {list(KERNEL_HOOKS)}, "
                         f"found {sorted(hooks)}")
    if ("admit" in hooks) != bool(cls.admission) and hooks:
        raise InputError(f"policy {name!r}: admission={cls.admission} but its kernels "
                         f"{'lack' if cls.admission else 'have'} an 'admit' hook")
    if name not in REGISTRY:  # the next code: never one a registered policy holds
        cls.code = max((c.code for c in REGISTRY.values()), default=-1) + 1
    cls.kernel_key = f"{name}:{_module_digest(cls)}"
    REGISTRY[name] = cls
    _BY_KEY[cls.kernel_key] = cls
    return cls


def unregister_policy(name: str) -> None:
    """Remove a policy registered after the built-in ones (tests that add one)."""
    cls = REGISTRY.get(name)
    if cls is None:
        return
    if cls in BUILTIN:
        raise InputError(f"policy {name!r} is built in")
    del REGISTRY[name]
    _BY_KEY.pop(cls.kernel_key, None)


for _cls in BUILTIN:
    register_policy(_cls)


def policy_class(name: str) -> type[EvictionPolicy]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown eviction policy {name!r}; expected one of {sorted(REGISTRY)}") from None


def by_kernel_key(key: str) -> type[EvictionPolicy]:
    """The registered policy of a `kernel_key` (the CPU kernels' compile-time lookup)."""
    return _BY_KEY[key]


def configurable_names() -> tuple[str, ...]:
    """The names cache.policy accepts, in registration order (lsm_gnn.config.POLICIES)."""
    return tuple(name for name, cls in REGISTRY.items() if cls.configurable)


def kernel_names() -> tuple[str, ...]:
    """The registered policies the CPU engine can run (those with numba hooks), in code order."""
    return tuple(name for name, cls in REGISTRY.items() if cls.kernels)


def get_policy(name: str) -> EvictionPolicy:
    return policy_class(name)()


def resolve_policy(policy: str, pvp: bool) -> str:
    """The policy that actually runs: hybrid uses the prefetcher order when PVP is on (as the
    paper's code does); every other name runs as given."""
    if policy == "hybrid" and pvp:
        return "hybrid_pvp"
    return policy


def lookahead_horizon(cache=None, *, policy: str | None = None, window: int | None = None,
                      lookahead: int | None = None) -> int:
    """The lookahead horizon: the future batches the policy reads, K (`lookahead`,
    cache.lookahead) for a long-lookahead policy, else the window W (`window`). Of a cache config
    (`cache.policy`, `cache.window`, `cache.lookahead`: a CacheConfig or anything with those
    fields), or of the three fields an engine is built from (keywords). The one derivation:
    CacheConfig.horizon, every loader, source, factory, worker and replay, and the engines read it
    here. The loader samples this many batches ahead and the feature source hands them to the engine."""
    if cache is not None:
        policy, window, lookahead = cache.policy, cache.window, cache.lookahead
    if policy_class(policy).long_lookahead:
        return int(lookahead)
    return int(window)


def default_host_fraction(policy: str) -> float:
    """The policy's share of the budget for the host tier when the config leaves it unset."""
    return float(policy_class(policy).host_fraction)


def state_arrays(policy: str, lines: int, sets: int, xp=None) -> dict:
    """The kernel state arrays of `policy` (STATE_SPECS order; empty for state it does not keep),
    as NumPy arrays or, with `xp` (cupy), device arrays."""
    import numpy as np

    xp = xp or np
    used = set(policy_class(policy).state)
    out = {}
    for name, (dtype, per, init) in STATE_SPECS.items():
        n = (lines if per == "line" else sets) if name in used else 0
        out[name] = xp.full(n, init, dtype=dtype)
    return out


__all__ = ["REGISTRY", "BUILTIN", "EvictionPolicy", "LineView", "register_policy", "unregister_policy",
           "policy_class", "by_kernel_key", "get_policy", "resolve_policy", "configurable_names", "kernel_names",
           "lookahead_horizon", "default_host_fraction", "state_arrays", "STATE_ORDER", "STATE_SPECS",
           "KERNEL_HOOKS"]

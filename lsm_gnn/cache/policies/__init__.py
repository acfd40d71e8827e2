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

Adding a built-in policy: a module with a subclass of EvictionPolicy (its reference hooks, traits
and numba hooks), its CUDA header cuda/policies/<module>.cuh, and one line in BUILTIN below.

A policy outside the package is one file and no line here: wherever a policy name is resolved
(`policy_class`, the one resolver: the config's validation of cache.policy, `lsm-gnn simulate
--policy`, every engine, every spawned rank when it re-parses its config) a name
`package.module:Class` or `path/to/file.py:Class` imports that class and registers it (the name
stays what the config holds, so a rank or a Snakemake job that re-reads it resolves it again), and
`installed_policies()` registers those of the entry-point group `lsm_gnn.policies` (`--policy
all`; a plain name that is an installed entry point's resolves too). It keeps its own state in
`slots` (base.StateSlot) and gives its CUDA hooks as text (`cuda_source`); without them it runs on
the reference and CPU engines and the simulator, and the GPU engine refuses it, naming what is
missing. examples/policies/lfu.py is one; docs/cache.md walks through it.
"""

from __future__ import annotations

import hashlib
import inspect
import sys

from lsm_gnn.cache.policies import outside
from lsm_gnn.cache.policies.base import (KERNEL_HOOKS, STATE_ORDER, STATE_SPECS, VICTIM_CHOICES, EvictionPolicy,
                                         LineView, StateSlot)
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
_BY_SPEC: dict[str, type[EvictionPolicy]] = {}  # 'module:Class' / 'file.py:Class' -> the class it named

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
    """A digest of the module that defines `cls` (its numba hooks), and of its name: the CPU kernels
    compiled for the policy are cached under it, so an edit of the module compiles them afresh, and
    a file imported under two names (examples/policies/lfu.py:LFU and examples.policies.lfu:LFU)
    has two entries (numba's cached kernel imports the module it was compiled with when it loads)."""
    try:
        text = inspect.getsource(sys.modules[cls.__module__])
    except (OSError, TypeError, KeyError):
        text = f"@{id(cls)}"
    return hashlib.sha1(f"{cls.__module__}.{cls.__qualname__}\n{text}".encode()).hexdigest()[:12]


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
                         f"{list(STATE_SPECS)} (or state of its own: `slots`)")
    slots = cls.__dict__.get("slots", cls.slots)
    if not isinstance(slots, dict) or not all(isinstance(k, str) and k.isidentifier() and isinstance(v, StateSlot)
                                              for k, v in slots.items()):
        raise InputError(f"policy {name!r}: `slots` must map identifiers to StateSlot(dtype, per, init), "
                         f"found {slots!r}")
    if slots and cls.state:
        raise InputError(f"policy {name!r}: keeps both built-in `state` {list(cls.state)} and `slots` "
                         f"{list(slots)}; expected one of them (its hooks get one tuple)")
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
    for spec in [k for k, v in _BY_SPEC.items() if v is cls]:
        del _BY_SPEC[spec]


for _cls in BUILTIN:
    register_policy(_cls)


def policy_class(name: str) -> type[EvictionPolicy]:
    """The policy `name` names, registered on first use: a registered name; `package.module:Class`
    or `path/to/file.py:Class` (imported: lsm_gnn.cache.policies.outside); or the name of an
    installed entry point of the group `lsm_gnn.policies`. The one resolver of policy names."""
    cls = REGISTRY.get(name)
    if cls is not None:
        return cls
    if not isinstance(name, str):
        raise InputError(f"an eviction policy name is a string, found {name!r}")
    if outside.is_spec(name):
        cls = _BY_SPEC.get(name)
        if cls is None:
            cls = register_policy(outside.import_policy_class(name))
            _BY_SPEC[name] = cls
        return cls
    for ep in outside.entry_points():
        if ep.name == name:
            return register_policy(outside.load_entry_point(ep))
    raise InputError(f"unknown eviction policy {name!r}; expected one of {list(configurable_names())}, an installed "
                     f"policy of the entry-point group {outside.ENTRY_POINT_GROUP!r}, or a class of your own: "
                     f"{outside.FORMS}")


def installed_policies() -> tuple[str, ...]:
    """Register every policy of the entry-point group `lsm_gnn.policies`; their names (in the
    order the group lists them). `--policy all` runs them beside the built-in ones."""
    return tuple(register_policy(outside.load_entry_point(ep)).name for ep in outside.entry_points())


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
    """The registered name of the policy that actually runs: hybrid uses the prefetcher order when
    PVP is on (as the paper's code does); every other name runs as given (an outside policy's
    `module:Class` as the name its class registers)."""
    if policy == "hybrid" and pvp:
        return "hybrid_pvp"
    return policy_class(policy).name


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


def kernel_classes() -> tuple[type[EvictionPolicy], ...]:
    """The registered policies with numba hooks, in code order: the policies the CPU kernels'
    dispatch holds (kernels.table()) and whose slots the state tuple holds (state_layout)."""
    return tuple(cls for cls in REGISTRY.values() if cls.kernels)


def state_layout(classes) -> tuple[tuple[str, StateSlot | tuple, str | None], ...]:
    """The kernels' state tuple for the policies `classes` (kernel_classes(), in order): the
    built-in arrays of STATE_SPECS, then every slot of each policy that declares `slots`, as
    (key, spec, owner): key the array's name (`<policy>.<slot>` for a slot), owner its policy
    (None: built in). slot_offsets gives where each policy's slots start."""
    out = [(n, STATE_SPECS[n], None) for n in STATE_ORDER]
    for cls in classes:
        out += [(f"{cls.name}.{k}", v, cls.name) for k, v in cls.slots.items()]
    return tuple(out)


def slot_offsets(classes) -> dict[str, int]:
    """Policy name -> the index of its first slot in the state tuple of `classes` (state_layout)."""
    out, i = {}, len(STATE_ORDER)
    for cls in classes:
        if cls.slots:
            out[cls.name] = i
            i += len(cls.slots)
    return out


def state_arrays(policy: str, lines: int, sets: int, xp=None, classes=None) -> dict:
    """The kernel state arrays of `policy` over the layout of `classes` (state_layout; default the
    registry's kernel_classes()): full size for the state it keeps (its `state`, or its `slots`),
    empty for every other entry, as NumPy arrays or, with `xp` (cupy), device arrays. Keys as in
    state_layout; the dict's order is the kernels' tuple."""
    import numpy as np

    xp = xp or np
    cls = policy_class(policy)
    classes = kernel_classes() if classes is None else classes
    out = {}
    for key, spec, owner in state_layout(classes):
        if owner is None:
            dtype, per, init = spec
            used = key in cls.state
        else:
            dtype, per, init = spec.dtype, spec.per, spec.init
            used = owner == cls.name
        n = (lines if per == "line" else sets) if used else 0
        out[key] = xp.full(n, init, dtype=dtype)
    return out


__all__ = ["REGISTRY", "BUILTIN", "EvictionPolicy", "LineView", "register_policy", "unregister_policy",
           "policy_class", "by_kernel_key", "get_policy", "resolve_policy", "configurable_names", "kernel_names",
           "lookahead_horizon", "default_host_fraction", "state_arrays", "state_layout", "slot_offsets",
           "kernel_classes", "installed_policies", "StateSlot", "STATE_ORDER", "STATE_SPECS", "KERNEL_HOOKS"]

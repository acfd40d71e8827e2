"""What every eviction policy plug-in is: its traits, the reference hooks, its kernel hooks.

A policy is one module (libCacheSim's shape: one file per policy filling one hook table) and one
line of the registry (`lsm_gnn.cache.policies`); its CUDA hooks are one header,
cuda/policies/<module>.cuh. The module holds, with identical decisions (docs/cache-semantics.md,
"Victim choice"):

* a Python class (`EvictionPolicy`) whose hooks the pure-Python reference engine calls, written
  to be read: `on_hit`, `on_fill`, `victim` (sees one full set as `LineView`s), `on_evict`, and
  `admit` (admission control: may a miss be cached at all);
* numba hooks (`kernels`: a table of `@njit(forceinline=True, _nrt=False)` functions with the
  signatures of `KERNEL_HOOKS`), which the CPU engine's kernels call through
  `lsm_gnn.cache.policies.kernels`; the CPU engine is compiled once per policy with its hooks
  inlined.

The traits the engines ask instead of naming a policy: `long_lookahead` (reads K batches, tags
exact and fills tagged at once), `admission` (has an `admit` hook: may refuse a miss),
`victim_choice` ("key": the victim is the way of the minimum of a per-way key, a warp reduction on
the GPU; "scan": a sequential walk that mutates per-set state, lane 0 on the GPU) and its kernel
state: either `state` (names of the built-in arrays `STATE_SPECS`, which the built-in policies
share; its hooks index the tuple of all of them with the constants below) or `slots` (arrays of its
own, `StateSlot`s: dtype, per line or per set, initial value; its hooks receive a tuple of just
those, in the order declared), so that a policy from outside the package needs no line here. The
engines allocate what a policy keeps and give everything else an empty array, so they know nothing
of LRU stamps, SIEVE lists or an outside policy's counters. The
registry assigns `code` (the GPU kernels' runtime policy number) and `kernel_key` (the CPU
kernels' compile-time identity: name and a digest of the module's source).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from lsm_gnn.cache.window import FRESH, NO_REUSE
from lsm_gnn.utils.errors import InputError

# Kernel policy state: name -> (dtype, "line" | "set", initial value). The kernels receive the
# arrays as one tuple in this order (indices below).
STATE_SPECS: dict[str, tuple[type, str, int]] = {
    "stamp": (np.int64, "line", 0),     # LRU: iteration of the last hit or fill + 1
    "visited": (np.uint8, "line", 0),   # SIEVE: visited bit
    "newer": (np.int32, "line", -1),    # SIEVE: FIFO list links (ways), -1: none
    "older": (np.int32, "line", -1),
    "rr": (np.int64, "set", 0),         # round robin: evictions so far
    "head": (np.int32, "set", -1),      # SIEVE: newest way, oldest way, hand (-1: none)
    "tail": (np.int32, "set", -1),
    "hand": (np.int32, "set", -1),
}
STATE_ORDER = tuple(STATE_SPECS)
STAMP, VISITED, NEWER, OLDER, RR_COUNTER, HEAD, TAIL, HAND = range(len(STATE_ORDER))

# The numba hooks a policy's `kernels` table may hold, with the arguments the CPU engine passes
# (`ps`: the tuple of state arrays in STATE_ORDER; `sl` = base + way a slot, `si` its set, `base`
# the set's first slot, `now` = t + 1). Only `victim` is required; a missing hook does nothing
# (admit: always). cuda/policies/<module>.cuh defines `<name>_<hook>` for the same hooks
# (`<name>_victim_key` for a "key" victim choice), with the signatures of lsm_gnn.cache.gpu_codegen.CUDA_HOOKS.
KERNEL_HOOKS: dict[str, str] = {
    "on_hit": "(ps, sl, now)",
    "victim": "(ps, si, base, ways, t, window, pagerank, tag) -> way, or for a 'key' policy the same answer",
    "admit": "(ps, in_tag, in_pr, sl, t, pagerank, tag) -> bool",
    "on_evict": "(ps, sl, si, base)",
    "on_fill": "(ps, sl, si, base, w, now)",
}
VICTIM_CHOICES = ("key", "scan")
SLOT_SCOPES = ("line", "set")


@dataclass(frozen=True)
class StateSlot:
    """One kernel state array a policy keeps for itself (`EvictionPolicy.slots`): `dtype` (a
    NumPy integer or float type), one element per cache line or per set (`per`), all `init` at
    the start."""

    dtype: Any
    per: str = "line"
    init: int | float = 0

    def __post_init__(self):
        if self.per not in SLOT_SCOPES:
            raise InputError(f"StateSlot.per must be one of {SLOT_SCOPES}, found {self.per!r}")
        if np.dtype(self.dtype).kind not in "iuf":
            raise InputError(f"StateSlot.dtype must be a NumPy integer or float type, found {self.dtype!r}")


@dataclass(frozen=True)
class LineView:
    """What a policy may look at in one way of a set (or in the miss that asks to come in)."""

    key: int
    pagerank: int  # PageRank percentile byte of the node
    tag: int       # next-reuse tag (absolute iteration, NO_REUSE or FRESH)


def effective(tag: int, t: int) -> int:
    """The tag as every rule reads it in iteration t: a known tag <= t has expired (NO_REUSE)."""
    return NO_REUSE if tag <= t else tag


def lowest_pagerank(lines: Sequence[LineView], ways: Sequence[int]) -> int:
    return min(ways, key=lambda w: (lines[w].pagerank, w))


class EvictionPolicy(abc.ABC):
    """A replacement policy of the set-associative cache (one instance per reference engine).

    Hooks, in the order the engine calls them: `on_hit(state, way, t)` for every hit of a batch;
    for a miss in a full set `victim(state, lines, t, window)` -> way, then `admit(...)` -> bool
    (False: the miss is served without being cached, nothing is evicted), then
    `on_evict(state, way)`; finally `on_fill(state, way, t)` for every line installed.
    `new_set_state(ways)` builds the per-set state those hooks share.
    """

    name: ClassVar[str]
    code: ClassVar[int]
    """Assigned by the registry (register_policy): the GPU kernels' policy number."""
    kernel_key: ClassVar[str]
    """Assigned by the registry: the CPU kernels' compile-time identity (name:digest of the module)."""
    description: ClassVar[str] = ""
    uses_static: ClassVar[bool] = False
    uses_window: ClassVar[bool] = False
    configurable: ClassVar[bool] = True
    """A name users may set as cache.policy (hybrid_pvp is what hybrid runs as with the PVP)."""
    state: ClassVar[tuple[str, ...]] = ()
    """Kernel state arrays (names of the built-in STATE_SPECS) the policy keeps; its hooks get the
    tuple of all of them (index it with STAMP, VISITED, ...)."""
    slots: ClassVar[dict[str, StateSlot]] = {}
    """Kernel state arrays of its own (name -> StateSlot), instead of `state`: its numba hooks get
    `ps`, the tuple of these arrays in the order declared (ps[0] the first)."""
    long_lookahead: ClassVar[bool] = False
    """Reads K = cache.lookahead future batches (its tags are exact over them, refreshed every
    iteration, and a fill is tagged at once); other policies read the W = cache.window batches."""
    admission: ClassVar[bool] = False
    """Admission control: `admit` (and the kernel hook `admit`) may refuse a miss."""
    victim_choice: ClassVar[str] = "key"
    """How the kernels choose a victim (VICTIM_CHOICES): "key", the way with the minimum of a
    per-way key, ties to the lowest way (the GPU reduces over a warp); "scan", a sequential walk
    that mutates per-set state (the GPU runs it on lane 0)."""
    kernels: ClassVar[dict[str, Any]] = {}
    """The numba hooks (KERNEL_HOOKS names -> njit functions); empty: reference engine only."""
    cuda_source: ClassVar[str | None] = None
    """A policy outside the package: its CUDA device hooks as text (what a built-in policy keeps in
    cuda/policies/<module>.cuh: `<name>_<hook>` with the signatures of gpu_codegen.CUDA_HOOKS; a
    slot is the PolicyState field `<name>_<slot>`). None: the GPU engine refuses the policy."""
    host_fraction: ClassVar[float] = 0.10
    """Default share of the device's budget for the victim buffer and landing buffer when
    cache.victim_buffer.host_fraction is not set (docs/memory-budget.md)."""

    def new_set_state(self, ways: int) -> Any:
        return None

    def on_hit(self, state: Any, way: int, t: int) -> None:
        pass

    def on_fill(self, state: Any, way: int, t: int) -> None:
        pass

    def on_evict(self, state: Any, way: int) -> None:
        pass

    def admit(self, state: Any, lines: Sequence[LineView], way: int, incoming: LineView, t: int) -> bool:
        """May `incoming` replace lines[way] (the victim just chosen)? Default: always."""
        return True

    @abc.abstractmethod
    def victim(self, state: Any, lines: Sequence[LineView], t: int, window: int) -> int:
        """Way index to evict from the full set `lines` during iteration `t`."""


__all__ = ["STATE_SPECS", "STATE_ORDER", "StateSlot", "SLOT_SCOPES", "KERNEL_HOOKS", "VICTIM_CHOICES", "LineView", "EvictionPolicy", "effective", "lowest_pagerank", "FRESH", "NO_REUSE"]

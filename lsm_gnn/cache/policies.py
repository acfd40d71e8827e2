"""Eviction policies: one plug-in interface, a registry, and the integer codes the kernels use.

Each policy exists twice, with identical decisions (docs/cache-semantics.md, "Victim choice"):

* a Python plug-in class (`EvictionPolicy`) that the pure-Python reference engine calls, written
  to be read: it sees one full set as a list of `LineView`s and returns the victim way;
* a branch of `choose_victim`, the numba kernel the CPU engine calls with the policy's `code`
  (the GPU engine implements the same branch in CUDA).

Victim choice is only asked for a full set: a miss always fills the lowest empty way first.
Ties are always broken by the lowest way index.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
from numba import njit

from lsm_gnn.cache.window import FRESH, NO_REUSE, effective_tag
from lsm_gnn.utils.errors import InputError

# integer codes shared by the CPU (numba) and GPU (CUDA) engines
RR, STATIC, DYNAMIC, HYBRID, HYBRID_PVP, LRU, SIEVE = range(7)


@dataclass(frozen=True)
class LineView:
    """What a policy may look at in one way of a full set."""

    key: int
    pagerank: int  # PageRank percentile byte of the cached node
    tag: int       # next-reuse tag (absolute iteration, NO_REUSE or FRESH)


class EvictionPolicy(abc.ABC):
    """A replacement policy of the set-associative cache.

    `new_set_state` builds per-set policy state (counters, stamps, lists); `on_hit` / `on_fill`
    update it; `victim` picks the way to evict from a full set in iteration `t`.
    """

    name: ClassVar[str]
    code: ClassVar[int]
    uses_static: ClassVar[bool] = False
    uses_window: ClassVar[bool] = False
    description: ClassVar[str] = ""

    def new_set_state(self, ways: int) -> Any:
        return None

    def on_hit(self, state: Any, way: int, t: int) -> None:
        pass

    def on_fill(self, state: Any, way: int, t: int) -> None:
        pass

    def on_evict(self, state: Any, way: int) -> None:
        pass

    @abc.abstractmethod
    def victim(self, state: Any, lines: Sequence[LineView], t: int, window: int) -> int:
        """Way index to evict from the full set `lines` during iteration `t`."""


def _eff(tag: int, t: int) -> int:
    return NO_REUSE if tag <= t else tag


def _lowest_pagerank(lines: Sequence[LineView], ways: Sequence[int]) -> int:
    return min(ways, key=lambda w: (lines[w].pagerank, w))


class RoundRobin(EvictionPolicy):
    name, code = "round_robin", RR
    description = "per-set counter modulo ways (the counter advances on every eviction)"

    def new_set_state(self, ways):
        return {"counter": 0}

    def victim(self, state, lines, t, window):
        way = state["counter"] % len(lines)
        state["counter"] += 1
        return way


class Static(EvictionPolicy):
    name, code, uses_static = "static", STATIC, True
    description = "lowest PageRank byte"

    def victim(self, state, lines, t, window):
        return _lowest_pagerank(lines, range(len(lines)))


class Dynamic(EvictionPolicy):
    name, code, uses_window = "dynamic", DYNAMIC, True
    description = "farthest next reuse in the window (NO_REUSE > FRESH > any known reuse)"

    def victim(self, state, lines, t, window):
        return max(range(len(lines)), key=lambda w: (_eff(lines[w].tag, t), -w))


class Hybrid(EvictionPolicy):
    name, code, uses_static, uses_window = "hybrid", HYBRID, True, True
    description = "lowest PageRank among: no reuse; reuse farther than W//8; fresh; all"
    case_order: ClassVar[tuple[str, ...]] = ("none", "far", "fresh", "all")

    def victim(self, state, lines, t, window):
        th = window // 8
        groups = {"none": [], "far": [], "fresh": [], "all": list(range(len(lines)))}
        for w, line in enumerate(lines):
            tag = _eff(line.tag, t)
            if tag == NO_REUSE:
                groups["none"].append(w)
            elif tag == FRESH:
                groups["fresh"].append(w)
            elif tag - t - 1 > th:  # r = batches strictly between now and the reuse
                groups["far"].append(w)
        for case in self.case_order:
            if groups[case]:
                return _lowest_pagerank(lines, groups[case])
        raise AssertionError("a full set has at least one way")


class HybridPVP(Hybrid):
    name, code = "hybrid_pvp", HYBRID_PVP
    description = "hybrid with the prefetcher order: far reuse first (they go to the victim buffer)"
    case_order = ("far", "none", "fresh", "all")


class LeastRecentlyUsed(EvictionPolicy):
    name, code = "lru", LRU
    description = "least recently used; recency is the iteration of the last hit or fill"

    def new_set_state(self, ways):
        return [0] * ways

    def on_hit(self, state, way, t):
        state[way] = t + 1

    def on_fill(self, state, way, t):
        state[way] = t + 1

    def victim(self, state, lines, t, window):
        return min(range(len(lines)), key=lambda w: (state[w], w))


class Sieve(EvictionPolicy):
    name, code = "sieve", SIEVE
    description = "SIEVE (NSDI'24): FIFO queue per set, visited bits, a hand moving tail to head"

    def new_set_state(self, ways):
        # order: ways from oldest (tail) to newest (head); hand: way to examine next or None
        return {"order": [], "hand": None, "visited": [False] * ways}

    def on_hit(self, state, way, t):
        state["visited"][way] = True

    def on_fill(self, state, way, t):
        state["order"].append(way)
        state["visited"][way] = False

    def victim(self, state, lines, t, window):
        order, visited = state["order"], state["visited"]
        pos = 0 if state["hand"] is None else order.index(state["hand"])
        while visited[order[pos]]:
            visited[order[pos]] = False
            pos = pos + 1 if pos + 1 < len(order) else 0
        way = order[pos]
        state["hand"] = order[pos + 1] if pos + 1 < len(order) else None
        order.remove(way)
        return way


REGISTRY: dict[str, type[EvictionPolicy]] = {}


def register_policy(cls: type[EvictionPolicy]) -> type[EvictionPolicy]:
    """Add a policy class to the registry (the reference engine can run any registered policy;
    the CPU and GPU engines run those whose code `choose_victim` implements)."""
    REGISTRY[cls.name] = cls
    return cls


for _cls in (RoundRobin, Static, Dynamic, Hybrid, HybridPVP, LeastRecentlyUsed, Sieve):
    register_policy(_cls)

KERNEL_CODES = frozenset(range(7))


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


# ---- the kernel side --------------------------------------------------------------------------

@njit(cache=True)
def choose_victim(code, base, ways, t, window, pagerank, tag, stamp, rr_counter, s,
                  visited, newer, tail, hand):
    """Way (0..ways-1) to evict from the full set whose slots start at `base`.

    Mutates only policy state (round-robin counter, SIEVE visited bits and hand); the caller
    unlinks the victim from the SIEVE list and installs the new line. The scans take the
    minimum of a packed key (criterion, way) with branch-free int32 arithmetic so that LLVM
    vectorizes them; ways < 2048, so the way fits in the key's low 11 bits.
    """
    if code == RR:
        way = rr_counter[s] % ways
        rr_counter[s] += 1
        return way
    tg_ = tag[base: base + ways]
    pr_ = pagerank[base: base + ways]
    t32 = np.int32(t)
    if code == STATIC:
        best = np.int32(1 << 30)
        for w in range(ways):
            best = min(best, (np.int32(pr_[w]) << np.int32(11)) | np.int32(w))
        return best & 2047
    if code == DYNAMIC:
        # max effective tag, lowest way: minimum of (-(effective tag), way)
        best = np.int64(1) << 62
        for w in range(ways):
            tg = np.int64(tg_[w])
            e = NO_REUSE if tg <= t else tg
            best = min(best, ((NO_REUSE - e) << 11) | w)
        return np.int64(best & 2047)
    if code == HYBRID or code == HYBRID_PVP:
        # min over ways of (case rank, PageRank, way): the same as the four cases in order, since
        # case 4 ("all") only decides when cases 1-3 are empty. rank: HYBRID none 0, far 1,
        # fresh 2, near 3; HYBRID_PVP far 0, none 1, fresh 2, near 3.
        lim = np.int32(t + 1 + window // 8)  # known reuse r = tag - t - 1 > W // 8 <=> tag > lim
        w_none = np.int32(3 if code == HYBRID else 2)
        w_far = np.int32(2 if code == HYBRID else 3)
        no_reuse, fresh_tag = np.int32(NO_REUSE), np.int32(FRESH)
        best = np.int32(1 << 30)
        for w in range(ways):
            tg = tg_[w]
            none = np.int32((tg == no_reuse) | (tg <= t32))
            far = np.int32((tg > lim) & (tg < fresh_tag))
            fresh = np.int32(tg == fresh_tag)
            rank = np.int32(3) - w_none * none - w_far * far - fresh
            best = min(best, (rank << np.int32(19)) | (np.int32(pr_[w]) << np.int32(11)) | np.int32(w))
        return best & 2047
    if code == LRU:
        st_ = stamp[base: base + ways]
        best = np.int64(1) << 62
        for w in range(ways):
            best = min(best, (st_[w] << 11) | w)
        return np.int64(best & 2047)
    if code == SIEVE:
        p = hand[s] if hand[s] >= 0 else tail[s]
        while visited[base + p]:
            visited[base + p] = 0
            p = newer[base + p] if newer[base + p] >= 0 else tail[s]
        hand[s] = newer[base + p]
        return p
    return -1

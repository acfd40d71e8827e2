"""The policy hooks the CPU engine's kernels call, dispatched by the policy's integer code.

Numba cannot call a function picked at run time from a table, so each hook is a branch on
`code` that calls the policy module's own numba function. The engine unpacks the tuple of policy
state arrays (base.STATE_ORDER; empty arrays for state a policy does not keep) once per batch and
passes the arrays themselves.

Every hook (here and the policies' `kernel_*`) is `@njit(forceinline=True, _nrt=False)`: LLVM
inlines it and, without NRT, no reference count moves when an array crosses the call. Numba's
IR-level `inline="always"` (or a plain call) kept an NRT incref/decref pair per array per call in
the per-id loops, which made replay 25-35 % slower than the engine with the policies written
inline; with these flags it is as fast or faster (docs/cache.md, "Policies as plug-ins"). The
hooks allocate nothing, which is what `_nrt=False` requires.
"""

from __future__ import annotations

from numba import njit

from lsm_gnn.cache.policies import dynamic, horizon, hybrid, lru, round_robin, sieve, static
from lsm_gnn.cache.policies.base import DYNAMIC, HORIZON, HYBRID, HYBRID_PVP, LRU, RR, SIEVE, STATIC


@njit(cache=True, forceinline=True, _nrt=False)
def on_hit(code, sl, now, stamp, visited):
    if code == LRU:
        lru.kernel_touch(stamp, sl, now)
    elif code == SIEVE:
        sieve.kernel_on_hit(visited, sl)


@njit(cache=True, forceinline=True, _nrt=False)
def choose_victim(code, base, ways, t, window, pagerank, tag, si, stamp, visited, newer, rr, tail, hand):
    """Way (0..ways-1) to evict from the full set si whose slots start at `base`. Mutates only
    policy state (round-robin counter, SIEVE visited bits and hand)."""
    if code == RR:
        return round_robin.kernel_victim(rr, si, ways)
    if code == STATIC:
        return static.kernel_victim(pagerank, base, ways)
    if code == DYNAMIC:
        return dynamic.kernel_victim(tag, base, ways, t)
    if code == HYBRID or code == HYBRID_PVP:
        return hybrid.kernel_victim(code, pagerank, tag, base, ways, t, window)
    if code == LRU:
        return lru.kernel_victim(stamp, base, ways)
    if code == SIEVE:
        return sieve.kernel_victim(visited, newer, tail, hand, si, base)
    if code == HORIZON:
        return horizon.kernel_victim(pagerank, tag, base, ways, t)
    return -1


@njit(cache=True, forceinline=True, _nrt=False)
def admit(code, in_tag, in_pr, sl, t, pagerank, tag):
    """May the miss (its tag and PageRank byte) replace the victim in slot sl?"""
    if code == HORIZON:
        return horizon.kernel_admit(in_tag, in_pr, sl, t, pagerank, tag)
    return True


@njit(cache=True, forceinline=True, _nrt=False)
def on_evict(code, sl, si, base, newer, older, head, tail):
    if code == SIEVE:
        sieve.kernel_on_evict(newer, older, head, tail, si, base, sl)


@njit(cache=True, forceinline=True, _nrt=False)
def on_fill(code, sl, si, base, w, now, stamp, visited, newer, older, head, tail):
    if code == LRU:
        lru.kernel_touch(stamp, sl, now)
    elif code == SIEVE:
        sieve.kernel_on_fill(visited, newer, older, head, tail, si, base, sl, w)

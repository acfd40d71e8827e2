"""SIEVE (Zhang et al., NSDI'24) per set: a FIFO list from tail (oldest) to head, visited bits,
and a hand that moves from the tail toward the head."""

from __future__ import annotations

import numpy as np
from numba import njit

from lsm_gnn.cache.policies.base import HAND, HEAD, NEWER, OLDER, TAIL, VISITED, EvictionPolicy


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_on_hit(ps, sl, now):
    ps[VISITED][sl] = 1


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(ps, si, base, ways, t, window, pagerank, tag):
    """The hand's walk (cuda/policies/sieve.cuh:sieve_victim, the same steps): at most ways + 1
    looks, each clearing a visited bit; -1 for a list that leaves the set (a corrupt state: the
    engine raises StateError, as the GPU engine does), before anything outside the set is touched."""
    visited, newer, older, head, tail, hand = ps[VISITED], ps[NEWER], ps[OLDER], ps[HEAD], ps[TAIL], ps[HAND]
    hd, tl = head[si], tail[si]
    if hd < -1 or hd >= ways or tl < -1 or tl >= ways:
        return np.int64(-1)
    p = hand[si] if hand[si] >= 0 else tl
    for _ in range(ways + 1):
        if p < 0 or p >= ways:
            return np.int64(-1)
        nw = newer[base + p]
        if nw < -1 or nw >= ways:
            return np.int64(-1)
        if not visited[base + p]:
            ow = older[base + p]
            if ow < -1 or ow >= ways:
                return np.int64(-1)
            hand[si] = nw
            return np.int64(p)
        visited[base + p] = 0
        p = nw if nw >= 0 else tl
    return np.int64(-1)


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_on_evict(ps, sl, si, base):
    """Unlink the victim from its set's list."""
    newer, older, head, tail = ps[NEWER], ps[OLDER], ps[HEAD], ps[TAIL]
    nw, ow = newer[sl], older[sl]
    if nw >= 0:
        older[base + nw] = ow
    else:
        head[si] = ow
    if ow >= 0:
        newer[base + ow] = nw
    else:
        tail[si] = nw


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_on_fill(ps, sl, si, base, w, now):
    """The new line becomes the head (newest), unvisited."""
    visited, newer, older, head, tail = ps[VISITED], ps[NEWER], ps[OLDER], ps[HEAD], ps[TAIL]
    visited[sl] = 0
    older[sl] = head[si]
    newer[sl] = -1
    if head[si] >= 0:
        newer[base + head[si]] = w
    else:
        tail[si] = w
    head[si] = w


class Sieve(EvictionPolicy):
    name = "sieve"
    description = "SIEVE (NSDI'24): FIFO queue per set, visited bits, a hand moving tail to head"
    state = ("visited", "newer", "older", "head", "tail", "hand")
    victim_choice = "scan"
    kernels = {"on_hit": kernel_on_hit, "victim": kernel_victim, "on_evict": kernel_on_evict,
               "on_fill": kernel_on_fill}

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
        for _ in range(len(order) + 1):  # each look clears a bit: len(order) + 1 looks find one
            if not visited[order[pos]]:
                break
            visited[order[pos]] = False
            pos = pos + 1 if pos + 1 < len(order) else 0
        way = order[pos]
        state["hand"] = order[pos + 1] if pos + 1 < len(order) else None
        return way

    def on_evict(self, state, way):
        state["order"].remove(way)

"""Round robin: a per-set counter modulo ways, advanced on every eviction (FIFO once the set is full)."""

from __future__ import annotations

from numba import njit

from lsm_gnn.cache.policies.base import RR_COUNTER, EvictionPolicy


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(ps, si, base, ways, t, window, pagerank, tag):
    rr = ps[RR_COUNTER]
    if rr[si] < 0:  # a corrupt counter: -1, as the CUDA hook (Python's % would give a valid way)
        return -1
    way = rr[si] % ways
    rr[si] += 1
    return way


class RoundRobin(EvictionPolicy):
    name = "round_robin"
    description = "per-set counter modulo ways (the counter advances on every eviction)"
    state = ("rr",)
    victim_choice = "scan"
    kernels = {"victim": kernel_victim}

    def new_set_state(self, ways):
        return {"counter": 0}

    def victim(self, state, lines, t, window):
        way = state["counter"] % len(lines)
        state["counter"] += 1
        return way

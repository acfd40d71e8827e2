"""Round robin: a per-set counter modulo ways, advanced on every eviction (FIFO once the set is full)."""

from __future__ import annotations

from numba import njit

from lsm_gnn.cache.policies.base import RR, EvictionPolicy


class RoundRobin(EvictionPolicy):
    name, code = "round_robin", RR
    description = "per-set counter modulo ways (the counter advances on every eviction)"
    state = ("rr",)

    def new_set_state(self, ways):
        return {"counter": 0}

    def victim(self, state, lines, t, window):
        way = state["counter"] % len(lines)
        state["counter"] += 1
        return way


@njit(cache=True, forceinline=True, _nrt=False)
def kernel_victim(rr, si, ways):
    way = rr[si] % ways
    rr[si] += 1
    return way

"""Adding a policy is its module and one registry call: a policy defined in this file alone
(its reference hooks, traits and numba hooks) runs through the CPU engine, the reference engine,
the decision replay and the simulator, and makes the same decisions in all of them; nothing in
the engines names it. (A built-in policy is three files: its module in lsm_gnn/cache/policies/,
its CUDA header cuda/policies/<module>.cuh, its line in the registry's BUILTIN.)"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from lsm_gnn.cache import policies
from lsm_gnn.cache.budget import budget_for_cache_rows
from lsm_gnn.cache.engine import CpuCacheEngine
from lsm_gnn.cache.policies.base import RR_COUNTER, EvictionPolicy
from lsm_gnn.cache.reference import ReferenceCache
from lsm_gnn.cache.replay import flatten_batches, replay
from lsm_gnn.config import CacheConfig
from lsm_gnn.sim.simulate import simulate
from lsm_gnn.sim.trace import Trace
from lsm_gnn.utils.errors import InputError

from engine_args import engine_kwargs


# ---- the whole plug-in: a seeded pseudo-random victim (a hash of the iteration and the set's evictions)
SEED = 12345


@njit(cache=True, forceinline=True, _nrt=False)
def hashed_victim(ps, si, base, ways, t, window, pagerank, tag):
    count = ps[RR_COUNTER]
    way = (104729 * t + 7919 * count[si] + SEED) % ways
    count[si] += 1
    return way


class SeededRandom(EvictionPolicy):
    name = "seeded_random_test"
    description = "a pseudo-random way per eviction: a seeded hash of the iteration and the set's evictions"
    state = ("rr",)
    victim_choice = "scan"  # it mutates per-set state
    kernels = {"victim": hashed_victim}

    def new_set_state(self, ways):
        return {"count": 0}

    def victim(self, state, lines, t, window):
        way = (104729 * t + 7919 * state["count"] + SEED) % len(lines)
        state["count"] += 1
        return way
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plugin():
    policies.register_policy(SeededRandom)
    yield SeededRandom
    policies.unregister_policy(SeededRandom.name)


def _trace(seed=0, rows=600, batches=14, size=90):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, rows + 1) ** 0.8
    p /= p.sum()
    return [rng.choice(rows, size=size, p=p).astype(np.int64) for _ in range(batches)]


def test_a_policy_registered_outside_the_package_runs_on_the_cpu_engine_as_on_the_reference(plugin):
    assert plugin.name in policies.configurable_names() and plugin.code == len(policies.BUILTIN)
    batches = _trace()
    static = np.random.default_rng(1).integers(0, 256, 600).astype(np.uint8)
    kw = engine_kwargs(policy=plugin.name, ways=4, window=3, victim_depth=6)
    eng, ref = CpuCacheEngine(48, 600, static, **kw), ReferenceCache(48, 600, static, **kw)
    for t, b in enumerate(batches):
        win = batches[t + 1: t + 4]
        res = eng.step(b, *(flatten_batches(win) if win else (np.zeros(0, np.int64), np.zeros(1, np.int64))))
        rec = ref.step(b.tolist(), win)
        for f in ("distinct", "status", "slot", "evicted", "spill"):
            assert getattr(res, f).tolist() == getattr(rec, f), (t, f)
        assert eng.end_iteration() == ref.end_iteration()
    assert eng.keys.tolist() == ref.slot_keys()
    # the whole-trace kernel too
    rows = CpuCacheEngine(48, 600, static, **kw).replay(*flatten_batches(batches))
    assert rows.tolist() == ReferenceCache(48, 600, static, **kw).replay(batches).tolist()
    assert rows[:, 5].sum() > 0  # evictions: the victim hook ran


def test_the_replay_and_the_simulator_run_a_registered_policy(plugin):
    batches = _trace(seed=2)
    static = np.random.default_rng(3).integers(0, 256, 600).astype(np.uint8)
    cfg = CacheConfig(policy=plugin.name, ways=4, window=3, victim_buffer={"depth": 6})
    budget = budget_for_cache_rows(cfg, 48, 600)
    a = replay(batches, cfg, 600, static, budget=budget, engine="cpu")
    b = replay(batches, cfg, 600, static, budget=budget, engine="reference")
    assert a.policy == plugin.name
    for k in a.per_batch:
        assert a.per_batch[k].tolist() == b.per_batch[k].tolist(), k
    assert a.totals["evictions"] > 0 and a.totals["hits"] > 0
    trace = Trace(1, 600, [[x] for x in batches])
    df = simulate(trace, [cfg, CacheConfig(policy="lru", ways=4, window=3, victim_buffer={"depth": 6})],
                  static_scores=static)
    assert df["policy"].tolist() == [plugin.name, "lru"]
    assert df["storage_rows"].iloc[0] > 0


def test_the_gpu_engine_refuses_a_policy_without_a_cuda_header(plugin):
    from lsm_gnn.cache import gpu_codegen

    assert plugin not in gpu_codegen.gpu_policies()
    assert "POLICY_SEEDED_RANDOM_TEST" not in gpu_codegen.module_source()


def test_a_policy_that_breaks_the_registry_rules_is_refused():
    class NoVictimHook(EvictionPolicy):
        name = "broken_test"
        kernels = {"on_hit": hashed_victim}

        def victim(self, state, lines, t, window):
            return 0

    class Admits(NoVictimHook):
        name = "admits_test"
        admission = True
        kernels = {"victim": hashed_victim}

    class UnknownState(NoVictimHook):
        name = "state_test"
        state = ("clock_hand",)
        kernels = {"victim": hashed_victim}

    for cls, match in ((NoVictimHook, "'victim' hook"), (Admits, "lack an 'admit' hook"),
                       (UnknownState, "unknown kernel state")):
        with pytest.raises(InputError, match=match):
            policies.register_policy(cls)
        assert cls.name not in policies.REGISTRY
    with pytest.raises(InputError, match="already registered"):
        policies.register_policy(type("Lru2", (SeededRandom,), {"name": "lru"}))

"""Bounds: MIN equals brute force on tiny traces and is never beaten by any policy; optimal static
and per-set MIN against exhaustive search; edge cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lsm_gnn.cache.budget import budget_for_cache_rows
from lsm_gnn.config import POLICIES, CacheConfig, VictimBufferConfig
from lsm_gnn.sim.bounds import (RequestSequence, belady_min, belady_min_per_set, brute_force_min,
                                compulsory_misses, optimal_static)
from lsm_gnn.utils.errors import InputError
from sim_standins import lru_replay


def seq_of(batches, n):
    return RequestSequence.from_batches([np.asarray(b, np.int64) for b in batches], n)


def random_trace(rng, n, nb, max_len):
    return [rng.integers(0, n, rng.integers(0, max_len + 1)) for _ in range(nb)]


def test_coalesce_keeps_first_occurrence_order():
    s = seq_of([[3, 1, 3, 2, 1], [], [2, 2]], 5)
    assert s.ids.tolist() == [3, 1, 2, 2]
    assert s.offsets.tolist() == [0, 3, 3, 4]
    assert s.next_use().tolist()[:3] == [np.iinfo(np.int32).max] * 2 + [2]


def test_min_equals_brute_force_on_tiny_traces():
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(400):
        n, nb, cap = int(rng.integers(1, 8)), int(rng.integers(1, 9)), int(rng.integers(0, 5))
        s = seq_of(random_trace(rng, n, nb, 5), n)
        assert belady_min(s, cap) == brute_force_min(s, cap)
        checked += belady_min(s, cap) > compulsory_misses(s)
    assert checked > 50  # many cases where capacity actually binds


def test_min_per_batch_sums_to_total_and_known_values():
    # capacity 1: batch 2 serves the resident row first, so only b misses (a sequential
    # demand-fill cache in first-occurrence order would miss 3 times).
    s = seq_of([[0], [1, 0]], 2)
    assert belady_min(s, 1) == 2
    s = seq_of([[0, 1, 2], [0], [1], [2], [0]], 3)
    per = belady_min(s, 2, per_batch=True)
    assert per.tolist() == [3, 0, 0, 1, 0]
    assert belady_min(s, 2) == 4 == brute_force_min(s, 2)


def test_bounds_order_and_edge_capacities():
    rng = np.random.default_rng(2)
    for _ in range(50):
        n = 200
        s = seq_of([rng.zipf(1.5, 60) % n for _ in range(30)], n)
        comp = compulsory_misses(s)
        assert belady_min(s, 0) == len(s) == optimal_static(s, 0)
        assert belady_min(s, n) == comp == optimal_static(s, n)
        last = len(s)
        for cap in (1, 5, 20, 80):
            m = belady_min(s, cap)
            assert comp <= m <= optimal_static(s, cap) <= len(s)
            assert m <= last  # more capacity never hurts MIN
            last = m


def test_optimal_static_equals_exhaustive_search():
    rng = np.random.default_rng(3)
    for _ in range(100):
        n, cap = int(rng.integers(1, 7)), int(rng.integers(0, 4))
        s = seq_of(random_trace(rng, n, int(rng.integers(1, 7)), 4), n)
        ids = s.ids.tolist()
        best = min(_static_cost(ids, set(keep)) for k in range(min(cap, n) + 1)
                   for keep in itertools.combinations(range(n), k))
        assert optimal_static(s, cap) == best


def _static_cost(ids, keep):
    loaded, cost = set(), 0
    for v in ids:
        if v not in loaded:
            cost += 1
            if v in keep:
                loaded.add(v)
    return cost


def test_min_per_set_equals_per_set_brute_force():
    rng = np.random.default_rng(4)
    for _ in range(100):
        n, g = 12, int(rng.integers(1, 3))
        sets, ways = int(rng.integers(1, 4)), int(rng.integers(0, 3))
        owner = int(rng.integers(0, g))
        batches = [b[b % g == owner] for b in random_trace(rng, n, int(rng.integers(1, 7)), 6)]
        s = seq_of(batches, n)
        expect = 0
        for k in range(sets):
            sub = [b[(b // g) % sets == k] for b in batches]
            expect += brute_force_min(seq_of(sub, n), ways)
        got = belady_min_per_set(s, ways, sets, num_owners=g)
        assert got == expect
        assert got >= belady_min(s, ways * sets)
    s = seq_of(random_trace(rng, 50, 20, 10), 50)
    assert belady_min_per_set(s, 7, 1) == belady_min(s, 7)


def _random_batch_policy(batches, cap, rng):
    """Any policy whose state evolves batch by batch: keep a random subset of S | B."""
    state, cost = set(), 0
    for b in batches:
        b = set(b.tolist())
        cost += len(b - state)
        pool = sorted(state | b)
        k = int(rng.integers(0, min(cap, len(pool)) + 1)) if rng.random() < 0.3 else min(cap, len(pool))
        state = set(rng.choice(pool, k, replace=False).tolist()) if pool else set()
    return cost


def _sequential_clairvoyant(seq, cap):
    """Demand-fill Belady over the first-occurrence order (evicts the farthest next request)."""
    ids = seq.ids.tolist()
    resident, cost = set(), 0
    for i, v in enumerate(ids):
        if v in resident:
            continue
        cost += 1
        if cap == 0:
            continue
        if len(resident) >= cap:
            def nxt(u):
                try:
                    return ids.index(u, i + 1)
                except ValueError:
                    return len(ids) + 1
            resident.remove(max(sorted(resident), key=nxt))
        resident.add(v)
    return cost


def test_min_is_never_beaten_by_any_policy():
    rng = np.random.default_rng(5)
    for _ in range(150):
        n, cap = int(rng.integers(2, 40)), int(rng.integers(0, 12))
        batches = random_trace(rng, n, int(rng.integers(1, 25)), 12)
        s = seq_of(batches, n)
        m = belady_min(s, cap)
        cfg = CacheConfig(ways=4, victim_buffer={"enabled": False})
        budget = budget_for_cache_rows(cfg, cap, n)
        assert lru_replay(batches, cfg, n, None, budget=budget).totals["storage_rows"] >= m
        assert _random_batch_policy(batches, cap, rng) >= m
        assert _sequential_clairvoyant(s, cap) >= m
        assert optimal_static(s, cap) >= m


def test_min_is_never_beaten_by_the_cache_engine():
    from lsm_gnn.cache.replay import replay

    rng = np.random.default_rng(6)
    n = 400
    scores = rng.integers(0, 256, n).astype(np.uint8)
    batches = [rng.zipf(1.4, 80) % n for _ in range(40)]
    s = seq_of(batches, n)
    for policy in POLICIES:
        for cap, w in ((32, 4), (64, 8), (96, 0)):
            cfg = CacheConfig(policy=policy, window=w, ways=8, victim_buffer=VictimBufferConfig(depth=4))
            budget = budget_for_cache_rows(cfg, cap, n)
            t = replay(batches, cfg, n, scores, budget=budget).totals
            assert budget.total_rows == cap + (w + 1) * 4 * (w > 0)
            assert t["storage_rows"] >= belady_min(s, budget.total_rows), (policy, cap, w)
            if t["victim_hits"] == 0:
                assert t["storage_rows"] >= belady_min(s, cap), (policy, cap, w)


@pytest.mark.parametrize("seed", range(6))
def test_no_policy_beats_min_at_the_same_total_memory(seed):
    """Property: on random traces and random budgets (any split between cache lines, victim queues
    and landing buffer, forced host tiers larger than the cache included), every policy of the
    engine reads at least MIN at the budget's total rows: the simulator's `min_rows` is a strict
    floor, per owner stream and summed (simulate), for 1 and 2 devices."""
    from lsm_gnn.sim.simulate import simulate
    from lsm_gnn.sim.trace import Trace

    rng = np.random.default_rng(100 + seed)
    for _ in range(4):
        n, devices = int(rng.integers(30, 300)), int(rng.integers(1, 3))
        skew = float(rng.uniform(1.1, 2.0))
        batches = [[rng.zipf(skew, int(rng.integers(5, 60))) % n for _ in range(devices)]
                   for _ in range(int(rng.integers(5, 40)))]
        trace = Trace(devices, n, batches, {"batches_per_epoch": [len(batches)]})
        scores = rng.integers(0, 256, n).astype(np.uint8)
        cfgs = []
        for policy in POLICIES:
            w = int(rng.integers(0, 6))
            depth = int(rng.integers(1, 6))
            total = int(rng.integers((w + 1) * depth + 1, (w + 1) * depth + 40))
            vb = {"depth": depth, "force": True} if rng.random() < 0.7 else {"host_fraction": float(rng.uniform(0, 0.6))}
            cfgs.append(CacheConfig(policy=policy, window=w, ways=int(rng.choice([1, 2, 4, 8])), capacity_bytes=total,
                                    victim_buffer=vb))
        for mode in ("shared", "isolated"):
            df = simulate(trace, cfgs, static_scores=scores, mode=mode, row_bytes=1)
            assert (df["storage_rows"] >= df["min_rows"]).all(), df[["policy", "storage_rows", "min_rows"]]
            assert (df["total_rows"] == df["capacity_rows"] + df["victim_capacity"]).all()
            assert (df["storage_rows"] >= df["min_total_rows"]).all()


def test_bad_inputs_raise():
    with pytest.raises(InputError):
        RequestSequence.from_batches([np.array([0, 5])], 5)
    with pytest.raises(InputError):
        RequestSequence.from_batches([np.array([0.5])], 5)
    s = seq_of([[0]], 1)
    with pytest.raises(InputError):
        belady_min(s, -1)
    with pytest.raises(InputError):
        brute_force_min(seq_of([list(range(30))], 30), 15, max_states=1000)

"""The CPU cache engine makes the reference's decisions, step by step and in whole-trace replay,
for every policy on random and adversarial traces; capacity and victim-buffer invariants hold."""

from __future__ import annotations

import numpy as np
import pytest

from lsm_gnn.cache.engine import HIT, COUNT_NAMES, STORAGE, CpuCacheEngine
from lsm_gnn.cache.geometry import cache_geometry
from lsm_gnn.cache.reference import ReferenceCache
from lsm_gnn.cache.replay import flatten_batches
from lsm_gnn.utils.errors import InputError

from engine_args import POLICIES, engine_kwargs
FIELDS = ["distinct", "inverse", "status", "slot", "src", "evicted", "spill"]


def _window(batches, t, w):
    win = batches[t + 1: t + 1 + w]
    return flatten_batches(win) if win else (np.zeros(0, np.int64), np.zeros(1, np.int64))


def _check_invariants(eng: CpuCacheEngine, batches, t, capacity_rows):
    keys = eng.keys
    resident = keys[keys >= 0]
    assert len(resident) <= capacity_rows
    assert len(np.unique(resident)) == len(resident), "a node cached twice"
    g, sets, ways = eng.num_owners, eng.geometry.sets, eng.geometry.ways
    slots = np.flatnonzero(keys >= 0)
    assert np.array_equal((resident // g) % sets, slots // ways), "a line outside its set"
    # the victim buffer holds only lines that the batch of their queue will request
    for q in range(eng.window):
        held = eng.victims.queue(q)
        if len(held) == 0:
            continue
        b = next(b for b in range(t + 1, t + 1 + eng.window) if b % eng.window == q)
        assert b < len(batches) and np.isin(held, batches[b]).all(), (q, b, held)
        assert len(held) <= eng.depth
    if t + 1 < len(batches):
        assert np.isin(eng.landing.current, batches[t + 1]).all()


def run_and_compare(batches, num_rows, static, capacity, **kw):
    """Step the engine and the reference side by side; compare every decision; then replay."""
    batches = [np.asarray(b, dtype=np.int64) for b in batches]
    kw = engine_kwargs(**kw)
    eng = CpuCacheEngine(capacity, num_rows, static, **kw)
    ref = ReferenceCache(capacity, num_rows, static, **kw)
    window = max(kw["window"], eng.lookahead)  # horizon reads K batches
    assert eng.lookahead == ref.lookahead
    for t, batch in enumerate(batches):
        predicted = eng.storage_misses(batch)   # what the fetcher's read-ahead reads for this batch
        res = eng.step(batch, *_window(batches, t, window))
        assert predicted.tolist() == sorted(res.distinct[res.status == STORAGE].tolist()), t
        rec = ref.step(batch.tolist(), batches[t + 1: t + 1 + window])
        for f in FIELDS:
            assert getattr(res, f).tolist() == getattr(rec, f), (t, f)
        assert res.counts == rec.counts, t
        assert eng.end_iteration() == ref.end_iteration()
        assert eng.landing.current.tolist() == ref.landing
        assert eng.keys.tolist() == ref.slot_keys(), t
        assert eng.tag.tolist() == ref.slot_tags(), t
        _check_invariants(eng, batches, t, capacity)
    # the whole-trace kernel (incremental tags) gives the same counts and final state
    eng2 = CpuCacheEngine(capacity, num_rows, static, **kw)
    rows = eng2.replay(*flatten_batches(batches))
    ref2 = ReferenceCache(capacity, num_rows, static, **kw)
    assert rows.tolist() == ref2.replay(batches).tolist()
    assert eng2.keys.tolist() == eng.keys.tolist()
    if eng.long_lookahead:
        assert eng2.tag.tolist() == eng.tag.tolist()
    return rows


def random_trace(seed, num_rows=400, num_batches=50, max_len=70):
    rng = np.random.default_rng(seed)
    # skewed popularity so that lines get reused inside the window
    p = 1.0 / np.arange(1, num_rows + 1) ** 0.9
    p /= p.sum()
    perm = rng.permutation(num_rows)
    return [perm[rng.choice(num_rows, size=rng.integers(0, max_len), p=p)] for _ in range(num_batches)]


# `lookahead` (K) is read by horizon only; the others read `window` (W)
CONFIGS = [
    dict(ways=4, window=4, refresh_every=1, pvp=True, victim_depth=6, lookahead=12),  # K > W: spills only within W
    dict(ways=4, window=4, refresh_every=1, pvp=False, lookahead=3),
    dict(ways=8, window=8, refresh_every=1, pvp=True, victim_depth=2, lookahead=8),
    dict(ways=4, window=3, refresh_every=3, pvp=True, victim_depth=8, lookahead=1),
    dict(ways=4, window=0, refresh_every=1, pvp=True, lookahead=5),
    dict(ways=2, window=40, refresh_every=2, pvp=True, victim_depth=4, lookahead=40),  # wider than the masks
    dict(ways=4, window=31, refresh_every=1, pvp=True, victim_depth=4, lookahead=200),  # K past the trace
]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
def test_engine_equals_reference_random(policy, cfg):
    batches = random_trace(seed=cfg * 7 + POLICIES.index(policy))
    static = np.random.default_rng(cfg).integers(0, 256, 400).astype(np.uint8)
    rows = run_and_compare(batches, 400, static, 48, policy=policy, **CONFIGS[cfg])
    assert rows[:, COUNT_NAMES.index("requests")].sum() == sum(len(b) for b in batches)


@pytest.mark.parametrize("policy", POLICIES)
def test_engine_equals_reference_owner_sharded(policy):
    """Owner 1 of 3: ids v with v % 3 == 1, set (v // 3) % sets."""
    rng = np.random.default_rng(5)
    ids = np.arange(1, 600, 3)
    batches = [rng.choice(ids, size=rng.integers(1, 60)) for _ in range(40)]
    static = rng.integers(0, 256, 600).astype(np.uint8)
    run_and_compare(batches, 600, static, 40, policy=policy, ways=4, window=6, num_owners=3, owner=1,
                    victim_depth=5, lookahead=9)


def _adversarial_traces():
    sets, ways, g = 4, 4, 2
    same_set = np.arange(0, 4000, sets * g)[:60]  # owner 0, all in set 0
    rng = np.random.default_rng(11)
    yield "one_set", [rng.choice(same_set, 12) for _ in range(40)], dict(num_owners=g, owner=0)
    yield "duplicates", [np.repeat(rng.integers(0, 50, 5), 40) for _ in range(30)], {}
    yield "scan", [np.arange(i * 20, i * 20 + 20) % 90 for i in range(40)], {}
    yield "empty_batches", [rng.integers(0, 80, 30) if i % 3 else np.zeros(0, np.int64) for i in range(30)], {}
    yield "one_line", [rng.integers(0, 6, 4) for _ in range(30)], dict(capacity=1)
    yield "fewer_lines_than_ways", [rng.integers(0, 20, 8) for _ in range(30)], dict(capacity=3)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name,batches,extra", list(_adversarial_traces()), ids=lambda x: x if isinstance(x, str) else "")
def test_engine_equals_reference_adversarial(policy, name, batches, extra):
    extra = dict(extra)
    capacity = extra.pop("capacity", 16)
    # equal PageRank bytes everywhere: every static tie is broken by the lowest way
    static = np.full(4000, 7, np.uint8) if name in ("scan", "one_set") else \
        np.random.default_rng(1).integers(0, 256, 4000).astype(np.uint8)
    run_and_compare(batches, 4000, static, capacity, policy=policy, ways=4, window=5, victim_depth=3, lookahead=7,
                    **extra)


# ---- semantics pinned by hand (both engines against expectations written from the doc) ------

def _both(capacity, num_rows, static, **kw):
    kw = engine_kwargs(**kw)
    return [CpuCacheEngine(capacity, num_rows, static, **kw), ReferenceCache(capacity, num_rows, static, **kw)]


def _step(e, batch, window_batches):
    if isinstance(e, CpuCacheEngine):
        r = e.step(np.asarray(batch, np.int64), *flatten_batches([np.asarray(b, np.int64) for b in window_batches]))
        out = {f: getattr(r, f).tolist() for f in FIELDS}
    else:
        r = e.step(batch, window_batches)
        out = {f: getattr(r, f) for f in FIELDS}
    e.end_iteration()
    return out


def test_duplicates_coalesce_and_misses_fill_in_first_occurrence_order():
    static = np.zeros(100, np.uint8)
    for e in _both(4, 100, static, ways=4, policy="round_robin", window=0):
        r = _step(e, [9, 3, 9, 9, 5, 3], [])
        assert r["distinct"] == [9, 3, 5]
        assert r["inverse"] == [0, 1, 0, 0, 2, 1]
        assert r["slot"] == [0, 1, 2]  # one set: lowest empty way, in first-occurrence order
        r = _step(e, [7, 8, 3], [])
        # set full after 7 fills way 3; 8 evicts round-robin way 0 (node 9); 3 is a hit
        assert r["status"] == [2, 2, HIT]
        assert r["evicted"] == [-1, 9, -1]


def test_hybrid_cases_and_prefetcher_order():
    # one set of 4 ways, W = 16 (threshold 2). Lines: 10 (PR 50) no reuse, 11 (PR 40) reused
    # at t+2 (near), 12 (PR 90) reused at t+8 (far), 13 (PR 10) reused at t+1 (near).
    static = np.zeros(100, np.uint8)
    static[[10, 11, 12, 13, 20, 21]] = [50, 40, 90, 10, 5, 5]
    for policy, expected in [("hybrid", 10), ("hybrid_pvp", 12), ("static", 13), ("dynamic", 10)]:
        for e in _both(4, 100, static, ways=4, policy=policy, window=16, pvp=False):
            _step(e, [10, 11, 12, 13], [])
            window = [[13], [11]] + [[]] * 5 + [[12]]
            r = _step(e, [20], window)
            assert r["evicted"] == [expected], (policy, type(e).__name__)
            # a refresh with an empty window: every line has no reuse -> the lowest PageRank,
            # which is the line 20 filled in the previous iteration (PR 5)
            r = _step(e, [21], [])
            if policy.startswith("hybrid"):
                assert r["evicted"] == [20]
    # fresh lines come third: a set of one no-reuse line is gone, then FRESH before near ones
    static2 = np.zeros(100, np.uint8)
    static2[[1, 2, 3, 4]] = [9, 9, 9, 1]
    for e in _both(2, 100, static2, ways=2, policy="hybrid", window=8, pvp=False):
        _step(e, [1], [])
        r = _step(e, [2, 3, 4], [[1], [2, 3, 4]])
        # 2 fills the empty way; line 1 is reused next batch (near, case 4 only), so 3 evicts the
        # fresh line 2 (case 3), and 4 evicts the fresh line 3
        assert r["evicted"] == [-1, 2, 3]


def test_spill_goes_to_the_reuse_batch_queue_and_comes_back_as_a_victim_hit():
    static = np.zeros(50, np.uint8)
    static[[1, 2]] = [0, 200]
    for e in _both(1, 50, static, ways=1, policy="static", window=4, victim_depth=4):
        _step(e, [1], [])
        # t=1: 2 evicts 1, whose next reuse is batch 3 (inside the window): it is spilled
        r = _step(e, [2], [[], [1]])
        assert r["evicted"] == [1] and r["spill"] == [3 % 4]
        r = _step(e, [5], [[1]])  # t=2; the queue of batch 3 is prefetched at the end of t=2
        r = _step(e, [1], [])  # t=3: served from the landing buffer, re-inserted
        assert r["status"] == [1] and r["src"] == [0]


def test_no_spill_without_known_reuse_and_drop_when_queue_full():
    static = np.zeros(50, np.uint8)
    for e in _both(2, 50, static, ways=2, policy="round_robin", window=4, victim_depth=1):
        _step(e, [1, 2], [])
        r = _step(e, [3, 4], [[1, 2]])  # both evicted lines are reused at t+1, queue depth 1
        assert r["evicted"] == [1, 2]
        assert r["spill"] == [2, -2]
        r = _step(e, [5, 6], [[]])  # lines 3, 4 have no known reuse: evicted, not spilled
        assert r["spill"] == [-1, -1]


def test_geometry_and_errors():
    assert cache_geometry(100, 32).sets == 3 and cache_geometry(100, 32).lines == 96
    assert cache_geometry(5, 32).ways == 5
    static = np.zeros(10, np.uint8)
    with pytest.raises(InputError):
        CpuCacheEngine(0, 10, static, **engine_kwargs())
    with pytest.raises(InputError):
        CpuCacheEngine(4, 10, np.zeros(9, np.uint8), **engine_kwargs())
    with pytest.raises(InputError):
        CpuCacheEngine(4, 10, static, **engine_kwargs(policy="hybrid") | {"policy": "belady"})
    with pytest.raises(InputError):
        CpuCacheEngine(4, 10, static, **engine_kwargs(num_owners=2, owner=2))


# ---- horizon: the long lookahead, admission control --------------------------------------------

def test_horizon_evicts_the_farthest_and_refuses_a_miss_that_comes_back_later():
    # one set of 2 ways, K = 3. PageRank: 1 -> 50, 2 -> 10, 3 -> 90, 4 -> 5 (then 60).
    batches = [[1, 2], [1, 3], [], [2, 4], [3], [], []]
    for pr4, admitted in ((5, False), (60, True)):
        static = np.zeros(100, np.uint8)
        static[[1, 2, 3, 4]] = [50, 10, 90, pr4]
        for e in _both(2, 100, static, ways=2, policy="horizon", window=4, pvp=False, lookahead=3):
            def step(t):
                return _step(e, batches[t], batches[t + 1: t + 4])

            def tags():
                return [int(x) for x in (e.tag if isinstance(e, CpuCacheEngine) else e.slot_tags())]

            # t=0: 1 (next request t=1) and 2 (t=3) fill the empty ways, tagged at once
            step(0)
            assert tags() == [1, 3]
            # t=1: 1 hits and has no request in [2, 4] (its PageRank, 50, ranks it); 3 (next request
            # t=4) evicts it: a line without a request in the lookahead goes first
            r = step(1)
            assert r["status"] == [HIT, 2] and r["evicted"] == [-1, 1] and r["slot"] == [0, 0]
            assert tags() == [4, 3]
            # t=2: nothing; t=3: 2 hits and has no request in [4, 6] (PageRank 10); the miss 4 has
            # none either: it is cached only if its PageRank beats 10, evicting 2
            step(2)
            r = step(3)
            if admitted:
                assert r["evicted"] == [-1, 2] and r["slot"] == [1, 1]
            else:  # not cached: slot -1, nothing evicted, the set unchanged
                assert r["evicted"] == [-1, -1] and r["slot"] == [1, -1]
            keys = e.keys.tolist() if isinstance(e, CpuCacheEngine) else e.slot_keys()
            assert keys == ([3, 4] if admitted else [3, 2])


def test_horizon_windows_that_stop_at_epoch_ends():
    """The loader's windows stay inside an epoch: shorter at its end, none at its last batch, a
    full K again at the next epoch's first batch (which no window announced). The engine reads
    each batch once and makes the reference's decisions."""
    batches = random_trace(seed=21, num_batches=36)
    static = np.random.default_rng(2).integers(0, 256, 400).astype(np.uint8)
    kw = engine_kwargs(ways=4, window=3, pvp=True, victim_depth=5, policy="horizon", lookahead=6)
    eng, ref = CpuCacheEngine(48, 400, static, **kw), ReferenceCache(48, 400, static, **kw)
    epoch = 12
    for t, batch in enumerate(batches):
        end = (t // epoch + 1) * epoch
        win = [np.asarray(b, np.int64) for b in batches[t + 1: min(t + 1 + 6, end)]]
        res = eng.step(np.asarray(batch, np.int64), *(flatten_batches(win) if win else (np.zeros(0, np.int64), np.zeros(1, np.int64))))
        rec = ref.step(batch.tolist(), win)
        for f in FIELDS:
            assert getattr(res, f).tolist() == getattr(rec, f), (t, f)
        assert res.counts == rec.counts
        eng.end_iteration()
        ref.end_iteration()
        assert eng.tag.tolist() == ref.slot_tags(), t
    assert eng.ring.live() <= sum(len(b) for b in batches[-6:])  # served batches leave the ring


def test_horizon_refuses_a_batch_its_lookahead_did_not_announce():
    static = np.zeros(100, np.uint8)
    eng = CpuCacheEngine(8, 100, static, **engine_kwargs(ways=4, policy="horizon", lookahead=2, pvp=False))
    eng.step(np.array([1, 2]), *flatten_batches([np.array([3, 4]), np.array([5])]))
    eng.end_iteration()
    with pytest.raises(InputError, match="lookahead announced"):
        eng.step(np.array([3, 9]), *flatten_batches([np.array([5])]))


def test_horizon_ring_grows_and_reports_its_memory():
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, 5000, 900) for _ in range(12)]
    static = rng.integers(0, 256, 5000).astype(np.uint8)
    eng = CpuCacheEngine(256, 5000, static, **engine_kwargs(ways=8, policy="horizon", lookahead=5, pvp=False))
    assert eng.ring.capacity == 1024
    for t, b in enumerate(batches):
        eng.step(b, *flatten_batches(batches[t + 1: t + 6]))
        eng.end_iteration()
    assert eng.ring.capacity >= 5 * 800  # 6 batches of ~850 distinct ids were live at once
    assert eng.lookahead_bytes() == eng.ring.nbytes >= 8 * eng.ring.capacity + 8 * 5000
    assert CpuCacheEngine(256, 5000, static, **engine_kwargs(policy="hybrid")).lookahead_bytes() == 0

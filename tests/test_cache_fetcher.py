"""Rows served through CachedFeatureSource equal the rows on disk; counters add up."""

from __future__ import annotations

import numpy as np
import pytest

from lsm_gnn.sources.cached import CachedFeatureSource
from lsm_gnn.cache.replay import replay
from lsm_gnn.config import CacheConfig
from lsm_gnn.utils.errors import ConfigError, InputError
from array_store import ArrayStore
from engine_args import POLICIES


def _drive(src, batches, window, check):
    for t, b in enumerate(batches):
        src.advance(batches[t + 1: t + 1 + window])
        out = src.fetch(b)
        assert out.shape == (len(b), src.dim)
        check(b, out)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("pvp", [True, False])
def test_rows_through_cache_equal_disk_rows(random_dataset, policy, pvp):
    ds = random_dataset(num_nodes=1500, dim=24, dtype="float32", seed=3)
    disk = ds.feature_array()  # memmap over features.bin
    static = ds.static_scores()
    rng = np.random.default_rng(4)
    p = 1.0 / np.arange(1, 1501) ** 0.8
    p /= p.sum()
    batches = [rng.choice(1500, size=rng.integers(50, 300), p=p) for _ in range(25)]
    # 200 cache lines; with the PVP on, 4 queues + a landing buffer of 40 rows come out of the same budget
    # (horizon reads K = 6 future batches; the others W = 4)
    cfg = CacheConfig(capacity_bytes=(200 + (5 * 40 if pvp else 0)) * 24 * 4, ways=8, window=4, policy=policy,
                      lookahead=6, victim_buffer={"enabled": pvp, "depth": 40})
    store = ArrayStore(disk)
    with CachedFeatureSource(store, 1500, 24, np.float32, cfg, static) as src:
        assert src.window.window == (6 if policy == "horizon" else 4)
        _drive(src, batches, src.window.window, lambda b, out: np.testing.assert_array_equal(out, disk[b]))
        c = src.counters
        assert c.requests == sum(len(b) for b in batches)
        assert c.local_hits + c.victim_hits + c.storage_rows == c.distinct
        assert store.counters.rows_requested == c.storage_rows  # only misses touch storage
        assert c.local_hits > 0
        if pvp and policy in ("hybrid", "dynamic", "static"):
            assert c.victim_hits > 0 and src.stats["spilled"] > 0
        if not pvp:
            assert c.victim_hits == 0 and src.stats["victim_buffer_bytes"] == 0
        assert src.stats["prefetched_used"] == c.victim_hits <= src.stats["prefetched"]
        if policy == "horizon":  # admission control: misses served without being cached
            assert src.stats["bypassed"] > 0 and src.stats["lookahead_bytes"] > 0
        else:
            assert src.stats["bypassed"] == 0
    # the fetcher and the decision replay agree on every count
    r = replay(batches, cfg, 1500, static, budget=src.budget)
    assert (r.totals["hits"], r.totals["victim_hits"], r.totals["storage_rows"], r.totals["bypassed"]) == \
        (c.local_hits, c.victim_hits, c.storage_rows, src.stats["bypassed"])


def test_owner_sharded_source_and_ownership_errors():
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(900, 8)).astype(np.float64)
    cfg = CacheConfig(capacity_bytes=(40 + 4 * 8) * 64, ways=4, window=3, victim_buffer={"depth": 8})
    owned = np.arange(2, 900, 3)
    batches = [rng.choice(owned, size=60) for _ in range(20)]
    with CachedFeatureSource(ArrayStore(feats), 900, 8, np.float64, cfg, np.zeros(900, np.uint8),
                             num_owners=3, owner=2) as src:
        _drive(src, batches, 3, lambda b, out: np.testing.assert_array_equal(out, feats[b]))
        with pytest.raises(InputError, match="owner 2 of 3"):
            src.fetch(np.array([2, 3]))
        with pytest.raises(InputError, match=r"\[0, 900\)"):
            src.advance([np.array([902])])
        with pytest.raises(InputError, match="integer"):
            src.fetch(np.array([2.0]))


def test_disabled_cache_reads_everything_from_storage():
    feats = np.arange(200 * 4, dtype=np.float32).reshape(200, 4)
    cfg = CacheConfig(enabled=False)
    src = CachedFeatureSource(ArrayStore(feats), 200, 4, np.float32, cfg, np.zeros(200, np.uint8))
    ids = np.array([5, 7, 5, 199])
    np.testing.assert_array_equal(src.fetch(ids), feats[ids])
    assert (src.counters.storage_rows, src.counters.distinct, src.counters.local_hits) == (3, 3, 0)
    src.close()


def test_training_refuses_an_engine_it_would_not_use():
    feats = np.zeros((10, 4), np.float32)
    with pytest.raises(ConfigError, match="cache.engine.*'gpu'"):
        CachedFeatureSource(ArrayStore(feats), 10, 4, np.float32, CacheConfig(engine="gpu"), np.zeros(10, np.uint8))


def test_store_shape_must_match():
    feats = np.zeros((10, 4), np.float32)
    with pytest.raises(InputError, match="store holds"):
        CachedFeatureSource(ArrayStore(feats), 10, 8, np.float32, CacheConfig(), np.zeros(10, np.uint8))


def test_row_pool_moves_rows_between_tiers_without_losing_any():
    """Spills, victim-hit fills and prefetches move pool rows by index: after every batch each
    pool row has exactly one owner, every resident line holds its row, and every landed victim
    holds its row."""
    rng = np.random.default_rng(1)
    feats = rng.normal(size=(400, 6)).astype(np.float32)
    # a host tier (48 rows) larger than the cache (32 lines) stresses the pool's moves: forced
    cfg = CacheConfig(capacity_bytes=(32 + 4 * 12) * 24, ways=4, window=3, victim_buffer={"depth": 12, "force": True})
    p = 1.0 / np.arange(1, 401) ** 0.9
    batches = [rng.choice(400, size=90, p=p / p.sum()) for _ in range(30)]
    with CachedFeatureSource(ArrayStore(feats), 400, 6, np.float32, cfg, np.zeros(400, np.uint8)) as src:
        pool = src.pool
        assert len(pool.pool) == src.engine.geometry.lines + 3 * 12 + 12
        for t, b in enumerate(batches):
            src.advance(batches[t + 1: t + 4])
            np.testing.assert_array_equal(src.fetch(b), feats[b])
            assert pool.owners_consistent()
            for sl in np.flatnonzero(src.engine.keys >= 0):
                np.testing.assert_array_equal(pool.line(sl).view(np.float32), feats[src.engine.keys[sl]])
            for i, v in enumerate(src.landing.current):
                np.testing.assert_array_equal(pool.pool[pool.land_row[i]].view(np.float32), feats[v])
        assert src.stats["spilled"] > 0 and src.counters.victim_hits > 0
        assert src.stats["victim_buffer_bytes"] == (3 + 1) * 12 * 24


def test_per_request_tiers_add_up_to_the_distinct_counts():
    rng = np.random.default_rng(3)
    feats = rng.normal(size=(500, 4)).astype(np.float32)
    cfg = CacheConfig(capacity_bytes=(64 + 3 * 16) * 16, ways=4, window=2, victim_buffer={"depth": 16})
    batches = [rng.integers(0, 500, 120) for _ in range(12)]
    with CachedFeatureSource(ArrayStore(feats), 500, 4, np.float32, cfg, np.zeros(500, np.uint8)) as src:
        seen_tiers = set()
        for t, b in enumerate(batches):
            src.advance(batches[t + 1: t + 3])
            before = src.counters.as_dict()
            src.fetch(b)
            after = src.counters.as_dict()
            tiers = src.last_tiers
            assert len(tiers) == len(b)
            assert (tiers >= 0).sum() == after["distinct"] - before["distinct"]
            for code, key in ((0, "local_hits"), (1, "victim_hits"), (2, "storage_rows")):
                assert (tiers == code).sum() == after[key] - before[key]
            # only the first occurrence of an id carries its tier
            first = np.unique(b, return_index=True)[1]
            assert np.all(tiers[first] >= 0)
            seen_tiers |= set(np.unique(tiers[tiers >= 0]).tolist())
        assert {0, 2} <= seen_tiers


def _run(store_factory, cfg, batches, windows, static, n, dim):
    """Per batch: the rows, the tier counters and the store's I/O counters after it."""
    out = []
    with CachedFeatureSource(store_factory(), n, dim, np.float32, cfg, static) as src:
        for t, b in enumerate(batches):
            src.advance(windows(t))
            rows = np.array(src.fetch(b))
            io = src.io_counters()
            out.append((rows, src.counters.as_dict(), (io.rows_requested, io.distinct_rows, io.io_ops, io.bytes_read)))
        return out, dict(src.stats)


@pytest.mark.parametrize("pvp", [True, False])
def test_the_read_ahead_reads_exactly_the_next_batchs_misses_and_changes_no_count(random_dataset, pvp):
    """With the read-ahead on, every batch gets the same rows, the same tier counts and the same
    storage I/O (rows, operations, bytes: counted with the batch that uses them) as with it off,
    and every storage row of every batch after the first was read ahead: none missed, none unused."""
    from lsm_gnn.storage.open import open_feature_store

    ds = random_dataset(num_nodes=3000, dim=32, dtype="float32", seed=5)
    disk, static = ds.feature_array(), ds.static_scores()
    rng = np.random.default_rng(6)
    p = 1.0 / np.arange(1, 3001) ** 0.8
    batches = [rng.choice(3000, size=400, p=p / p.sum()) for _ in range(30)]
    base = dict(capacity_bytes=(300 + (5 * 60 if pvp else 0)) * 32 * 4, ways=8, window=4,
                victim_buffer={"enabled": pvp, "depth": 60})
    runs = {}
    for ahead in (False, True):
        runs[ahead] = _run(lambda: open_feature_store(ds, "direct"), CacheConfig(readahead=ahead, **base), batches,
                           lambda t: batches[t + 1: t + 5], static, 3000, 32)
    (off, off_stats), (on, on_stats) = runs[False], runs[True]
    for t, ((r0, c0, io0), (r1, c1, io1)) in enumerate(zip(off, on)):
        np.testing.assert_array_equal(r1, disk[batches[t]])
        np.testing.assert_array_equal(r0, r1)
        assert (c0, io0) == (c1, io1), f"batch {t}"
    first_storage = off[0][1]["storage_rows"]
    assert on_stats["readahead_rows"] == off[-1][1]["storage_rows"] - first_storage > 0
    assert on_stats["readahead_missed_rows"] == on_stats["readahead_unused_rows"] == 0
    assert off_stats["readahead_rows"] == 0 and on_stats["readahead_buffer_bytes"] > 0
    if pvp:
        assert on[-1][1]["victim_hits"] > 0   # the landed victims were left out of the reads


def test_a_read_ahead_on_a_wrong_window_still_serves_the_right_rows_and_counts_its_waste():
    """A window whose first batch is not the next one (a caller's bug, or a source that changed
    its mind): the rows are still the file's; the rows read ahead and not used are counted, and
    so are the rows it lacked, which were read when asked for."""
    rng = np.random.default_rng(7)
    feats = rng.normal(size=(800, 8)).astype(np.float32)
    batches = [rng.integers(0, 800, 150) for _ in range(12)]
    lies = [rng.integers(0, 800, 150) for _ in range(12)]
    cfg = CacheConfig(capacity_bytes=(64 + 3 * 16) * 32, ways=4, window=2, victim_buffer={"depth": 16})
    on, stats = _run(lambda: ArrayStore(feats), cfg, batches, lambda t: [lies[t]], np.zeros(800, np.uint8), 800, 8)
    for t, (rows, _, _) in enumerate(on):
        np.testing.assert_array_equal(rows, feats[batches[t]])
    assert stats["readahead_missed_rows"] > 0 and stats["readahead_unused_rows"] > 0
    # every row read is counted: the batches' misses, plus what was read ahead and not used
    assert on[-1][2][0] == on[-1][1]["storage_rows"] + stats["readahead_unused_rows"]

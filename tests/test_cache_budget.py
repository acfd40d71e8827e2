"""The per-device memory budget: one total, split between device cache and host tier."""

from __future__ import annotations

import pytest

from lsm_gnn.cache.budget import budget_for_cache_rows, memory_budget, system_memory
from lsm_gnn.config import CacheConfig, parse_config
from lsm_gnn.utils.errors import ConfigError


def test_default_split_gives_the_host_tier_its_share_of_the_total():
    cfg = CacheConfig(capacity_fraction=0.1, window=8)
    b = memory_budget(cfg, 1_000_000, 4096)
    assert b.total_rows <= 100_000 and b.total_rows == b.cache_rows + b.host_rows
    assert b.victim_depth == 10_000 // 9 and b.host_rows == 9 * b.victim_depth  # 8 queues + landing
    assert b.host_rows <= 0.1 * b.total_rows < b.host_rows + 9
    rec = b.record()
    assert rec["total_bytes"] == rec["cache_bytes"] + rec["victim_bytes"] == b.total_rows * 4096
    assert rec["fraction_of_features"] == pytest.approx(0.1, abs=1e-4)


def test_capacity_bytes_and_scaled_budget():
    cfg = CacheConfig(capacity_bytes=10_000 * 512, window=4)
    one = memory_budget(cfg, 50_000, 512)
    two = memory_budget(cfg, 50_000, 512, scale=2)
    assert one.total_rows == 10_000 and two.total_rows == 20_000
    assert two.victim_depth == 2 * one.victim_depth  # the same rule on twice the memory


def test_no_victim_buffer_leaves_everything_to_the_cache():
    for cfg in (CacheConfig(window=0), CacheConfig(victim_buffer={"enabled": False}),
                CacheConfig(victim_buffer={"host_fraction": 0.0})):
        b = memory_budget(cfg, 1000, 4)
        assert (b.cache_rows, b.host_rows, b.pvp) == (100, 0, False)
    tiny = memory_budget(CacheConfig(capacity_fraction=0.005), 1000, 4)  # 5 rows: no room for 9 queues
    assert (tiny.cache_rows, tiny.victim_depth) == (5, 0)
    off = memory_budget(CacheConfig(enabled=False), 1000, 4)
    assert off.total_rows == 0 and off.record()["total_bytes"] == 0


def test_explicit_depth_comes_out_of_the_same_total():
    b = memory_budget(CacheConfig(window=8, victim_buffer={"depth": 40}), 10_000, 4)
    assert (b.total_rows, b.host_rows, b.cache_rows) == (1000, 360, 640)


def test_oversized_host_tier_is_refused_naming_the_key_unless_forced():
    cfg = CacheConfig(window=8, victim_buffer={"depth": 32768})
    with pytest.raises(ConfigError, match=r"cache\.victim_buffer\.depth.*more than the 0 left"):
        memory_budget(cfg, 1_000_000, 4096)
    with pytest.raises(ConfigError, match="larger|more than"):
        memory_budget(CacheConfig(window=8, victim_buffer={"depth": 120}), 10_000, 4)  # 1080 > 1000 total
    # queues larger than the rows an owner could ever hold
    with pytest.raises(ConfigError, match="could ever hold"):
        memory_budget(CacheConfig(capacity_fraction=1.0, window=2, victim_buffer={"depth": 150}), 1000, 4,
                      owned_rows=250)
    forced = memory_budget(CacheConfig(capacity_fraction=0.5, window=2,
                                       victim_buffer={"depth": 100, "force": True}), 1000, 4)
    assert (forced.cache_rows, forced.host_rows) == (200, 300)
    with pytest.raises(ConfigError, match="capacity_fraction"):
        memory_budget(CacheConfig(capacity_fraction=0.01, window=2, victim_buffer={"depth": 5, "force": True}),
                      1000, 4)


def test_budget_for_cache_rows_inverts_the_share():
    cfg = CacheConfig(window=8)
    b = budget_for_cache_rows(cfg, 90_000, 1_000_000)
    assert b.cache_rows == 90_000 and b.victim_depth == 10_000 // 9


def test_system_memory_for_every_system():
    cfg = parse_config({"cache": {"capacity_fraction": 0.1}}).cache
    lsm = system_memory(cfg, "lsm", 1000, 4096, devices=2)
    assert lsm["total_bytes"] == 100 * 4096 and lsm["devices"] == 2
    assert lsm["all_devices_bytes"] == 200 * 4096 and lsm["all_devices_fraction"] == pytest.approx(0.2)
    iso = system_memory(cfg, "isolated", 1000, 4096, devices=2)
    assert iso["total_bytes"] == lsm["total_bytes"]
    mmap = system_memory(cfg, "mmap", 1000, 4096, devices=2, page_cache_bytes=lsm["all_devices_bytes"])
    assert mmap["all_devices_bytes"] == lsm["all_devices_bytes"] and mmap["page_cache_capped"]
    assert system_memory(cfg, "memory", 1000, 4096)["fraction_of_features"] == 1.0
    assert system_memory(cfg, "direct", 1000, 4096)["total_bytes"] == 0
    dd = system_memory(cfg, "distdgl", 1000, 4096, machines=2)
    assert dd["all_devices_fraction"] == pytest.approx(1.0) and dd["devices"] == 2


def test_the_policy_sets_the_host_share_when_the_config_leaves_it_unset():
    """hybrid (and the other paper / classic policies): 0.10 of the total for the host tier;
    horizon: none, the whole budget is cache lines; an explicit share applies to every policy."""
    hybrid = memory_budget(CacheConfig(policy="hybrid", capacity_fraction=0.1, window=8), 1_000_000, 4096)
    horizon = memory_budget(CacheConfig(policy="horizon", capacity_fraction=0.1, window=8), 1_000_000, 4096)
    assert hybrid.total_rows == horizon.total_rows == 100_000  # the same memory
    assert hybrid.victim_depth == 10_000 // 9 and horizon.victim_depth == 0
    assert (horizon.cache_rows, horizon.host_rows, horizon.pvp) == (100_000, 0, False)
    forced = memory_budget(CacheConfig(policy="horizon", window=8, victim_buffer={"host_fraction": 0.1}), 1_000_000, 4096)
    assert forced.victim_depth == hybrid.victim_depth and forced.pvp
    by_rows = budget_for_cache_rows(CacheConfig(policy="horizon", window=8), 5000, 100_000)
    assert (by_rows.cache_rows, by_rows.victim_depth) == (5000, 0)


def test_lookahead_memory_is_stated_not_budgeted():
    from lsm_gnn.cache.budget import lookahead_bytes

    la = lookahead_bytes(max_window_ids=128 * 43_000, max_records=129 * 43_000, owned_rows=1_000_000, lookahead=128)
    assert la["window_ids_bytes"] == 8 * 128 * 43_000
    assert la["engine_ring_bytes"] == 8 * 129 * 43_000 + 8 * 1_000_000 + 8 * 130 + 24
    assert la["lookahead_bytes"] == la["window_ids_bytes"] + la["engine_ring_bytes"]


def test_a_fraction_is_floored_as_its_decimal_reads_not_as_the_double_below_it():
    # 0.29 * 100 is 28.999999999999996 in binary floating point: int() of it was 28 rows
    assert int(0.29 * 100) == 28
    b = memory_budget(CacheConfig(capacity_fraction=0.29, victim_buffer={"enabled": False}), 100)
    assert b.cache_rows == 29
    # the host share too: 0.29 of a 100-row total is 29 host rows, 29 // (W + 1) = 3 lines per queue
    b = memory_budget(CacheConfig(capacity_fraction=1.0, window=8, victim_buffer={"host_fraction": 0.29}), 100)
    assert (b.victim_depth, b.total_rows) == (3, 100)
    # and the inverse: a cache of 71 rows beside a 0.29 host share is a total of 100
    b = budget_for_cache_rows(CacheConfig(window=8, victim_buffer={"host_fraction": 0.29}), 71, 1000)
    assert b.victim_depth == 29 // 9

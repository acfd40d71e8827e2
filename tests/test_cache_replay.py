"""The decision-replay API: engines agree, totals are consistent, PVP saves storage reads."""

from __future__ import annotations

import numpy as np
import pytest

from lsm_gnn.cache.budget import budget_for_cache_rows
from lsm_gnn.cache.replay import replay
from lsm_gnn.config import CacheConfig
from lsm_gnn.utils.errors import InputError

from engine_args import POLICIES


def _trace(seed=0, num_rows=2000, num_batches=40, size=300):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, num_rows + 1) ** 0.9
    p /= p.sum()
    perm = rng.permutation(num_rows)
    return [np.unique(perm[rng.choice(num_rows, size=size, p=p)]) for _ in range(num_batches)]


@pytest.mark.parametrize("policy", POLICIES)
def test_cpu_replay_equals_reference_replay(policy):
    batches = _trace()
    static = np.random.default_rng(1).integers(0, 256, 2000).astype(np.uint8)
    cfg = CacheConfig(policy=policy, ways=8, window=6, lookahead=9, victim_buffer={"depth": 30})
    budget = budget_for_cache_rows(cfg, 160, 2000)
    a = replay(batches, cfg, 2000, static, budget=budget, engine="cpu")
    b = replay(batches, cfg, 2000, static, budget=budget, engine="reference")
    for k in a.per_batch:
        assert a.per_batch[k].tolist() == b.per_batch[k].tolist(), k
    t = a.totals
    assert t["hits"] + t["victim_hits"] + t["storage_rows"] == t["distinct"]
    assert t["requests"] == sum(len(x) for x in batches)
    assert a.policy == ("hybrid_pvp" if policy == "hybrid" else policy)
    assert (a.sets, a.ways) == (20, 8)


def test_pvp_saves_storage_reads_for_hybrid():
    batches = _trace(seed=3)
    static = np.random.default_rng(2).integers(0, 256, 2000).astype(np.uint8)
    on_cfg = CacheConfig(policy="hybrid", window=8, victim_buffer={"depth": 512})
    off_cfg = CacheConfig(policy="hybrid", window=8, victim_buffer={"enabled": False})
    on = replay(batches, on_cfg, 2000, static, budget=budget_for_cache_rows(on_cfg, 128, 2000))
    off = replay(batches, off_cfg, 2000, static, budget=budget_for_cache_rows(off_cfg, 128, 2000))
    assert on.totals["victim_hits"] > 0 and off.totals["victim_hits"] == 0
    assert on.totals["storage_rows"] < off.totals["storage_rows"]
    assert on.totals["prefetched"] >= on.totals["victim_hits"]


def test_no_cache_and_sharded_owner():
    batches = [np.array([4, 4, 10]), np.array([10, 16])]
    off = CacheConfig(enabled=False)
    r = replay(batches, off, 20, np.zeros(20, np.uint8), budget=budget_for_cache_rows(off, 10, 20),
               num_owners=3, owner=1)
    assert r.totals["storage_rows"] == 4 and r.totals["distinct"] == 4 and r.policy == "none"
    lru = CacheConfig(policy="lru", window=1, victim_buffer={"enabled": False})
    r = replay(batches, lru, 20, np.zeros(20, np.uint8), budget=budget_for_cache_rows(lru, 10, 20),
               num_owners=3, owner=1)
    assert r.per_batch["hits"].tolist() == [0, 1]
    with pytest.raises(InputError, match="owner 1 of 3"):
        replay([np.array([3])], CacheConfig(), 20, np.zeros(20, np.uint8),
               budget=budget_for_cache_rows(CacheConfig(), 4, 20), num_owners=3, owner=1)
    with pytest.raises(InputError, match="engine"):
        replay(batches, CacheConfig(), 20, np.zeros(20, np.uint8), budget=budget_for_cache_rows(CacheConfig(), 4, 20),
               engine="tpu")


def test_gpu_engine_reports_absence_cleanly():
    from lsm_gnn.cache import gpu_engine

    if gpu_engine.available():
        pytest.skip("a GPU is present; tests/test_cache_gpu.py compares the engines")
    with pytest.raises(InputError, match="GPU cache engine"):
        replay([np.array([1])], CacheConfig(), 4, np.zeros(4, np.uint8), budget=budget_for_cache_rows(CacheConfig(), 2, 4),
               engine="gpu")


def test_bench_cache_cli_json(tmp_path):
    import json

    from click.testing import CliRunner

    from lsm_gnn.bench.cache import bench_cache, synthetic_trace
    from lsm_gnn.sim.trace import Trace

    args = ["--rows", "5000", "--batches", "6", "--batch-size", "400", "--reference-requests", "500",
            "--repeat", "1", "--policy", "hybrid", "--policy", "lru", "--json"]
    res = CliRunner().invoke(bench_cache, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["requests_per_s_per_core"] == out["policies"]["hybrid"]["requests_per_s_per_core"] > 0
    assert out["policies"]["hybrid"]["policy_run"] == "hybrid_pvp"
    batches, _ = synthetic_trace(3000, 5, 200, seed=1)
    path = tmp_path / "trace.npz"
    Trace(1, 3000, [[b] for b in batches]).save(path)
    res = CliRunner().invoke(bench_cache, ["--trace", str(path), "--reference-requests", "300", "--repeat", "1",
                                           "--policy", "static"])
    assert res.exit_code == 0, res.output
    assert "requests_per_s_per_core" in res.output


def test_bench_cache_json_reports_the_budget_of_the_headline_policy_not_the_last_one_measured():
    import json

    from click.testing import CliRunner

    from lsm_gnn.bench.cache import bench_cache
    from lsm_gnn.cache.budget import memory_budget
    from lsm_gnn.config import CacheConfig

    # horizon, measured last, keeps no victim buffer: its budget differs from hybrid's
    args = ["--rows", "4000", "--batches", "4", "--batch-size", "300", "--reference-requests", "300",
            "--repeat", "1", "--ways", "4", "--window", "4", "--policy", "hybrid", "--policy", "horizon", "--json"]
    res = CliRunner().invoke(bench_cache, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    hybrid = memory_budget(CacheConfig(policy="hybrid", ways=4, window=4, capacity_fraction=0.1,
                                       victim_buffer={"depth": None}), 4000, 1)
    horizon = memory_budget(CacheConfig(policy="horizon", ways=4, window=4, capacity_fraction=0.1,
                                        victim_buffer={"depth": None}), 4000, 1)
    assert (hybrid.host_rows, hybrid.pvp) != (horizon.host_rows, horizon.pvp)
    assert out["capacity_rows"] == hybrid.cache_rows
    assert out["memory_rows"] == {"cache": hybrid.cache_rows, "victim": hybrid.host_rows, "total": hybrid.total_rows,
                                  "fraction_of_features": hybrid.total_rows / 4000}
    assert out["config"] == {"ways": 4, "window": 4, "victim_depth": hybrid.victim_depth, "pvp": hybrid.pvp}

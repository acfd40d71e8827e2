"""DeviceCachedFeatureSource moves real rows between torch tiers and makes CachedFeatureSource's
decisions: every returned row is the file's, every resident line, queued victim and landed victim
holds its row after every batch, and the counters and per-request tiers equal the host source's.

Three backends: device="cpu" with the CPU engine (every policy, PVP on and off: runs everywhere);
the GPU engine's CUDA sources on the host compiler (tests/cuda_emu.py; skipped without g++)
driving the same data plane on the CPU; and device="cuda" (marked gpu, skipped without one).
"""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lsm_gnn.cache import gpu_codegen, gpu_engine
from lsm_gnn.cache.device_pool import DeviceRowPool, gather_rows, word_dtype
from lsm_gnn.sources.cached_device import DeviceCachedFeatureSource
from lsm_gnn.sources.cached import CachedFeatureSource
from lsm_gnn.cache.window import ROW_SLOT
from lsm_gnn.utils.errors import ConfigError, InputError
from array_store import ArrayStore

from engine_args import POLICIES, engine_kwargs
SHARED_STATS = ("iterations", "evictions", "spilled", "spill_dropped", "prefetched", "prefetched_used",
                "victim_bytes", "prefetch_bytes", "victim_buffer_bytes")


def cache_cfg(*, cache_rows, row_bytes, pvp=True, depth=8, window=4, engine="cpu", **kw):
    """A duck-typed CacheConfig (GPU images may lack pydantic) whose budget leaves `cache_rows`
    cache lines beside the host tier."""
    vb = SimpleNamespace(enabled=pvp, depth=depth, host_fraction=0.1, force=kw.pop("force", False))
    total = cache_rows + ((window + 1) * depth if pvp and window else 0)
    base = dict(enabled=True, capacity_bytes=total * row_bytes, capacity_fraction=None, ways=8, policy="hybrid",
                window=window, refresh_every=1, lookahead=16, engine=engine, victim_buffer=vb,  # K: horizon only
                readahead=True)
    return SimpleNamespace(**{**base, **kw})


def on_cpu_engine(cfg):
    return SimpleNamespace(**{**vars(cfg), "engine": "cpu"})


def skewed_batches(rng, owned, n_batches, lo, hi, alpha=0.8):
    p = 1.0 / np.arange(1, len(owned) + 1) ** alpha
    return [rng.choice(owned, size=int(rng.integers(lo, hi)), p=p / p.sum()) for _ in range(n_batches)]


def host_rows(t: torch.Tensor, dtype, dim) -> np.ndarray:
    return t.cpu().numpy().view(dtype).reshape(-1, dim)


def host(a) -> np.ndarray:
    return np.asarray(a.get()) if hasattr(a, "get") else np.asarray(a)


def check_tiers(src, rows: np.ndarray) -> None:
    """Every resident line, queued victim and landed victim holds its id's row; capacity holds."""
    pool, eng = src.pool, src.engine
    pool.synchronize()
    assert eng.occupancy() <= src.capacity_rows and len(pool.cache) <= src.capacity_rows
    keys = host(eng.keys)
    resident = np.flatnonzero(keys >= 0)
    np.testing.assert_array_equal(host_rows(pool.cache, src.dtype, src.dim)[resident], rows[keys[resident]],
                                  err_msg="cache lines")
    if not src.pvp:
        return
    n = int(host(eng.landing.n)[0])
    np.testing.assert_array_equal(host_rows(pool.landing, src.dtype, src.dim)[:n],
                                  rows[host(eng.landing.ids)[:n]], err_msg="landing buffer")
    queues, ids, count, d = host_rows(pool.queues, src.dtype, src.dim), host(eng.victims.ids), \
        host(eng.victims.count), eng.depth
    for q in range(eng.window):
        sl = slice(q * d, q * d + int(count[q]))
        np.testing.assert_array_equal(queues[sl], rows[ids[sl]], err_msg=f"victim queue {q}")


def drive_pair(dev, ref, batches, window, rows, check=True) -> int:
    """Fetch every batch from both sources; returns the batches where a slot was filled twice."""
    double_fills = 0
    for t, b in enumerate(batches):
        dev.advance(batches[t + 1: t + 1 + window])
        ref.advance(batches[t + 1: t + 1 + window])
        out, expect = dev.fetch(b), ref.fetch(b)
        assert isinstance(out, torch.Tensor) and out.device == dev.device and out.shape == (len(b), dev.dim)
        assert out.dtype == torch.from_numpy(np.empty(0, dev.dtype)).dtype
        np.testing.assert_array_equal(out.cpu().numpy(), rows[b], err_msg=f"batch {t}")
        np.testing.assert_array_equal(expect, rows[b])
        np.testing.assert_array_equal(dev.last_tiers, ref.last_tiers, err_msg=f"batch {t}: tiers")
        assert dev.counters == ref.counters, f"batch {t}"
        if check:
            check_tiers(dev, rows)
        eng = dev.engine
        if isinstance(eng.keys, np.ndarray) and hasattr(eng, "rows"):
            # a miss whose id is not resident after the batch: its slot was filled again
            tiers = dev.last_tiers
            missed = np.asarray(b)[tiers >= 1] // dev.num_owners
            double_fills += int((eng.rows[missed, ROW_SLOT] < 0).any())
    for k in SHARED_STATS:
        assert dev.stats[k] == ref.stats[k], k
    rb = dev.row_bytes
    assert dev.stats["d2h_bytes"] == dev.stats["spilled"] * rb
    assert dev.stats["h2d_bytes"] == (dev.counters.storage_rows + dev.stats["prefetched"]) * rb
    return double_fills


# ---- device="cpu", CPU engine -----------------------------------------------------------------
@pytest.mark.parametrize("pvp", [True, False], ids=["pvp", "plain"])
@pytest.mark.parametrize("policy", POLICIES)
def test_rows_and_decisions_equal_the_host_source(random_dataset, policy, pvp):
    ds = random_dataset(num_nodes=1500, dim=24, dtype="float32", seed=3)
    disk = ds.feature_array()
    static = ds.static_scores()
    rng = np.random.default_rng(POLICIES.index(policy))
    batches = skewed_batches(rng, np.arange(1500), 25, 50, 300)
    cfg = cache_cfg(cache_rows=200, row_bytes=96, pvp=pvp, depth=40, policy=policy, lookahead=6)
    with DeviceCachedFeatureSource(ArrayStore(disk), 1500, 24, np.float32, cfg, static) as dev, \
            CachedFeatureSource(ArrayStore(disk), 1500, 24, np.float32, cfg, static) as ref:
        assert dev.pool.word == torch.int64 and dev.pool.row_words == 12
        assert not dev.pool.queues.is_pinned()  # pinned only for a CUDA device
        assert dev.window.window == ref.window.window == (6 if policy == "horizon" else 4)
        drive_pair(dev, ref, batches, dev.window.window, disk)
        c = dev.counters
        assert c.local_hits > 0 and c.storage_rows > 0
        if pvp and policy in ("hybrid", "dynamic", "static"):
            assert c.victim_hits > 0 and dev.stats["spilled"] > 0
        if not pvp:
            assert c.victim_hits == 0 and dev.stats["victim_buffer_bytes"] == 0
        assert dev.stats["policy"] == ref.stats["policy"]
        # one fetch order, read-ahead included: the device plane reads the next batch's misses
        # ahead as the host plane does, and both count the same I/O
        for k in ("readahead", "readahead_rows", "readahead_unused_rows", "readahead_missed_rows"):
            assert dev.stats[k] == ref.stats[k], k
        assert dev.stats["readahead"] and dev.stats["readahead_rows"] > 0
        assert dev.io_counters().as_dict()["rows_requested"] == ref.io_counters().as_dict()["rows_requested"]


@pytest.mark.parametrize("depth", [12, 2])
def test_tiers_hold_their_rows_under_pressure(depth):
    """A host tier larger than the cache and batches larger than it: spills, victim hits, slots
    filled twice in one batch (the last fill wins), partial queues and (depth 2) full queues with
    dropped spills all happen."""
    rng = np.random.default_rng(1)
    feats = rng.normal(size=(400, 5)).astype(np.float32)
    cfg = cache_cfg(cache_rows=32, row_bytes=20, depth=depth, window=3, ways=4, force=True)
    batches = skewed_batches(rng, np.arange(400), 30, 90, 91, alpha=0.9)
    static = np.zeros(400, np.uint8)
    with DeviceCachedFeatureSource(ArrayStore(feats), 400, 5, np.float32, cfg, static) as dev, \
            CachedFeatureSource(ArrayStore(feats), 400, 5, np.float32, cfg, static) as ref:
        assert dev.pool.word == torch.int32  # 20-byte rows
        double = drive_pair(dev, ref, batches, 3, feats)
        assert double > 0 and dev.stats["spilled"] > 0 and dev.counters.victim_hits > 0
        assert dev.stats["victim_buffer_bytes"] == (3 + 1) * depth * 20
        assert (dev.stats["spill_dropped"] > 0) == (depth == 2)


@pytest.mark.parametrize("dtype,dim,word", [(np.float64, 3, torch.int64), (np.float16, 6, torch.int32),
                                            (np.uint8, 7, torch.uint8), (np.int16, 5, torch.uint8)])
def test_rows_of_every_word_size(dtype, dim, word):
    rng = np.random.default_rng(5)
    feats = rng.integers(0, 120, (600, dim)).astype(dtype)
    rb = dim * np.dtype(dtype).itemsize
    assert word_dtype(rb) == word
    cfg = cache_cfg(cache_rows=48, row_bytes=rb, depth=6, window=3)
    batches = skewed_batches(rng, np.arange(600), 12, 40, 120)
    static = rng.integers(0, 256, 600).astype(np.uint8)
    with DeviceCachedFeatureSource(ArrayStore(feats), 600, dim, dtype, cfg, static) as dev, \
            CachedFeatureSource(ArrayStore(feats), 600, dim, dtype, cfg, static) as ref:
        assert dev.pool.word == word
        drive_pair(dev, ref, batches, 3, feats)


def test_owner_sharded_source_and_errors():
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(900, 8)).astype(np.float64)
    cfg = cache_cfg(cache_rows=40, row_bytes=64, depth=8, window=3, ways=4)
    owned = np.arange(2, 900, 3)
    batches = [rng.choice(owned, size=60) for _ in range(20)]
    static = np.zeros(900, np.uint8)
    kw = dict(num_owners=3, owner=2)
    with DeviceCachedFeatureSource(ArrayStore(feats), 900, 8, np.float64, cfg, static, **kw) as dev, \
            CachedFeatureSource(ArrayStore(feats), 900, 8, np.float64, cfg, static, **kw) as ref:
        drive_pair(dev, ref, batches, 3, feats)
        assert dev.budget == ref.budget and dev.capacity_rows == ref.capacity_rows
        with pytest.raises(InputError, match="owner 2 of 3"):
            dev.fetch(np.array([2, 3]))
        with pytest.raises(InputError, match=r"\[0, 900\)"):
            dev.advance([np.array([902])])
        with pytest.raises(InputError, match="integer"):
            dev.fetch(np.array([2.0]))


def test_disabled_cache_reads_everything_from_storage():
    feats = np.arange(200 * 4, dtype=np.float32).reshape(200, 4)
    cfg = SimpleNamespace(**{**vars(cache_cfg(cache_rows=10, row_bytes=16)), "enabled": False})
    with DeviceCachedFeatureSource(ArrayStore(feats), 200, 4, np.float32, cfg, np.zeros(200, np.uint8)) as src:
        ids = np.array([5, 7, 5, 199])
        np.testing.assert_array_equal(src.fetch(ids).numpy(), feats[ids])
        assert (src.counters.storage_rows, src.counters.distinct, src.counters.local_hits) == (3, 3, 0)
        assert src.stats["h2d_bytes"] == 3 * 16 and src.stats["victim_buffer_bytes"] == 0
        assert src.fetch(np.zeros(0, np.int64)).shape == (0, 4)


def test_on_cuda_the_staging_is_two_buffers_in_turn_and_a_refill_waits_only_for_the_one_it_reuses(monkeypatch):
    # the CUDA pool's bookkeeping on the CPU: pinned buffers stand as plain ones, events as records
    feats = np.arange(300 * 4, dtype=np.float32).reshape(300, 4)
    static = np.zeros(300, np.uint8)
    with DeviceCachedFeatureSource(ArrayStore(feats), 300, 4, np.float32,
                                   cache_cfg(cache_rows=64, row_bytes=16), static) as dev:
        pool, waited = dev.pool, []

        class Event:
            def __init__(self, name):
                self.name = name

            def synchronize(self):
                waited.append(self.name)

        monkeypatch.setattr(pool, "cuda", True)
        monkeypatch.setattr(pool, "host_rows", lambda n: torch.zeros((n, pool.row_words), dtype=pool.word))
        monkeypatch.setattr(pool, "_event", lambda stream: Event(len(waited) + len(pool._read_by)))
        monkeypatch.setattr(pool, "_current", lambda: None)
        a = dev._staging(10)
        b = dev._staging(10)
        assert a.ctypes.data != b.ctypes.data and not waited
        pool._read_on(torch.from_numpy(a.view(np.uint32)), None)     # batch t's serve reads a
        pool._read_on(torch.from_numpy(b.view(np.uint32)), None)     # batch t+1's reads b
        again = dev._staging(8)                                       # batch t+2 refills a only
        assert again.ctypes.data == a.ctypes.data and waited == [0]
        assert list(pool._read_by) == [b.ctypes.data]                 # b's read is still pending
        bigger = dev._staging(4000)                                   # b grows: its read waited for first
        assert waited == [0, 1] and bigger.ctypes.data != b.ctypes.data and len(bigger) == 4000
        pool.wait_uploaded()                                          # every buffer: none left
        assert pool._read_by == {}
        monkeypatch.undo()                                            # the pool closes as on the CPU


def test_empty_and_duplicate_batches():
    feats = np.random.default_rng(2).normal(size=(300, 4)).astype(np.float32)
    cfg = cache_cfg(cache_rows=32, row_bytes=16, depth=4, window=2, ways=4)
    batches = [np.zeros(0, np.int64), np.full(50, 11), np.full(30, 11), np.zeros(0, np.int64), np.arange(40)]
    static = np.zeros(300, np.uint8)
    with DeviceCachedFeatureSource(ArrayStore(feats), 300, 4, np.float32, cfg, static) as dev, \
            CachedFeatureSource(ArrayStore(feats), 300, 4, np.float32, cfg, static) as ref:
        drive_pair(dev, ref, batches, 2, feats)
        assert dev.counters.requests == 120 and dev.counters.distinct == 42


def test_config_and_store_errors():
    feats = np.zeros((10, 4), np.float32)
    with pytest.raises(ConfigError, match="cache.engine.*'reference'"):
        DeviceCachedFeatureSource(ArrayStore(feats), 10, 4, np.float32,
                                  cache_cfg(cache_rows=4, row_bytes=16, pvp=False, engine="reference"),
                                  np.zeros(10, np.uint8))
    with pytest.raises(InputError, match="store holds"):
        DeviceCachedFeatureSource(ArrayStore(feats), 10, 8, np.float32, cache_cfg(cache_rows=4, row_bytes=32),
                                  np.zeros(10, np.uint8))


def test_gather_rows_and_pool_moves():
    src = torch.arange(40, dtype=torch.int64).reshape(10, 4)
    out = torch.empty((3, 4), dtype=torch.int64)
    gather_rows(src, torch.tensor([7, 0, 7]), out)
    assert out.tolist() == [src[7].tolist(), src[0].tolist(), src[7].tolist()]
    pool = DeviceRowPool(4, 8, window=2, depth=3, pvp=True)
    pool.cache[:] = torch.arange(4).reshape(4, 1)
    pool.spill(torch.tensor([2, 0, 3]), [(0, 2, 3), (2, 3, 0)])  # queue 1 rows 0-1, queue 0 row 0
    assert pool.queues[:, 0].tolist() == [3, 0, 0, 2, 0, 0]
    pool.land(1, 2)
    assert pool.landing[:2, 0].tolist() == [2, 0]
    with pytest.raises(InputError, match="cannot land"):
        pool.land(2, 1)
    assert pool.victim_bytes == 3 * 3 * 8


# ---- the GPU engine's decisions (CUDA sources on the host compiler), rows on the CPU ----------
_has_cxx = bool(shutil.which("g++") or shutil.which("c++"))
_EMU: dict = {}


@pytest.fixture
def emulated_gpu_engine(monkeypatch):
    if not _has_cxx:
        pytest.skip("needs g++ for the CUDA emulator (tests/cuda_emu.py)")
    from cuda_emu import fake_cupy

    if not _EMU:
        _EMU["cp"] = fake_cupy()
        _EMU["mod"] = _EMU["cp"].RawModule(code=gpu_codegen.module_source())
    monkeypatch.setattr(gpu_engine, "_cupy", lambda: _EMU["cp"])
    monkeypatch.setattr(gpu_engine, "_module", lambda: _EMU["mod"])


@pytest.mark.parametrize("how,policy,pvp", [("config", "hybrid", True), ("injected", "lru", True),
                                            ("config", "sieve", False), ("config", "horizon", False)])
def test_gpu_engine_decisions_drive_the_cpu_data_plane(emulated_gpu_engine, how, policy, pvp):
    rng = np.random.default_rng(9)
    feats = rng.normal(size=(1200, 8)).astype(np.float32)
    static = rng.integers(0, 256, 1200).astype(np.uint8)
    cfg = cache_cfg(cache_rows=96, row_bytes=32, depth=8, window=4, pvp=pvp, policy=policy, engine="gpu", lookahead=5)
    batches = skewed_batches(rng, np.arange(1200), 9, 120, 200)
    engine = None
    if how == "injected":
        from lsm_gnn.cache.budget import memory_budget

        b = memory_budget(cfg, 1200, 32)
        engine = gpu_engine.GpuCacheEngine(b.cache_rows, 1200, static, **engine_kwargs(
            ways=8, policy=policy, window=4, pvp=b.pvp, victim_depth=b.engine_depth))
    with DeviceCachedFeatureSource(ArrayStore(feats), 1200, 8, np.float32, cfg, static, engine=engine) as dev, \
            CachedFeatureSource(ArrayStore(feats), 1200, 8, np.float32, on_cpu_engine(cfg), static) as ref:
        assert isinstance(dev.engine, gpu_engine.GpuCacheEngine)
        assert dev.stats["readahead"] is False   # the GPU engine answers no storage_misses
        drive_pair(dev, ref, batches, dev.window.window, feats)
        assert dev.counters.local_hits > 0 and dev.stats["evictions"] > 0
        if pvp:
            assert dev.stats["spilled"] > 0


# ---- device="cuda" ----------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("engine", ["gpu", "cpu"])
def test_cuda_source_rows_streams_and_pinned_queues(engine):
    rng = np.random.default_rng(12)
    n, dim = 20000, 128
    feats = rng.normal(size=(n, dim)).astype(np.float32)
    static = rng.integers(0, 256, n).astype(np.uint8)
    cfg = cache_cfg(cache_rows=2048, row_bytes=dim * 4, depth=64, window=8, ways=32, engine=engine)
    batches = skewed_batches(rng, np.arange(n), 20, 2000, 4000)
    with DeviceCachedFeatureSource(ArrayStore(feats), n, dim, np.float32, cfg, static, device="cuda") as dev, \
            CachedFeatureSource(ArrayStore(feats), n, dim, np.float32, on_cpu_engine(cfg), static) as ref:
        pool = dev.pool
        assert pool.cache.is_cuda and pool.landing.is_cuda and pool.queues.is_pinned()
        least, greatest = torch.cuda.Stream.priority_range()
        # CUDA's lowest priority is the default one (0): the PVP stream is at the bottom, below
        # the storage upload stream whenever the device offers more than one level
        assert pool.land_stream.priority == least >= torch.cuda.default_stream().priority
        assert pool.h2d_stream.priority == greatest
        if least != greatest:
            assert pool.land_stream.priority > pool.h2d_stream.priority
        drive_pair(dev, ref, batches, 8, feats)
        out = dev.fetch(batches[0])
        assert out.is_cuda and out.dtype == torch.float32
        assert dev.stats["spilled"] > 0 and dev.counters.victim_hits > 0

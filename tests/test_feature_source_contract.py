"""One contract, every feature source: the same assertions against each kind (as PyG tests its
FeatureStore against a reference store), the in-memory ideal being the reference whose rows every
other source must return.

Kinds: the ideal, the plain store, the CPU cache, the cache's torch data plane on the CPU, the
isolated cache of one rank of two (all built by the one factory, or as it builds them), and the
shared cache over 2 gloo ranks (spawned; each rank runs the same checks).
"""

from __future__ import annotations

import json
import os
import traceback

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from conftest import _build_random_dataset
from lsm_gnn.config import load_config
from lsm_gnn.contract import FeatureSource, STAGES
from lsm_gnn.records import numeric_stats
from lsm_gnn.metrics import EXCHANGE_STAGES, STAGES as RECORD_STAGES
from lsm_gnn.sources.ideal import MemoryFeatureSource
from lsm_gnn.utils.errors import InputError

N, DIM, W = 1500, 8, 3
MEMORY_KEYS = {"cache_bytes", "victim_bytes", "total_bytes", "devices", "fraction_of_features",
               "all_devices_bytes", "all_devices_fraction"}
CACHE = {"cache.enabled": True, "cache.capacity_fraction": 0.2, "cache.window": W}
# kind: (config overrides, rank, world, the source's class name)
KINDS = {
    "ideal": ({"storage.reader": "memory"}, 0, 1, "MemoryFeatureSource"),
    "device-ideal": ({"storage.reader": "memory", "train.device": "cuda"}, 0, 1, "MemoryFeatureSource"),
    "store": ({"storage.reader": "buffered"}, 0, 1, "StoreFeatureSource"),
    "cache": ({**CACHE, "storage.reader": "buffered"}, 0, 1, "CachedFeatureSource"),
    "device-cache": ({**CACHE, "storage.reader": "buffered", "train.device": "cuda"}, 0, 1,
                     "DeviceCachedFeatureSource"),
    "isolated": ({**CACHE, "storage.reader": "buffered", "distributed.mode": "isolated", "distributed.devices": 2},
                 1, 2, "IsolatedFeatureSource"),
}


def config(ds, over: dict):
    return load_config(None, {"dataset.path": str(ds.root), "cache.enabled": False, "storage.drop_page_cache": False,
                              **over})


def batches_of(seed: int, n: int = 8) -> list[np.ndarray]:
    """Mini-batches with duplicates (a batch's input nodes repeat across its blocks)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, N, 60 + 7 * b) for b in range(n)]


def host(rows) -> np.ndarray:
    return rows.cpu().numpy() if isinstance(rows, torch.Tensor) else np.asarray(rows)


def check_contract(src, feats: np.ndarray, batches, *, world: int, own_requests: bool = True,
                   exchanges: bool = False) -> None:
    """The contract every source keeps (lsm_gnn.contract); `own_requests`: its tier counts are
    of the rows it was asked for (False for a shared-cache rank, whose tiers are its owner's);
    `exchanges`: it exchanges rows with other devices, and times that as stages of its own."""
    assert isinstance(src, FeatureSource)
    reference = MemoryFeatureSource(feats)
    held, requests, distinct = [], 0, 0
    for b, ids in enumerate(batches):
        src.advance(batches[b + 1: b + 1 + W])
        rows = src.fetch(ids)
        # rows in order, duplicates included, in the dataset's dtype, where `device` says
        assert tuple(rows.shape) == (len(ids), feats.shape[1])
        if isinstance(rows, torch.Tensor):
            assert rows.device == torch.device(src.device)
        else:
            assert isinstance(rows, np.ndarray) and str(src.device) == "cpu"
        np.testing.assert_array_equal(host(rows), reference.fetch(ids))
        held.append((ids, rows))
        if own_requests:   # a cache's tier of each request (a shared rank's are its owner's)
            assert src.last_tiers is None or len(src.last_tiers) == len(ids)
        requests, distinct = requests + len(ids), distinct + len(np.unique(ids))
    for ids, rows in held:   # a batch's rows never change under the caller who holds them
        np.testing.assert_array_equal(host(rows), feats[ids])

    c = src.counters.as_dict()
    assert c["requests"] == requests and c["distinct"] == distinct
    tiers = c["local_hits"] + c["peer_hits"] + c["victim_hits"] + c["storage_rows"]
    assert min(c.values()) >= 0
    if own_requests:
        assert distinct <= tiers <= requests

    assert tuple(src.fetch(np.zeros(0, np.int64)).shape) == (0, feats.shape[1])
    # bad ids: InputError (before anything is exchanged), and the source goes on working
    for bad in (np.array([len(feats)]), np.array([-1]), np.array([0.5, 1.0]), np.zeros((2, 2), np.int64)):
        with pytest.raises(InputError):
            src.fetch(bad)
    with pytest.raises(InputError):
        src.advance([np.array([0, len(feats)])])
    src.advance([])
    np.testing.assert_array_equal(host(src.fetch(batches[0])), feats[batches[0]])

    stats = src.stats()
    assert isinstance(stats, dict) and numeric_stats(stats) is not None
    stats["iterations"] = -1   # a copy: the source's own figures are untouched
    assert src.stats().get("iterations") != -1
    seconds = src.stage_seconds()
    if seconds is None:
        assert src.fetch_stage in RECORD_STAGES
    else:
        # a cache's stages, and the exchange's where rows travel between devices (the record's names)
        assert set(seconds) == set(STAGES) | (set(EXCHANGE_STAGES) if exchanges else set())
        assert all(v >= 0 for v in seconds.values())
        if exchanges:   # 8 fetches with their lookahead went through the exchange
            assert all(seconds[k] > 0 for k in EXCHANGE_STAGES)
    io = src.io_counters()
    assert io is None or io.as_dict()["bytes_read"] >= 0
    mem = src.memory()
    assert MEMORY_KEYS <= set(mem) and mem["devices"] == world
    assert mem["total_bytes"] == mem["cache_bytes"] + mem["victim_bytes"] >= 0
    assert mem["all_devices_bytes"] == world * mem["total_bytes"]
    assert isinstance(src.storage_info(), dict)
    assert isinstance(src.source_name, str) and src.source_name
    with src:
        pass
    src.close()   # closing again is harmless


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return _build_random_dataset(tmp_path_factory.mktemp("contract") / "ds", num_nodes=N, dim=DIM)


@pytest.fixture
def on_the_cpu(monkeypatch):
    """The factory's GPU cache and GPU ideal with their rows on the CPU: the same torch code, no GPU."""
    from lsm_gnn.sources import factory

    real = factory.DeviceCachedFeatureSource
    monkeypatch.setattr(factory, "DeviceCachedFeatureSource", lambda *a, **kw: real(*a, **{**kw, "device": "cpu"}))
    ideal = factory.MemoryFeatureSource
    monkeypatch.setattr(factory, "MemoryFeatureSource",
                        lambda *a, **kw: ideal(*a, **{**kw, "device": "cpu" if kw.get("device") else None}))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_source_keeps_the_contract_and_returns_the_references_rows(kind, dataset, on_the_cpu):
    from lsm_gnn.sources.factory import make_feature_source

    over, rank, world, cls = KINDS[kind]
    src = make_feature_source(config(dataset, over), dataset, rank, world)
    assert type(src).__name__ == cls
    check_contract(src, np.asarray(dataset.feature_array()), batches_of(rank), world=world)


def _shared_rank(rank, world, port, root, outdir):
    import torch.distributed as dist

    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.sources.factory import make_feature_source

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    ds = Dataset(root)
    kind = failure = None
    try:
        # the factory's own exchange: a process group of its own, the configured row transport
        src = make_feature_source(config(ds, {**CACHE, "storage.reader": "buffered", "distributed.devices": world}),
                                  ds, rank, world)
        kind = type(src).__name__
        check_contract(src, np.asarray(ds.feature_array()), batches_of(rank), world=world, own_requests=False,
                       exchanges=True)
    except BaseException:  # noqa: BLE001 - reported to the test
        failure = traceback.format_exc()
    with open(os.path.join(outdir, f"{rank}.json"), "w") as f:
        json.dump({"kind": kind, "failure": failure}, f)
    dist.destroy_process_group()


@pytest.mark.slow   # two spawned ranks: a few seconds of start-up
def test_the_shared_cache_over_two_ranks_keeps_the_contract(dataset, tmp_path):
    from lsm_gnn.multidevice.group import pick_free_port
    from lsm_gnn.multidevice.owner_files import ensure_owner_files

    ensure_owner_files(dataset, 2, progress=False)   # as the launcher does, before the ranks start
    mp.spawn(_shared_rank, args=(2, pick_free_port(), str(dataset.root), str(tmp_path)), nprocs=2)
    for rank in range(2):
        res = json.loads((tmp_path / f"{rank}.json").read_text())
        assert res["failure"] is None, res["failure"]
        assert res["kind"] == "SharedCacheFeatureSource"


def test_a_shared_fetch_checks_its_ids_once_and_bad_ids_get_the_field_expected_and_found(dataset, tmp_path,
                                                                                       monkeypatch):
    import torch.distributed as dist

    from lsm_gnn.cache import geometry
    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn import ownership
    from lsm_gnn import contract
    from lsm_gnn.sources.factory import make_feature_source
    from lsm_gnn.sources.shared import SharedCacheFeatureSource

    calls, real = [], contract.check_feature_ids

    def counted(ids, num_rows=None, what="ids"):
        calls.append(what)
        return real(ids, num_rows, what)

    for module in (contract, geometry, ownership):   # every place that imports the id check
        monkeypatch.setattr(module, "check_feature_ids", counted)
    feats = np.asarray(dataset.feature_array())
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        cache = make_feature_source(config(dataset, {**CACHE, "storage.reader": "buffered"}), dataset, 0, 1)
        assert type(cache).__name__ == "CachedFeatureSource"
        src = SharedCacheFeatureSource(cache, Exchange(0, 1), num_rows=N, row_dim=DIM, dtype=feats.dtype,
                                       max_horizon=W)
        batches = batches_of(3)
        for b, ids in enumerate(batches):
            window = batches[b + 1: b + 1 + W]
            calls.clear()
            src.advance(window)
            assert calls == ["window batch"] * len(window)   # once per announced batch, at the entry
            calls.clear()
            rows = src.fetch(ids)
            assert calls == ["ids"]   # not again in the split, the owner's cache or its shard
            np.testing.assert_array_equal(rows, feats[ids])
        assert cache.counters.storage_rows > 0 and cache.counters.local_hits > 0
        with pytest.raises(InputError, match=rf"^ids: feature ids must lie in \[0, {N}\), found range \[3, {N}\]$"):
            src.fetch(np.array([3, N]))
        with pytest.raises(InputError, match=r"^ids: expected integer node ids, found dtype float64$"):
            src.fetch(np.array([0.5, 1.0]))
        with pytest.raises(InputError, match=rf"^window batch: feature ids must lie in \[0, {N}\)"):
            src.advance([np.array([N + 2])])
        src.close()
    finally:
        dist.destroy_process_group()

"""The training loop, loader and sources: exact features through caches, identical losses,
lookahead order, records, bad configs, Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from lsm_gnn.config import load_config
from lsm_gnn.contract import TierCounters
from lsm_gnn.records import read_record, validate_record
from lsm_gnn.sampling import NeighborSampler
from lsm_gnn.train.loader import FeatureLoader
from lsm_gnn.train.loop import run_training
from lsm_gnn.sources.factory import make_feature_source
from lsm_gnn.sources.ideal import MemoryFeatureSource
from lsm_gnn.sources.store import StoreFeatureSource
from lsm_gnn.utils.errors import ConfigError, InputError
from test_sampling import hetero_dataset  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[1]


def _cfg(ds, **over):
    base = {"dataset.path": str(ds.root), "storage.reader": "memory", "cache.enabled": False,
            "sampler.batch_size": 64, "sampler.fanouts": [4, 4], "model.hidden": 16, "train.epochs": 2,
            "train.eval_nodes": 200, "train.threads": 1}
    base.update(over)
    return load_config(None, base)


class LruStandIn:
    """A tiny LRU row cache over an array, recording the calls it gets (a cached source stand-in)."""

    def __init__(self, features, capacity):
        self.features, self.capacity = np.asarray(features), capacity
        self.lines: OrderedDict = OrderedDict()
        self.counters = TierCounters()
        self.calls = []

    def advance(self, window):
        self.calls.append(("advance", [w.copy() for w in window]))

    def fetch(self, ids):
        self.calls.append(("fetch", ids.copy()))
        out = np.empty((len(ids), self.features.shape[1]), self.features.dtype)
        for i, v in enumerate(ids.tolist()):
            if v in self.lines:
                self.lines.move_to_end(v)
                self.counters.local_hits += 1
            else:
                self.counters.storage_rows += 1
                self.lines[v] = self.features[v].copy()
                if len(self.lines) > self.capacity:
                    self.lines.popitem(last=False)
            out[i] = self.lines[v]
        self.counters.requests += len(ids)
        return out

    def close(self):
        pass


def test_cached_run_has_the_memory_runs_losses(random_dataset):
    ds = random_dataset(num_nodes=600, dim=16, num_classes=4)
    mem = run_training(_cfg(ds), progress=False)
    cache = LruStandIn(ds.feature_array(), capacity=60)
    cached = run_training(_cfg(ds, **{"cache.window": 3}), feature_source=cache, progress=False)
    a = [loss for ep in mem["epochs"] for loss in ep["losses"]]
    b = [loss for ep in cached["epochs"] for loss in ep["losses"]]
    assert len(a) == len(b) > 10
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert cached["metrics"]["rows"]["storage_rows"] > 0 and cached["metrics"]["rows"]["local_hits"] > 0


def test_store_source_reads_exact_rows(random_dataset):
    ds = random_dataset(num_nodes=300, dim=8)
    cfg = _cfg(ds, **{"storage.reader": "buffered"})
    src = make_feature_source(cfg, ds)
    assert isinstance(src, StoreFeatureSource)
    ids = np.array([5, 1, 5, 299, 0], dtype=np.int64)
    np.testing.assert_array_equal(src.fetch(ids), np.asarray(ds.feature_array())[ids])
    assert src.counters.requests == 5 and src.counters.storage_rows == 4
    src.close()
    mem = make_feature_source(_cfg(ds), ds)
    assert isinstance(mem, MemoryFeatureSource)


def test_plain_store_run_matches_memory_losses(random_dataset):
    ds = random_dataset(num_nodes=400, dim=8, num_classes=3)
    over = {"train.epochs": 1, "train.eval": False}
    mem = run_training(_cfg(ds, **over), progress=False)
    direct = run_training(_cfg(ds, **over, **{"storage.reader": "buffered"}), progress=False)
    assert mem["epochs"][0]["losses"] == direct["epochs"][0]["losses"]
    assert direct["system"] == "buffered" and direct["metrics"]["traffic"]["storage_bytes"] > 0


@pytest.mark.parametrize("policy", ["hybrid", "horizon"])  # LSM-GNN's, and the long lookahead's
@pytest.mark.parametrize("reader", ["buffered", "direct"])
def test_real_cache_engine_gives_the_memory_losses(random_dataset, reader, policy):
    ds = random_dataset(num_nodes=600, dim=16, num_classes=4)
    mem = run_training(_cfg(ds), progress=False)
    over = {"cache.enabled": True, "cache.capacity_fraction": 0.1, "cache.window": 4, "storage.reader": reader,
            "storage.drop_page_cache": False, "cache.policy": policy, "cache.lookahead": 6}
    cached = run_training(_cfg(ds, **over), progress=False)
    a = [loss for ep in mem["epochs"] for loss in ep["losses"]]
    b = [loss for ep in cached["epochs"] for loss in ep["losses"]]
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    assert cached["system"] == "lsm" and cached["metrics"]["rows"]["storage_rows"] > 0
    assert cached["metrics"]["rows"]["local_hits"] > 0 and cached["metrics"]["traffic"]["storage_bytes"] > 0
    assert cached["metrics"]["source"]["storage_path"]["reader"] == reader
    if policy == "horizon":  # the loader ran K = 6 batches ahead; misses went uncached
        assert cached["metrics"]["source"]["window"] == 6
        assert cached["metrics"]["source"]["stats"]["bypassed"] > 0


@pytest.mark.parametrize("overlap", [True, False])
def test_loader_feeds_the_window_in_order(random_dataset, overlap):
    ds = random_dataset(num_nodes=500, dim=8)
    sampler = NeighborSampler(ds, [3, 3], 32, seed=0)
    src = LruStandIn(ds.feature_array(), capacity=50)
    W = 3
    loader = FeatureLoader(sampler, src, window=W, sample_ahead=2, overlap_fetch=overlap)
    got = list(loader.epoch(1))
    expected = [mb.input_nodes for mb in sampler.epoch(1)]
    assert len(got) == len(expected) == len(loader)
    feats = np.asarray(ds.feature_array())
    for t, batch in enumerate(got):
        input_nodes, seeds, blocks, features = batch                 # the DGL/GIDS shape
        np.testing.assert_array_equal(input_nodes, expected[t])
        np.testing.assert_array_equal(features.numpy(), feats[input_nodes])
        kind, window = src.calls[2 * t]
        assert kind == "advance" and len(window) == min(W, len(expected) - t - 1)
        for k, ids in enumerate(window):
            np.testing.assert_array_equal(ids, expected[t + 1 + k])
        assert src.calls[2 * t + 1][0] == "fetch"
        assert set(batch.times) >= {"sample", "fetch_cache", "wait"}


def test_record_is_valid_and_reports_cold_and_steady(random_dataset, tmp_path):
    ds = random_dataset(num_nodes=500, dim=8, num_classes=3)
    path = tmp_path / "rec.json"
    rec = run_training(_cfg(ds, **{"train.epochs": 3}), progress=False, record_path=path)
    on_disk = read_record(path)                                # validates against the schema
    assert on_disk["status"] == "complete" and on_disk["kind"] == "train" and on_disk["system"] == "memory"
    t = rec["metrics"]["time"]
    assert t["epoch_cold_s"] > 0 and t["epoch_steady_s"] > 0
    assert t["timed_window"]["full_epoch"] and t["timed_window"]["steady_epochs"] == [1, 2]
    assert set(t["per_iteration"]) >= {"sample", "fetch_cache", "fetch_victim", "fetch_storage", "train", "other"}
    assert len(rec["epochs"]) == 3 and all(ep["val_acc"] is not None for ep in rec["epochs"])
    assert rec["metrics"]["accuracy"]["test"] is not None
    assert rec["metrics"]["rows"]["requests"] == sum(len(b.input_nodes) for e in range(3)
                                                     for b in NeighborSampler(ds, [4, 4], 64, seed=0).epoch(e))
    assert 0.0 <= t["hidden_fetch_fraction"] <= 1.0


def test_timed_window_runs_warmup_plus_timed_and_extrapolates(random_dataset):
    ds = random_dataset(num_nodes=800, dim=8)
    rec = run_training(_cfg(ds, **{"train.epochs": 1, "train.warmup_iters": 2, "train.timed_iters": 3,
                                   "train.eval": False, "sampler.batch_size": 32}), progress=False)
    ep = rec["epochs"][0]
    assert ep["iterations"] == 5 and ep["extrapolated"]
    tw = rec["metrics"]["time"]["timed_window"]
    assert tw == {**tw, "full_epoch": False, "warmup_iters": 2, "timed_iters": 3, "iterations_run_per_epoch": 5}
    assert rec["metrics"]["time"]["epoch_steady_s"] == pytest.approx(ep["per_iteration"]["wall"] * tw["iterations_per_epoch"])
    validate_record(rec)


def test_same_seed_same_losses_and_other_seed_differs(random_dataset):
    ds = random_dataset(num_nodes=400, dim=8)
    over = {"train.epochs": 1, "train.eval": False}
    a = run_training(_cfg(ds, **over), progress=False)["epochs"][0]["losses"]
    b = run_training(_cfg(ds, **over, **{"train.overlap_fetch": False, "sampler.prefetch_batches": 0}),
                     progress=False)["epochs"][0]["losses"]
    c = run_training(_cfg(ds, **over, **{"train.seed": 1}), progress=False)["epochs"][0]["losses"]
    assert a == b and a != c


def test_sage_learns_the_synthetic_graph(tmp_path):
    from lsm_gnn.datasets.synthetic import generate

    ds = generate(tmp_path / "syn", 3000, feature_dim=64, progress=False)
    rec = run_training(_cfg(ds, **{"train.epochs": 5, "sampler.batch_size": 128, "sampler.fanouts": [5, 10],
                                   "model.hidden": 64, "train.lr": 0.01, "train.eval_nodes": None,
                                   "train.threads": 2}), progress=False)
    chance = 1 / ds.num_classes
    assert rec["metrics"]["accuracy"]["val"] > 5 * chance      # measured: about 0.56 (chance 0.053)
    assert rec["epochs"][-1]["loss"] < rec["epochs"][0]["losses"][0]


def test_hetero_training_runs(hetero_dataset):
    cfg = _cfg(hetero_dataset, **{"model.name": "rsage", "train.epochs": 2, "sampler.batch_size": 32})
    rec = run_training(cfg, progress=False)
    assert rec["epochs"][-1]["loss"] < rec["epochs"][0]["losses"][0]
    assert rec["metrics"]["accuracy"]["val"] is not None
    validate_record(rec)


def test_bad_configs_are_rejected_with_clear_errors(random_dataset, hetero_dataset, tmp_path):
    ds = random_dataset(num_nodes=200, dim=4)
    with pytest.raises(ConfigError, match="sampler.fanouts"):
        _cfg(ds, **{"sampler.fanouts": [0, 5]})
    with pytest.raises(ConfigError, match="train.bogus: unknown key"):
        _cfg(ds, **{"train.bogus": 1})
    with pytest.raises(ConfigError, match="model.name"):
        run_training(_cfg(hetero_dataset), progress=False)
    with pytest.raises(ConfigError, match="warmup_iters"):
        run_training(_cfg(ds, **{"train.warmup_iters": 50, "train.timed_iters": 1}), progress=False)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="train.device"):
            run_training(_cfg(ds, **{"train.device": "cuda"}), progress=False)
    with pytest.raises(InputError, match="process group"):
        run_training(_cfg(ds), world_size=2, progress=False)
    from lsm_gnn.utils.errors import DataError

    with pytest.raises(DataError, match="missing"):
        run_training(_cfg(ds, **{"dataset.path": str(tmp_path)}), progress=False)
    rec = tmp_path / "rejected.json"
    with pytest.raises(ConfigError):
        run_training(_cfg(hetero_dataset), progress=False, record_path=rec)
    assert not rec.exists()                       # a rejected config leaves no record at all


def test_failed_run_writes_a_failed_record(random_dataset, tmp_path):
    ds = random_dataset(num_nodes=200, dim=4)

    class Broken(LruStandIn):
        def fetch(self, ids):
            raise OSError("disk on fire")

    path = tmp_path / "rec.json"
    with pytest.raises(OSError, match="disk on fire"):
        run_training(_cfg(ds), feature_source=Broken(ds.feature_array(), 10), progress=False, record_path=path)
    rec = read_record(path)
    assert rec["status"] == "failed" and "disk on fire" in rec["failure"]["message"]


def test_cli_flags_override_the_file(tmp_path):
    from lsm_gnn.cli.train import build_config

    f = tmp_path / "c.yaml"
    f.write_text("train:\n  epochs: 7\ncache:\n  policy: static\n")
    cfg = build_config(str(f), ["model.hidden=12"], epochs=3, cache_fraction=0.2, reader="mmap", fanouts="5,6")
    assert (cfg.train.epochs, cfg.cache.policy, cfg.cache.capacity_fraction, cfg.storage.reader) == (3, "static", 0.2, "mmap")
    assert cfg.model.hidden == 12 and cfg.sampler.fanouts == [5, 6]
    lsm = build_config("lsm")
    assert lsm.cache.enabled and lsm.storage.reader == "direct" and lsm.cache.capacity_fraction == 0.1
    mem = build_config("memory")
    assert not mem.cache.enabled and mem.storage.reader == "memory"


_INTERRUPT_DRIVER = """
import os, sys, numpy as np
from lsm_gnn.config import load_config
from lsm_gnn.sources.ideal import MemoryFeatureSource
from lsm_gnn.datasets.format import Dataset
from lsm_gnn.train.loop import run_training

ds_path, record, marker = sys.argv[1:4]
class Marking(MemoryFeatureSource):
    def fetch(self, ids):
        if not os.path.exists(marker):
            open(marker, "w").close()
        return super().fetch(ids)
cfg = load_config(None, {"dataset.path": ds_path, "storage.reader": "memory", "cache.enabled": False,
                         "sampler.batch_size": 8, "sampler.fanouts": [4, 4], "model.hidden": 16,
                         "train.epochs": 1000, "train.threads": 1})
src = Marking(np.asarray(Dataset(ds_path).feature_array()))
try:
    run_training(cfg, feature_source=src, progress=False, record_path=record)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_ctrl_c_leaves_no_record(random_dataset, tmp_path):
    ds = random_dataset(num_nodes=400, dim=8)
    record, marker = tmp_path / "out" / "rec.json", tmp_path / "started"
    env = dict(os.environ, DGLBACKEND="pytorch")
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_INTERRUPT_DRIVER), str(ds.root), str(record),
                             str(marker)], env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, "driver exited before training started"
            assert time.monotonic() < deadline, "training never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130
    assert not record.exists()
    leftovers = list(record.parent.glob("*")) if record.parent.exists() else []
    assert leftovers == []


def test_window_counts_do_not_depend_on_how_far_fetching_runs_ahead(random_dataset):
    ds = random_dataset(num_nodes=800, dim=8)
    over = {"train.epochs": 1, "train.warmup_iters": 2, "train.timed_iters": 4, "train.eval": False,
            "sampler.batch_size": 32, "cache.window": 2}
    recs = [run_training(_cfg(ds, **over, **{"train.overlap_fetch": ov}),
                         feature_source=LruStandIn(ds.feature_array(), 100), progress=False) for ov in (True, False)]
    rows = [r["metrics"]["rows"] for r in recs]
    assert rows[0] == rows[1]
    expected = sum(len(b.input_nodes) for i, b in zip(range(6), NeighborSampler(ds, [4, 4], 32, seed=0).epoch(0))
                   if i >= 2)
    assert rows[0]["requests"] == expected


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_memory_source_rows_equal_numpy_indexing(dtype):
    feats = np.random.default_rng(5).normal(size=(300, 24)).astype(dtype)
    src = MemoryFeatureSource(feats)
    ids = np.array([299, 0, 7, 7, 150])
    np.testing.assert_array_equal(src.fetch(ids), feats[ids])
    assert src.fetch(np.zeros(0, np.int64)).shape == (0, 24)
    with pytest.raises(IndexError, match=r"\[0, 300\)"):
        src.fetch(np.array([1, 300]))
    assert src.counters.requests == 5 and src.counters.distinct == 4


def test_output_rows_are_reused_only_when_nothing_refers_to_them():
    from lsm_gnn.cache.rowpool import OutputRows

    bufs = OutputRows(4, np.float32, keep=2)
    a = bufs.get(10)
    a[:] = 1.0
    a_at = a.ctypes.data
    b = bufs.get(10)                       # `a` is alive: a different buffer
    assert not np.shares_memory(a, b)
    t = torch.from_numpy(a[2:5])           # a tensor over a view keeps `a`'s buffer in use
    del a
    c = bufs.get(10)
    assert not np.shares_memory(c, t.numpy()) and (t == 1.0).all()
    del t
    d = bufs.get(12)                       # `a`'s buffer is free again, and large enough
    assert d.shape == (12, 4) and d.flags.c_contiguous
    assert d.ctypes.data == a_at           # handed out again, not a fresh allocation
    del b, c, d
    big = bufs.get(10_000)                 # larger than every buffer: a new one
    assert big.shape == (10_000, 4)


def test_a_source_that_is_not_held_reuses_its_output_arrays():
    from lsm_gnn.cache.rowpool import OutputRows

    bufs = OutputRows(4, np.float32, keep=4)
    first = bufs.get(100)
    at = first.ctypes.data
    del first
    for n in (100, 90, 110, 100):          # a batch dropped before the next: one buffer serves all
        rows = bufs.get(n)
        assert rows.ctypes.data == at
        del rows
    assert len(bufs._bufs) == 1


def test_sources_never_change_rows_a_caller_still_holds(random_dataset):
    ds = random_dataset(num_nodes=900, dim=16, seed=4)
    feats = np.array(ds.feature_array())
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 900, 200) for _ in range(12)]
    for src in (MemoryFeatureSource(feats), make_feature_source(_cfg(ds, **{
            "storage.reader": "buffered", "cache.enabled": True, "cache.capacity_fraction": 0.1}), ds)):
        held = []
        for t, b in enumerate(batches):
            src.advance(batches[t + 1: t + 3])
            held.append((b, src.fetch(b)))
        for b, rows in held:               # every batch's rows are still the file's rows
            np.testing.assert_array_equal(rows, feats[b])
        src.close()


def _device_cache_on_the_cpu(monkeypatch):
    """DeviceCachedFeatureSource as make_feature_source builds it for train.device=cuda, with its
    rows on the CPU (the same code; no GPU here)."""
    from lsm_gnn.sources import factory

    real, made = factory.DeviceCachedFeatureSource, []

    def on_cpu(*args, **kw):
        assert kw["device"] == "cuda"
        made.append(real(*args, **{**kw, "device": "cpu"}))
        return made[-1]

    monkeypatch.setattr(factory, "DeviceCachedFeatureSource", on_cpu)
    return made


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_the_ideal_on_a_device_holds_every_row_there_and_trains_like_the_host_ideal(random_dataset, monkeypatch,
                                                                                   device):
    """train.device=cuda without the cache: the factory's ideal keeps every row on the device and
    returns tensors there, so the loader uploads nothing (h2d 0); its losses are the host ideal's.
    On the CPU the same torch code runs with device="cpu"."""
    from lsm_gnn.sources import factory

    real, made = factory.MemoryFeatureSource, []

    def placed(*args, **kw):   # the ideal a train.device=cuda run asks for, on `device`
        if kw.get("device") != "cuda":
            return real(*args, **kw)
        made.append(real(*args, **{**kw, "device": device}))
        return made[-1]

    monkeypatch.setattr(factory, "MemoryFeatureSource", placed)
    ds = random_dataset(num_nodes=600, dim=16, num_classes=4)
    feats = np.asarray(ds.feature_array())
    src = make_feature_source(_cfg(ds, **{"train.device": "cuda"}), ds)
    assert len(made) == 1 and src is made[0] and src.rows.device.type == device
    ids = np.array([5, 1, 5, 599, 0], dtype=np.int64)
    rows = src.fetch(ids)
    assert isinstance(rows, torch.Tensor) and rows.device.type == device
    np.testing.assert_array_equal(rows.cpu().numpy(), feats[ids])
    assert src.counters.requests == 5 and src.counters.distinct == 4
    # both runs train on `device` (dropout draws from that device's generator): the host ideal's rows
    # are uploaded by the loader, the device ideal's are already there
    host = run_training(_cfg(ds, **{"train.device": device}), feature_source=real(feats), progress=False)
    on_device = run_training(_cfg(ds, **{"train.device": device}),
                             feature_source=make_feature_source(_cfg(ds, **{"train.device": "cuda"}), ds), progress=False)
    a = [loss for ep in host["epochs"] for loss in ep["losses"]]
    b = [loss for ep in on_device["epochs"] for loss in ep["losses"]]
    # the same rows, batches and model; a GPU's atomic sums may differ in the last digits
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6 if device == "cpu" else 1e-4)
    assert len(made) == 2 and on_device["metrics"]["traffic"]["host_to_device_bytes"] == 0
    if device == "cuda":
        assert host["metrics"]["traffic"]["host_to_device_bytes"] > 0


def test_cuda_with_the_cache_gets_the_device_cache_and_its_tensors_train(random_dataset, monkeypatch):
    """train.device=cuda and the cache on: the factory gives the GPU cache (DeviceCachedFeatureSource); its
    fetch returns tensors, which the loader hands to the model as they are (no host copy); the
    contract reports its memory, I/O and stats; training on it gives the memory run's losses."""
    from lsm_gnn.cache.budget import system_memory
    from lsm_gnn.sources.cached_device import DeviceCachedFeatureSource

    made = _device_cache_on_the_cpu(monkeypatch)
    ds = random_dataset(num_nodes=600, dim=16, num_classes=4)
    over = {"cache.enabled": True, "cache.capacity_fraction": 0.1, "cache.window": 4, "storage.reader": "buffered",
            "storage.drop_page_cache": False}
    src = make_feature_source(_cfg(ds, **over, **{"train.device": "cuda"}), ds)
    assert isinstance(src, DeviceCachedFeatureSource) and len(made) == 1
    ids = np.array([5, 1, 5, 599, 0], dtype=np.int64)
    rows = src.fetch(ids)
    assert isinstance(rows, torch.Tensor) and torch.equal(rows, torch.from_numpy(np.asarray(ds.feature_array())[ids]))
    lay = ds.features()
    assert src.memory() == system_memory(_cfg(ds, **over).cache, "lsm", lay.num_rows, lay.row_bytes)
    assert src.io_counters().bytes_read > 0 and src.stats()["iterations"] == 1
    assert set(src.stage_seconds()) == {"cache", "victim", "storage"}
    src.close()

    mem = run_training(_cfg(ds), progress=False)
    src = make_feature_source(_cfg(ds, **over, **{"train.device": "cuda"}), ds)
    cached = run_training(_cfg(ds, **over), feature_source=src, progress=False)
    src.close()
    a = [loss for ep in mem["epochs"] for loss in ep["losses"]]
    b = [loss for ep in cached["epochs"] for loss in ep["losses"]]
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    m = cached["metrics"]
    assert m["source"]["kind"] == "DeviceCachedFeatureSource" and m["rows"]["storage_rows"] > 0
    assert m["traffic"]["host_to_device_bytes"] == m["source"]["stats"]["h2d_bytes"] > 0  # the cache's uploads
    assert m["memory"]["total_bytes"] == src.memory()["total_bytes"]


def test_loader_passes_source_tensors_through(random_dataset):
    ds = random_dataset(num_nodes=300, dim=8)
    feats = np.asarray(ds.feature_array())

    class TensorSource(MemoryFeatureSource):
        def _fetch(self, ids):
            return torch.from_numpy(np.array(super()._fetch(ids)))

    loader = FeatureLoader(NeighborSampler(ds, [3, 3], 32, seed=0), TensorSource(feats), window=2)
    for batch in loader.epoch(0):
        assert batch.h2d_bytes == 0
        np.testing.assert_array_equal(batch.features.numpy(), feats[batch.input_nodes])



def test_an_emulated_accelerator_waits_the_profiles_step_and_leaves_the_data_plane_as_it_was(random_dataset):
    from lsm_gnn.accelerator import load_accelerator

    ds = random_dataset(num_nodes=600, dim=16, num_classes=4)
    over = {"cache.enabled": True, "cache.capacity_fraction": 0.1, "cache.window": 4, "storage.reader": "buffered",
            "storage.drop_page_cache": False, "train.warmup_iters": 1}
    real = run_training(_cfg(ds, **over), progress=False)
    emu = run_training(_cfg(ds, **over, **{"train.accelerator": "emulated", "train.accelerator_profile": "h200"}),
                       progress=False)
    validate_record(emu)
    # the same batches through the same cache: every row count is the real run's
    assert emu["metrics"]["rows"] == real["metrics"]["rows"]
    assert [ep["rows"] for ep in emu["epochs"]] == [ep["rows"] for ep in real["epochs"]]
    acc = emu["metrics"]["accelerator"]
    step = load_accelerator("h200").step
    assert acc["mode"] == "emulated" and acc["profile"] == "h200" and acc["step"] == step.model_dump()
    # busy = the step model over the timed windows' batches (steady epoch: epoch 1 after its warm-up)
    b = emu["epochs"][1]["batches"]
    assert acc["busy_s"] == pytest.approx(step.fixed_s * b["iterations"] + step.row_s * b["input_rows"]
                                          + step.edge_s * b["edges"])
    assert b["input_rows"] == emu["epochs"][1]["rows"]["requests"] and b["edges"] > b["seeds"] > 0
    # AU = busy / wall, at most 1 (lsm_gnn.accelerator.utilisation): on a loaded machine a warm-up
    # step's overshoot is paid back inside the timed window, so busy can exceed its wall (CI, 2026-12-05)
    assert acc["au"] == pytest.approx(min(1.0, acc["busy_s"] / acc["wall_s"])) and 0 < acc["au"] <= 1
    assert emu["metrics"]["throughput"]["samples_per_s"] == pytest.approx(b["seeds"] / b["wall_s"])
    # nothing trained: no losses, no accuracy presented as if it had
    assert all(ep["losses"] == [] and ep["loss"] is None and ep["train_acc"] is None for ep in emu["epochs"])
    assert emu["metrics"]["accuracy"]["trained"] is False and emu["metrics"]["accuracy"]["val"] is None
    assert real["metrics"]["accelerator"]["mode"] == "real" and real["metrics"]["accelerator"]["au"] is None
    assert real["metrics"]["accuracy"]["trained"] is True and real["metrics"]["accuracy"]["val"] is not None


def test_an_unknown_accelerator_profile_is_a_config_error_naming_the_key(random_dataset):
    ds = random_dataset(num_nodes=300, dim=8, num_classes=4)
    with pytest.raises(ConfigError, match="train.accelerator_profile: .*expected one of a100, h200"):
        _cfg(ds, **{"train.accelerator": "emulated", "train.accelerator_profile": "v100"})

"""The device data plane's serve step (lsm_gnn.cache.serve, cuda/cache_serve.cu, DeviceRowPool's
serve / spill_records / fill), its sync-free plan, the fetch's own stream and event handoff, and the
mapped-memory helper.

* the plan (`plan_batch`, `storage_ids`) against a NumPy statement of the semantics on random
  decisions (hits, victim hits, storage rows, repeated ids, a slot filled twice, bypassed misses,
  empty batches), built with no `nonzero`, no boolean indexing, no host read;
* the kernels on the host compiler (tests/cuda_emu.py) give byte-identical batch tensors, cache
  lines and victim queues to the torch engine on those plans, for every unit (16, 8, 4, 1 bytes);
* the whole data plane with the kernel engine equals the host source (rows, tiers, queues);
* a fetch with the (emulated) GPU engine makes one device -> host copy and no `nonzero`;
* the stream handoff, structurally, with a stand-in for torch.cuda; on a GPU (marked gpu) for real.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lsm_gnn.cache import gpu_codegen, gpu_engine
from lsm_gnn.cache.device_pool import DeviceRowPool
from lsm_gnn.cache.engine import HIT, STORAGE, VICTIM_HIT
from lsm_gnn.cache.serve import (ALL, LANDING, LINE, STAGED, KernelRows, TorchRows, bits, decode, plan_batch,
                                 remap_staged, storage_ids)
from lsm_gnn.sources.cached import CachedFeatureSource
from lsm_gnn.sources.cached_device import DeviceCachedFeatureSource, StreamHandoff, hand_over
from lsm_gnn.utils import cuda_sources
from lsm_gnn.utils.errors import InputError
from lsm_gnn.utils.mapped import HOST_REGISTER_MAPPED, HOST_REGISTER_PORTABLE, MappedHost, map_tensor
from array_store import ArrayStore
from test_cache_device_source import cache_cfg, drive_pair, skewed_batches

_has_cxx = bool(shutil.which("g++") or shutil.which("c++"))
_EMU: dict = {}


def serve_program() -> str:
    """The serve kernels as the cache module has them: its constants, then cuda/cache_serve.cu (the
    emulator compiles this small program rather than the whole cache module)."""
    return gpu_codegen.constant_defines() + "\n" + cuda_sources.read("cache_serve.cu")


@pytest.fixture
def kernel_rows():
    if not _has_cxx:
        pytest.skip("needs g++ for the CUDA emulator (tests/cuda_emu.py)")
    from cuda_emu import fake_cupy

    if not _EMU:
        _EMU["cp"] = fake_cupy()
        _EMU["mod"] = _EMU["cp"].RawModule(code=serve_program())
    return lambda: KernelRows(_EMU["mod"], lambda t: t.data_ptr())


# ---- random decisions and what they mean -------------------------------------------------------
def random_decisions(rng, n_distinct: int, lines: int, depth: int, repeats: int = 3):
    """An engine step's decisions that obey the engine's invariants: distinct ids in order of first
    occurrence, a hit's slot holds its id, a victim hit's landing row, misses filling slots in order
    (several misses may fill one slot: the slot keeps the last), misses the policy did not admit
    (slot -1); keys: the lines' ids after the batch."""
    ids = rng.choice(10 * (n_distinct + lines) + 1, n_distinct, replace=False).astype(np.int64)
    status = rng.choice([HIT, VICTIM_HIT, STORAGE], n_distinct, p=[0.45, 0.2, 0.35]).astype(np.int8)
    if depth == 0:
        status[status == VICTIM_HIT] = STORAGE
    slot = np.full(n_distinct, -1, np.int64)
    src = np.full(n_distinct, -1, np.int64)
    keys = -np.ones(lines, np.int64) - rng.integers(1, 5, lines)   # ids nobody asks for
    hits = np.flatnonzero(status == HIT)
    hit_slots = rng.choice(lines, min(len(hits), lines), replace=False)
    status[hits[len(hit_slots):]] = STORAGE
    for d, s in zip(hits, hit_slots):
        slot[d] = s
        keys[s] = ids[d]
    misses = np.flatnonzero(status != HIT)
    for d in misses:   # in order: the last miss of a slot keeps it
        if status[d] == VICTIM_HIT:
            src[d] = rng.integers(depth)
        if rng.random() < 0.15:
            continue   # not admitted: served, nothing cached
        s = int(rng.integers(lines)) if rng.random() < 0.7 else int(rng.choice(hit_slots)) if len(hit_slots) \
            else int(rng.integers(lines))
        slot[d] = s
        keys[s] = ids[d]
    requests = []   # each id first where it is first, repeats of earlier ids in between
    for d in range(n_distinct):
        requests.append(d)
        requests += rng.integers(0, d + 1, int(rng.integers(0, repeats))).tolist()
    inverse = np.array(requests, np.int64)
    return SimpleNamespace(distinct=ids, inverse=inverse.astype(np.int64), status=status, slot=slot, src=src,
                           keys=keys)


def expected(dec, lines_before, landing, staged):
    """Rows out and lines after, by the semantics (docs/cache-semantics.md §3 step 5)."""
    kpos = np.cumsum(dec.status == STORAGE) - 1
    row_of = []
    for d in range(len(dec.distinct)):
        st = dec.status[d]
        row_of.append(lines_before[dec.slot[d]] if st == HIT else landing[dec.src[d]] if st == VICTIM_HIT
                      else staged[kpos[d]])
    out = np.stack([row_of[d] for d in dec.inverse]) if len(dec.inverse) else np.zeros((0,) + lines_before.shape[1:],
                                                                                            lines_before.dtype)
    after = lines_before.copy()
    for d in range(len(dec.distinct)):
        s = dec.slot[d]
        if dec.status[d] != HIT and s >= 0 and dec.keys[s] == dec.distinct[d]:
            after[s] = row_of[d]
    return out, after, dec.distinct[dec.status == STORAGE]


def tensors(dec):
    return [torch.from_numpy(np.asarray(a)) for a in (dec.distinct, dec.inverse, dec.status, dec.slot, dec.src)]


@contextmanager
def no_sync_in_torch(monkeypatch):
    """Fail on anything in torch whose output size depends on the data (a host sync on a device):
    nonzero, masked_select, a boolean index, a 1-argument where, item / tolist."""
    with monkeypatch.context() as m:
        def refuse(what):
            def f(*a, **k):
                raise AssertionError(f"{what}: a host sync on a device")
            return f

        for name in ("nonzero", "masked_select", "argwhere", "unique"):
            m.setattr(torch, name, refuse(f"torch.{name}"))
            if hasattr(torch.Tensor, name):
                m.setattr(torch.Tensor, name, refuse(f"Tensor.{name}"))
        for name in ("item", "tolist"):
            m.setattr(torch.Tensor, name, refuse(f"Tensor.{name}"))
        getitem, where = torch.Tensor.__getitem__, torch.where

        def checked_getitem(self, idx):
            parts = idx if isinstance(idx, tuple) else (idx,)
            if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
                raise AssertionError("boolean indexing: a host sync on a device")
            return getitem(self, idx)

        def checked_where(cond, *rest):
            if not rest:
                raise AssertionError("torch.where(cond): a host sync on a device")
            return where(cond, *rest)

        m.setattr(torch.Tensor, "__getitem__", checked_getitem)
        m.setattr(torch, "where", checked_where)
        yield


# ---- the plan ----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(6))
def test_the_plan_states_the_semantics_with_no_data_dependent_size(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    lines, depth, dim = 16, 5, 3
    dec = random_decisions(rng, int(rng.integers(0, 24)), lines, depth)
    before = rng.integers(0, 1 << 40, (lines, dim))
    landing, staged = rng.integers(0, 1 << 40, (depth, dim)), rng.integers(0, 1 << 40, (40, dim))
    want_out, want_lines, want_ids = expected(dec, before, landing, staged)
    d, inv, st, sl, sr = tensors(dec)
    with no_sync_in_torch(monkeypatch):
        plan = plan_batch(d, inv, st, sl, sr, torch.from_numpy(dec.keys))
        sid = storage_ids(d, plan["storage_pos"], int((dec.status == STORAGE).sum()))
    np.testing.assert_array_equal(sid.numpy(), want_ids)
    assert {k: tuple(v.shape) for k, v in plan.items()} == {
        "src": (len(dec.inverse),), "fill_slot": (len(dec.distinct),), "fill_req": (len(dec.distinct),),
        "storage_pos": (len(dec.distinct),)}
    kind, index = (t.numpy() for t in decode(plan["src"]))
    src_rows = {LINE: before, LANDING: landing, STAGED: staged}
    got = np.stack([src_rows[k][i] for k, i in zip(kind, index)]) if len(kind) else want_out
    np.testing.assert_array_equal(got, want_out)
    after = before.copy()
    fs, fr = plan["fill_slot"].numpy(), plan["fill_req"].numpy()
    assert len(set(fs[fs >= 0])) == (fs >= 0).sum()   # every slot written at most once
    after[fs[fs >= 0]] = want_out[fr[fs >= 0]]
    np.testing.assert_array_equal(after, want_lines)


def test_the_kernels_and_the_plan_share_the_descriptor_layout():
    import re

    from lsm_gnn.cache import serve

    text = cuda_sources.read("cache_serve.cu")
    assert int(re.search(r"#define SERVE_KIND_SHIFT (\d+)", text).group(1)) == serve.KIND_SHIFT
    assert (LINE, LANDING, STAGED) == (HIT, VICTIM_HIT, STORAGE) and ALL == 7
    assert set(serve.KERNELS) <= gpu_codegen.defined_kernels()
    assert set(serve.KERNELS) <= set(gpu_engine.LAUNCH_THREADS)


def test_a_read_ahead_row_map_moves_only_the_staged_descriptors():
    src = torch.tensor([(LINE << 56) | 3, (STAGED << 56) | 0, (LANDING << 56) | 1, (STAGED << 56) | 2])
    moved = remap_staged(src, torch.tensor([7, 8, 9]))
    assert [tuple(map(int, x)) for x in zip(*decode(moved))] == [(LINE, 3), (STAGED, 7), (LANDING, 1), (STAGED, 9)]
    assert remap_staged(src, torch.zeros(0, dtype=torch.int64)) is src


# ---- the two engines: byte-identical moves -----------------------------------------------------
def run_batch(pool, plan, staged, spill_slot, spill_dst):
    """One batch on a pool in the data plane's order; returns the batch tensor."""
    n = len(plan["src"])
    out = torch.zeros((n, pool.row_words), dtype=pool.word)
    pool.serve(plan["src"], out, bits(LINE))
    pool.spill_records(spill_slot, spill_dst, spill_dst.numpy())
    pool.serve(plan["src"], out, bits(LANDING))
    pool.serve(plan["src"], out, bits(STAGED), staged=pool.arrived(staged))
    pool.fill(plan["fill_slot"], plan["fill_req"], out)
    return out


@pytest.mark.parametrize("row_bytes", [4096, 48, 20, 7])
@pytest.mark.parametrize("seed", range(4))
def test_the_serve_kernels_and_the_torch_engine_move_the_same_bytes(kernel_rows, row_bytes, seed):
    rng = np.random.default_rng(100 + seed)
    lines, window, depth = 24, 3, 6
    sizes = [0, 1, 9, 40] if seed == 0 else [int(rng.integers(1, 40))]
    for nd in sizes:
        dec = random_decisions(rng, nd, lines, depth)
        pools = [DeviceRowPool(lines, row_bytes, window=window, depth=depth, pvp=True, rows_engine=e)
                 for e in (TorchRows(), kernel_rows())]
        words = pools[0].row_words
        init = {name: torch.from_numpy(rng.integers(-2**62, 2**62, (len(getattr(pools[0], name)), words))
                                       .astype(np.int64)).to(pools[0].word)
                for name in ("cache", "landing", "queues")}
        for p in pools:
            for name, t in init.items():
                getattr(p, name).copy_(t)
        nst = int((dec.status == STORAGE).sum())
        staged = torch.from_numpy(rng.integers(-2**62, 2**62, (nst, words)).astype(np.int64)).to(pools[0].word)
        nsp = int(rng.integers(0, min(lines, window * depth) + 1)) if nd else 0
        spill_slot = torch.from_numpy(rng.choice(lines, nsp, replace=False).astype(np.int64))
        spill_dst = torch.from_numpy(rng.choice(window * depth, nsp, replace=False).astype(np.int64))
        plan = plan_batch(*tensors(dec), torch.from_numpy(dec.keys))
        outs = [run_batch(p, plan, staged, spill_slot, spill_dst) for p in pools]
        want_out, want_lines, _ = expected(dec, init["cache"].numpy(), init["landing"].numpy(), staged.numpy())
        want_queues = init["queues"].numpy().copy()
        want_queues[spill_dst.numpy()] = init["cache"].numpy()[spill_slot.numpy()]
        for p, out in zip(pools, outs):
            tag = f"{p.rows.name}, {nd} distinct, {row_bytes}-byte rows"
            np.testing.assert_array_equal(out.numpy(), want_out, err_msg=tag)
            np.testing.assert_array_equal(p.cache.numpy(), want_lines, err_msg=tag)
            np.testing.assert_array_equal(p.queues.numpy(), want_queues, err_msg=tag)
            np.testing.assert_array_equal(p.landing.numpy(), init["landing"].numpy(), err_msg=tag)
        assert torch.equal(outs[0], outs[1]) and torch.equal(pools[0].cache, pools[1].cache)
        assert pools[1].rows.launches == (0 if not nd else 4 + (nsp > 0))


def test_one_serve_launch_serves_every_kind(kernel_rows):
    rng = np.random.default_rng(7)
    dec = random_decisions(rng, 30, 16, 4)
    pool = DeviceRowPool(16, 32, window=2, depth=4, pvp=True, rows_engine=kernel_rows())
    pool.cache.copy_(torch.from_numpy(rng.integers(0, 1 << 60, (16, 4))))
    pool.landing.copy_(torch.from_numpy(rng.integers(0, 1 << 60, (4, 4))))
    staged = torch.from_numpy(rng.integers(0, 1 << 60, (int((dec.status == STORAGE).sum()), 4)))
    plan = plan_batch(*tensors(dec), torch.from_numpy(dec.keys))
    out = torch.zeros((len(dec.inverse), 4), dtype=torch.int64)
    pool.serve(plan["src"], out, ALL, staged=staged)
    want, _, _ = expected(dec, pool.cache.numpy(), pool.landing.numpy(), staged.numpy())
    np.testing.assert_array_equal(out.numpy(), want)
    assert pool.rows.launches == 1


@pytest.mark.parametrize("pvp", [True, False], ids=["pvp", "plain"])
@pytest.mark.parametrize("depth", [12, 2])
def test_the_data_plane_with_the_serve_kernels_equals_the_host_source(kernel_rows, pvp, depth):
    """The kernel engine (on the host compiler) drives the whole device data plane: rows, tiers,
    queues and landing buffer after every batch, under pressure (spills, victim hits, slots filled
    twice, dropped spills at depth 2), read-ahead row maps included."""
    rng = np.random.default_rng(3)
    feats = rng.normal(size=(400, 6)).astype(np.float32)
    cfg = cache_cfg(cache_rows=32, row_bytes=24, depth=depth, window=3, ways=4, pvp=pvp, force=True)
    batches = skewed_batches(rng, np.arange(400), 20, 90, 91, alpha=0.9)
    static = np.zeros(400, np.uint8)
    with DeviceCachedFeatureSource(ArrayStore(feats), 400, 6, np.float32, cfg, static,
                                   rows_engine=kernel_rows()) as dev, \
            CachedFeatureSource(ArrayStore(feats), 400, 6, np.float32, cfg, static) as ref:
        assert dev.pool.zero_copy and dev.pool.rows.name == "kernel"
        drive_pair(dev, ref, batches, 3, feats)
        assert dev.stats["readahead_rows"] > 0
        if pvp:
            assert dev.stats["spilled"] > 0 and dev.counters.victim_hits > 0


def test_the_pool_picks_its_engine_by_device_and_the_environment(monkeypatch):
    from lsm_gnn.cache import device_pool

    assert DeviceRowPool(4, 16).rows.name == "torch"   # the CPU: torch (the kernels need CUDA)
    monkeypatch.setenv(device_pool.ROWS_ENGINE_ENV, "kernel")
    assert DeviceRowPool(4, 16).rows.name == "torch"
    monkeypatch.setenv(device_pool.ROWS_ENGINE_ENV, "warp")
    with pytest.raises(InputError, match="LSM_GNN_ROWS_ENGINE.*'kernel' or 'torch'.*'warp'"):
        DeviceRowPool(4, 16)


def test_an_in_memory_store_is_read_in_place_by_the_kernels(kernel_rows):
    """A MemoryStore under the kernel engine: the misses come from its array where they lie (no
    reader thread, no staging), and everything else is as the host source over the same store."""
    from lsm_gnn.storage.memory import MemoryStore

    rng = np.random.default_rng(8)
    feats = rng.normal(size=(400, 6)).astype(np.float32)
    cfg = cache_cfg(cache_rows=32, row_bytes=24, depth=6, window=3, ways=4, force=True, readahead=False)
    batches = skewed_batches(rng, np.arange(400), 15, 60, 90, alpha=0.9)
    static = np.zeros(400, np.uint8)
    with DeviceCachedFeatureSource(MemoryStore(feats), 400, 6, np.float32, cfg, static,
                                   rows_engine=kernel_rows()) as dev, \
            CachedFeatureSource(MemoryStore(feats), 400, 6, np.float32, cfg, static) as ref:
        assert dev.stats["in_place"] and dev._in_place.data_ptr() == dev.store.features.ctypes.data
        drive_pair(dev, ref, batches, 3, feats)
        assert dev._reader is None and dev._staged is None   # nothing read, nothing staged
        mine, theirs = dev.io_counters().as_dict(), ref.io_counters().as_dict()
        for k in ("rows_requested", "distinct_rows", "useful_bytes", "batches", "io_ops", "bytes_read"):
            assert mine[k] == theirs[k], k
        assert dev.counters.storage_rows > 0 and dev.stats["spilled"] > 0
    # the torch engine reads through the staging buffer; so does a store whose reads are verified
    with DeviceCachedFeatureSource(MemoryStore(feats), 400, 6, np.float32, cfg, static) as dev:
        assert not dev.stats["in_place"] and dev._in_place is None
    store = MemoryStore(feats).verify_with(np.zeros(400, np.uint64))
    with DeviceCachedFeatureSource(store, 400, 6, np.float32, cfg, static, rows_engine=kernel_rows()) as dev:
        assert not dev.stats["in_place"]


# ---- host syncs of a fetch ---------------------------------------------------------------------
def test_a_fetch_with_the_gpu_engine_copies_to_the_host_once_and_never_compacts(monkeypatch):
    """The GPU engine's decisions (its CUDA sources on the host compiler) drive the plane: a fetch
    reads the step's counts (the engine's one wait), then makes one device -> host copy (the storage
    ids and spill destinations) and no nonzero / boolean index / item anywhere in the plan."""
    if not _has_cxx:
        pytest.skip("needs g++ for the CUDA emulator (tests/cuda_emu.py)")
    from cuda_emu import fake_cupy

    import test_cache_device_source as tds

    full = tds._EMU   # the whole cache module on the host compiler, compiled once per session
    if not full:
        full["cp"] = fake_cupy()
        full["mod"] = full["cp"].RawModule(code=gpu_codegen.module_source())
    monkeypatch.setattr(gpu_engine, "_cupy", lambda: full["cp"])
    monkeypatch.setattr(gpu_engine, "_module", lambda: full["mod"])
    rng = np.random.default_rng(4)
    feats = rng.normal(size=(600, 8)).astype(np.float32)
    static = rng.integers(0, 256, 600).astype(np.uint8)
    cfg = cache_cfg(cache_rows=64, row_bytes=32, depth=8, window=3, engine="gpu")
    batches = skewed_batches(rng, np.arange(600), 8, 100, 160)
    copies = []
    cpu = torch.Tensor.cpu
    with DeviceCachedFeatureSource(ArrayStore(feats), 600, 8, np.float32, cfg, static) as dev:
        eng = dev.engine
        for t, b in enumerate(batches):
            dev.advance(batches[t + 1: t + 4])
            waits = eng.host_waits
            with no_sync_in_torch(monkeypatch), monkeypatch.context() as m:
                m.setattr(torch.Tensor, "cpu", lambda self, *a, **k: copies.append(t) or cpu(self, *a, **k))
                out = dev.fetch(b)
            np.testing.assert_array_equal(out.numpy(), feats[b])
            assert eng.host_waits - waits == 1, t   # the step's counts, read once
        assert copies == list(range(len(batches)))   # one copy a batch
        assert dev.stats["spilled"] > 0 and dev.counters.victim_hits > 0


# ---- the fetch's own stream and the event handoff ----------------------------------------------
def fake_cuda():
    """A stand-in for the slice of torch.cuda StreamHandoff uses; `log` records every call."""
    log = []

    class Stream:
        def __init__(self, device=None, name="fetch"):
            self.name = name

        def wait_event(self, ev):
            log.append(("wait", self.name, ev.id))

    class Event:
        made = 0

        def __init__(self):
            Event.made += 1
            self.id = Event.made

        def record(self, stream):
            log.append(("record", stream.name, self.id))

    consumer = Stream(name="consumer")

    @contextmanager
    def stream(s):
        log.append(("enter", s.name))
        yield
        log.append(("exit", s.name))

    return SimpleNamespace(Stream=Stream, Event=Event, stream=stream, current_stream=lambda device=None: consumer,
                           record_stream=lambda t, s: log.append(("record_stream", s.name))), log


def test_the_handoff_waits_on_the_consumers_stream_for_the_fetchs_event():
    cuda, log = fake_cuda()
    h = StreamHandoff("cuda:0", cuda)
    rows = SimpleNamespace(device="cuda:0")
    with h.run():
        log.append(("work",))
    assert h.ready(rows) is rows and rows.ready_event is None
    assert log == [("enter", "fetch"), ("work",), ("exit", "fetch"), ("record", "fetch", 1),
                   ("wait", "consumer", 1), ("record_stream", "consumer")]
    log.clear()
    h.deferred = True
    h.ready(rows)
    assert log == [("record", "fetch", 2)] and rows.ready_event.id == 2
    hand_over(rows, cuda=cuda)
    hand_over(rows, cuda=cuda)   # handed over already: nothing more
    assert log[1:] == [("wait", "consumer", 2), ("record_stream", "consumer")]


def test_a_device_source_fetches_on_its_own_stream_and_hands_over_each_batch():
    rng = np.random.default_rng(2)
    feats = rng.normal(size=(300, 4)).astype(np.float32)
    cfg = cache_cfg(cache_rows=32, row_bytes=16, depth=4, window=2, ways=4)
    batches = skewed_batches(rng, np.arange(300), 4, 20, 60)
    cuda, log = fake_cuda()
    with DeviceCachedFeatureSource(ArrayStore(feats), 300, 4, np.float32, cfg, np.zeros(300, np.uint8),
                                   cuda=cuda) as dev:
        out = dev.fetch(batches[0])
        np.testing.assert_array_equal(out.numpy(), feats[batches[0]])
        assert log == [("enter", "fetch"), ("exit", "fetch"), ("record", "fetch", log[2][2]),
                       ("wait", "consumer", log[2][2]), ("record_stream", "consumer")]
        assert out.ready_event is None
        log.clear()
        dev.hand_off_later(True)
        out = dev.fetch(batches[1])
        assert [e[0] for e in log] == ["enter", "exit", "record"] and out.ready_event is not None
        hand_over(out, cuda=cuda)
        assert [e[0] for e in log][3:] == ["wait", "record_stream"]
        np.testing.assert_array_equal(out.numpy(), feats[batches[1]])
        log.clear()
        dev.last_tiers   # read on the fetch stream
        assert log[0] == ("enter", "fetch")
    # on the CPU (no stand-in) the source has no stream and returns plain tensors
    with DeviceCachedFeatureSource(ArrayStore(feats), 300, 4, np.float32, cfg, np.zeros(300, np.uint8)) as dev:
        assert dev._handoff is None and not hasattr(dev.fetch(batches[0]), "ready_event")


def test_the_loader_fetching_in_its_thread_hands_each_batch_over_in_the_trainers():
    """With overlap_fetch the fetch thread leaves the handoff to the trainer's thread (the loop that
    yields the batches), and the source hands over at return again after the epoch."""
    import threading

    from lsm_gnn.train.loader import FeatureLoader

    rng = np.random.default_rng(6)
    feats = rng.normal(size=(300, 4)).astype(np.float32)
    batches = skewed_batches(rng, np.arange(300), 5, 20, 60)
    cuda, log = fake_cuda()
    waits = []
    consumer = cuda.current_stream()
    consumer.wait_event = lambda ev: waits.append((threading.current_thread().name, ev.id))
    cfg = cache_cfg(cache_rows=32, row_bytes=16, depth=4, window=2, ways=4)
    with DeviceCachedFeatureSource(ArrayStore(feats), 300, 4, np.float32, cfg, np.zeros(300, np.uint8),
                                   cuda=cuda) as dev:
        loader = FeatureLoader(_Sampler(batches), dev, window=2, sample_ahead=0, overlap_fetch=True)
        got = [item.features.numpy().copy() for item in loader.epoch(0)]
        assert not dev._handoff.deferred   # back to handing over at return
    for g, b in zip(got, batches):
        np.testing.assert_array_equal(g, feats[b])
    recorded = [e[2] for e in log if e[0] == "record"]
    assert len(recorded) == len(batches) and [w[1] for w in waits] == recorded
    assert {w[0] for w in waits} == {threading.current_thread().name}   # the trainer's thread


class _Sampler:
    def __init__(self, batches):
        from lsm_gnn.sampling.sampler import MiniBatch

        self.batches = [MiniBatch(b, b[:2], [], np.zeros(2, np.int64)) for b in batches]

    def __len__(self):
        return len(self.batches)

    def epoch(self, epoch):
        return iter(self.batches)


# ---- mapped pinned memory ----------------------------------------------------------------------
def runtime_stand_in(fail_register: bool = False, fail_lookup: bool = False):
    calls = []

    def register(ptr, n, flags):
        if fail_register:
            raise RuntimeError("cudaErrorHostMemoryAlreadyRegistered")
        calls.append(("register", ptr, n, flags))

    def lookup(ptr, flags):
        if fail_lookup:
            raise RuntimeError("cudaErrorInvalidValue")
        return ptr + 16

    rt = SimpleNamespace(hostRegister=register, hostUnregister=lambda ptr: calls.append(("unregister", ptr)),
                         hostGetDevicePointer=lookup)
    return SimpleNamespace(cuda=SimpleNamespace(runtime=rt)), calls


def test_a_host_array_is_registered_mapped_and_unregistered_on_close():
    cp, calls = runtime_stand_in()
    a = np.zeros((8, 4), np.int64)
    with map_tensor(a, what="feature array", cp=cp) as m:
        assert m.device_ptr == a.ctypes.data + 16 and m.registered
    assert calls == [("register", a.ctypes.data, a.nbytes, HOST_REGISTER_PORTABLE | HOST_REGISTER_MAPPED),
                     ("unregister", a.ctypes.data)]
    # pinned memory (torch's) is only looked up, never registered
    m = MappedHost(4096, 128, pinned=True, cp=cp)
    assert m.device_ptr == 4112 and not m.registered
    m.close()
    assert len(calls) == 2


def test_a_failed_registration_or_lookup_is_a_clear_error():
    cp, _ = runtime_stand_in(fail_register=True)
    with pytest.raises(InputError, match=r"could not register the staging buffer \(64 bytes.*mapped pinned"
                                         r".*cudaErrorHostMemoryAlreadyRegistered"):
        MappedHost(4096, 64, pinned=False, what="staging buffer", cp=cp)
    cp, calls = runtime_stand_in(fail_lookup=True)
    with pytest.raises(InputError, match="has no device address.*cudaErrorInvalidValue"):
        MappedHost(4096, 64, pinned=False, cp=cp)
    assert calls == [("register", 4096, 64, 3), ("unregister", 4096)]   # nothing left registered


# ---- on a GPU ----------------------------------------------------------------------------------
@pytest.mark.gpu
def test_cuda_pool_serves_zero_copy_and_equals_the_torch_engine():
    rng = np.random.default_rng(11)
    dev = torch.device("cuda")
    lines, window, depth, row_bytes = 256, 4, 32, 512
    dec = random_decisions(rng, 200, lines, depth)
    pools = [DeviceRowPool(lines, row_bytes, window=window, depth=depth, pvp=True, device=dev, rows_engine=e)
             for e in (TorchRows(), None)]
    assert pools[1].zero_copy and pools[1].rows.name == "kernel"
    words = pools[0].row_words
    for name in ("cache", "landing", "queues"):
        init = torch.from_numpy(rng.integers(-2**62, 2**62, (len(getattr(pools[0], name)), words)))
        for p in pools:
            getattr(p, name).copy_(init)
    staged = pools[1].host_rows(int((dec.status == STORAGE).sum()))
    staged.copy_(torch.from_numpy(rng.integers(-2**62, 2**62, tuple(staged.shape))))
    spill_slot = torch.from_numpy(rng.choice(lines, 20, replace=False)).to(dev)
    spill_dst = torch.from_numpy(rng.choice(window * depth, 20, replace=False)).to(dev)
    plan = {k: v.to(dev) for k, v in plan_batch(*tensors(dec), torch.from_numpy(dec.keys)).items()}
    outs = []
    for p in pools:
        out = torch.zeros((len(dec.inverse), words), dtype=p.word, device=dev)
        p.serve(plan["src"], out, bits(LINE))
        p.spill_records(spill_slot, spill_dst, spill_dst.cpu().numpy())
        p.serve(plan["src"], out, bits(LANDING))
        p.serve(plan["src"], out, bits(STAGED), staged=p.arrived(staged))
        p.fill(plan["fill_slot"], plan["fill_req"], out)
        p.synchronize()
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(pools[0].cache, pools[1].cache) and torch.equal(pools[0].queues, pools[1].queues)


@pytest.mark.gpu
def test_cuda_fetch_runs_on_its_own_stream_and_the_consumer_waits_for_its_event():
    rng = np.random.default_rng(12)
    n, dim = 20000, 128
    feats = rng.normal(size=(n, dim)).astype(np.float32)
    cfg = cache_cfg(cache_rows=2048, row_bytes=dim * 4, depth=64, window=8, ways=32)
    batches = skewed_batches(rng, np.arange(n), 6, 2000, 4000)
    with DeviceCachedFeatureSource(ArrayStore(feats), n, dim, np.float32, cfg, rng.integers(0, 256, n)
                                   .astype(np.uint8), device="cuda") as dev:
        assert dev._handoff.stream != torch.cuda.current_stream()
        dev.hand_off_later(True)
        for t, b in enumerate(batches):
            dev.advance(batches[t + 1: t + 9])
            out = dev.fetch(b)
            assert out.ready_event is not None
            hand_over(out)
            np.testing.assert_array_equal(out.cpu().numpy(), feats[b])

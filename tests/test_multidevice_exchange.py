"""The exchange protocol on 2 gloo ranks (127.0.0.1), with an in-memory owner as the cache; the
device data plane against the host plane (kernels on the CUDA emulator), and over NCCL on GPUs.

The CPU runs (both transports, then the device plane) share one spawn of the 2 ranks (module
fixture `two_ranks`): starting a rank (torch, lsm_gnn, this module) costs more than its work."""

import json
import os
import shutil

import numpy as np
import pytest
import torch.multiprocessing as mp

from lsm_gnn.sources.ideal import MemoryFeatureSource

N, DIM, W = 997, 7, 3


class RecordingOwner(MemoryFeatureSource):
    """In-memory owner cache that checks it only sees its own rows and records its windows (the
    shared source calls its inner `_advance` / `_fetch`: the ids were validated at its own entry)."""

    def __init__(self, feats, G, owner):
        super().__init__(feats)
        self.G, self.owner, self.windows, self.served = G, owner, [], []

    def _advance(self, window):
        assert all(np.all(w % self.G == self.owner) for w in window)
        self.windows.append([np.sort(w).tolist() for w in window])

    def _fetch(self, ids):
        assert np.all(ids % self.G == self.owner)
        self.served.append(np.sort(ids).tolist())
        return super()._fetch(ids)


def batches_of(rank, n=8):
    rng = np.random.default_rng(100 + rank)
    return [rng.integers(0, N, 40 + 13 * rank + b) for b in range(n)]


def _rank(rank, G, port, outdir, transport="collective"):
    import torch
    import torch.distributed as dist

    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn.sources.shared import SharedCacheFeatureSource

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=G)
    feats = np.random.default_rng(7).normal(size=(N, DIM)).astype(np.float32)
    owner = RecordingOwner(feats, G, rank)
    src = SharedCacheFeatureSource(owner, Exchange(rank, G, transport=transport), num_rows=N, row_dim=DIM,
                                   dtype=np.float32, max_horizon=W)
    mine = batches_of(rank)
    ok = True
    for b, ids in enumerate(mine):
        src.advance(mine[b + 1: b + 1 + W])
        ok &= bool(np.array_equal(src.fetch(ids), feats[ids]))
    # an empty request and a restarted (unrelated) window still work
    src.advance([])
    ok &= src.fetch(np.zeros(0, np.int64)).shape == (0, DIM)
    transport_used = src.stats()["exchange_transport"]
    src.close()
    dist.barrier()
    with open(os.path.join(outdir, f"{rank}.json"), "w") as f:
        json.dump({"ok": ok, "windows": owner.windows, "served": owner.served,
                   "stats": src.ex.stats.as_dict(), "peer_rows": src.peer_rows, "transport": transport_used,
                   "pid": os.getpid()}, f)
    dist.destroy_process_group()


TRANSPORTS = ("collective", "shm")
HAS_CXX = bool(shutil.which("g++") or shutil.which("c++"))


def _cpu_runs(rank, G, ports, outdir, plane):
    """In each rank, one after the other (each with its own process group): the exchange over
    every transport (results in outdir/<transport>/), then the device plane (outdir/)."""
    for transport, port in zip(TRANSPORTS, ports):
        _rank(rank, G, port, os.path.join(outdir, transport), transport)
    if plane:
        _plane_rank(rank, G, ports[-1], outdir)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """The folder of the 2 CPU ranks' results (one spawn for every CPU test of this module)."""
    from lsm_gnn.multidevice.group import pick_free_port

    out = tmp_path_factory.mktemp("exchange")
    for t in TRANSPORTS:
        (out / t).mkdir()
    ports = [pick_free_port() for _ in range(len(TRANSPORTS) + 1)]
    mp.spawn(_cpu_runs, args=(2, ports, str(out), HAS_CXX), nprocs=2)
    return out


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_two_ranks_rows_windows_and_bytes(two_ranks, transport):
    from lsm_gnn.multidevice.exchange import SHM_DIR, SHM_PREFIX

    G = 2
    res = [json.loads((two_ranks / transport / f"{r}.json").read_text()) for r in range(G)]
    assert all(r["ok"] for r in res)  # every row received equals the file's row
    assert [r["transport"] for r in res] == [transport] * G
    # a closed source leaves no shared-memory segment behind
    left = [n for n in os.listdir(SHM_DIR) for r in res if n.startswith(f"{SHM_PREFIX}{r['pid']}-")]
    assert left == []
    reqs = [batches_of(r) for r in range(G)]
    for o in range(G):
        owned = lambda b: sorted(int(v) for r in range(G) for v in reqs[r][b] if v % G == o)  # noqa: E731
        # the owner served, per iteration, exactly the rows every rank asked it for
        assert res[o]["served"][:8] == [owned(b) for b in range(8)]
        # and before iteration b it knew every rank's requests for b+1..b+W
        for b in range(8):
            assert res[o]["windows"][b] == [owned(k) for k in range(b + 1, min(8, b + 1 + W))]
    for r in range(G):
        peer = sum(int((x % G != r).sum()) for x in reqs[r])
        assert res[r]["peer_rows"] == peer
        served_to_peer = sum(int((x % G == r).sum()) for q in range(G) if q != r for x in reqs[q])
        assert res[r]["stats"]["row_bytes"] == served_to_peer * DIM * 4
        # ids: every batch's peer ids once when fetched, batches 1..7 once more when announced
        # W ahead (batch 0 never is), plus headers: 9 fetches x 1 count, 9 advances x (3 + W)
        peer_b0 = int((reqs[r][0] % G != r).sum())
        headers = 9 * 8 + 9 * (3 + W) * 8
        if transport == "shm":  # the probe and its answer once, then an offsets header per fetch
            headers += (4 + 1) * 8 + 9 * 4 * 8
        assert res[r]["stats"]["id_bytes"] == (2 * peer - peer_b0) * 8 + headers


# ---- the device data plane ------------------------------------------------------------------------
def _plane_rank(rank, G, port, outdir):
    """Every rank fetches the same batches through four shared sources, one after the other: an
    in-memory owner on the host plane and on the device plane, and the owner's cache on the host
    plane (CachedFeatureSource) and on the device plane (DeviceCachedFeatureSource on the CPU).
    The device plane's kernels run on the CUDA emulator (tests/cuda_emu.py)."""
    import torch
    import torch.distributed as dist

    from lsm_gnn.sources.cached_device import DeviceCachedFeatureSource
    from lsm_gnn.sources.cached import CachedFeatureSource
    from lsm_gnn.config import parse_config
    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn.sources.shared import SharedCacheFeatureSource
    from lsm_gnn.storage.base import FeatureStore
    from test_multidevice_owners import emulate_gpu_kernels

    class ArrayStore(FeatureStore):
        reader_name = "test-array"

        def __init__(self, array):
            super().__init__(len(array), array.shape[1], array.dtype)
            self.array = array

        def _read(self, ids, out):
            out[...] = self.array[ids]
            u = len(np.unique(ids))
            return u, u, u * self.row_bytes

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=G)
    emulate_gpu_kernels()
    feats = np.random.default_rng(7).normal(size=(N, DIM)).astype(np.float32)
    cache_cfg = parse_config({"cache": {"capacity_fraction": 0.1, "window": W}}).cache
    static = np.random.default_rng(3).integers(0, 256, N).astype(np.uint8)
    owners = {
        "memory-host": (lambda: MemoryFeatureSource(feats), "host"),
        "memory-device": (lambda: MemoryFeatureSource(feats), "device"),
        "cache-host": (lambda: CachedFeatureSource(ArrayStore(feats), N, DIM, np.float32, cache_cfg, static,
                                                   num_owners=G, owner=rank), "host"),
        "cache-device": (lambda: DeviceCachedFeatureSource(
            ArrayStore(feats), N, DIM, np.float32, cache_cfg, static, num_owners=G, owner=rank, device="cpu",
            owns_store=True), "device"),
    }
    mine = batches_of(rank)
    res = {}
    for name, (make, plane) in owners.items():
        src = SharedCacheFeatureSource(make(), Exchange(rank, G), num_rows=N, row_dim=DIM, dtype=np.float32,
                                       max_horizon=W, plane=plane)
        ok, kinds = True, set()
        for b, ids in enumerate(mine):
            src.advance(mine[b + 1: b + 1 + W])
            rows = src.fetch(ids)
            kinds.add(type(rows).__name__)
            ok &= bool(np.array_equal(rows.numpy() if isinstance(rows, torch.Tensor) else rows, feats[ids]))
        src.advance([])
        empty = src.fetch(np.zeros(0, np.int64))
        ok &= tuple(empty.shape) == (0, DIM)
        res[name] = {"ok": ok, "plane": src.plane, "kinds": sorted(kinds), "rows": src.counters.as_dict(),
                     "stats": src.ex.stats.as_dict(), "peer_rows": src.peer_rows, "coalesced": src.coalesced}
        src.close()
    with open(os.path.join(outdir, f"plane-{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.destroy_process_group()


@pytest.mark.skipif(not HAS_CXX, reason="needs g++ for the CUDA emulator")
def test_device_plane_gives_the_host_planes_rows_counts_and_bytes(two_ranks):
    G = 2
    for r in range(G):
        res = json.loads((two_ranks / f"plane-{r}.json").read_text())
        assert all(v["ok"] for v in res.values()), res  # every row received equals the file's row
        assert [res[k]["plane"] for k in res] == ["host", "device", "host", "device"]
        assert res["memory-host"]["kinds"] == res["cache-host"]["kinds"] == ["ndarray"]
        assert res["memory-device"]["kinds"] == res["cache-device"]["kinds"] == ["Tensor"]
        for kind in ("memory", "cache"):
            host, dev = res[f"{kind}-host"], res[f"{kind}-device"]
            # same split, same exchange, same owner decisions: the same counts and bytes
            assert dev["rows"] == host["rows"] and dev["stats"]["bytes"] == host["stats"]["bytes"]
            assert dev["stats"]["calls"] == host["stats"]["calls"] == len(batches_of(r)) + 1
            assert dev["peer_rows"] == host["peer_rows"] and dev["coalesced"] == host["coalesced"]
        assert res["cache-device"]["rows"]["storage_rows"] > 0


# ---- on GPUs (NCCL): `lsm-gnn check gpu` runs these on a GPU machine -------------------------
def _nccl_rank(rank, G, port, outdir):
    """The device plane over NCCL: DeviceCachedFeatureSource on this rank's GPU, the real kernels,
    counts, ids and rows as CUDA tensors; rows checked against the features."""
    import torch
    import torch.distributed as dist

    from types import SimpleNamespace

    from lsm_gnn.sources.cached_device import DeviceCachedFeatureSource
    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn.sources.shared import SharedCacheFeatureSource
    from lsm_gnn.storage.memory import MemoryStore

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=G)
    feats = np.random.default_rng(7).normal(size=(N, DIM)).astype(np.float32)
    # a duck-typed CacheConfig (the GPU image may lack pydantic): lsm_gnn.config's defaults, 10 %
    cache_cfg = SimpleNamespace(enabled=True, capacity_fraction=0.1, capacity_bytes=None, ways=32, policy="hybrid",
                                window=W, lookahead=W, refresh_every=1, engine="cpu",
                                victim_buffer=SimpleNamespace(enabled=True, depth=None, host_fraction=0.1, force=False))
    store = MemoryStore(feats)
    owner = DeviceCachedFeatureSource(store, N, DIM, np.float32, cache_cfg, np.zeros(N, np.uint8),
                                      num_owners=G, owner=rank, device="cuda", owns_store=True)
    src = SharedCacheFeatureSource(owner, Exchange(rank, G, device="cuda"), num_rows=N, row_dim=DIM,
                                   dtype=np.float32, max_horizon=W)
    ok = src.plane == "device"
    mine = batches_of(rank)
    for b, ids in enumerate(mine):
        src.advance(mine[b + 1: b + 1 + W])
        rows = src.fetch(ids)
        ok &= isinstance(rows, torch.Tensor) and rows.is_cuda
        ok &= bool(np.array_equal(rows.cpu().numpy(), feats[ids]))
    src.close()
    with open(os.path.join(outdir, f"nccl-{rank}.json"), "w") as f:
        json.dump({"ok": bool(ok), "stats": src.ex.stats.as_dict()}, f)
    dist.destroy_process_group()


def _over_nccl(tmp_path, G):
    from lsm_gnn.multidevice.group import pick_free_port

    mp.spawn(_nccl_rank, args=(G, pick_free_port(), str(tmp_path)), nprocs=G)
    for r in range(G):
        assert json.loads((tmp_path / f"nccl-{r}.json").read_text())["ok"]


@pytest.mark.gpu
def test_device_plane_over_nccl_one_gpu(tmp_path):
    """One rank exchanging with itself over NCCL: every step of the device plane on one GPU."""
    _over_nccl(tmp_path, 1)


@pytest.mark.gpu(devices=2)  # NCCL refuses two ranks on one GPU
def test_device_plane_over_nccl_two_gpus(tmp_path):
    _over_nccl(tmp_path, 2)


# ---- the shared-memory transport's outboxes, in one process -------------------------------------
def test_an_outbox_grows_into_a_new_segment_and_a_peer_reads_the_rows_it_was_written(tmp_path):
    from lsm_gnn.multidevice.exchange import Outboxes

    a, b = Outboxes(0, 2), Outboxes(1, 2)
    try:
        rng = np.random.default_rng(0)
        for n in (3, 200, 100, 2000):  # 200 and 2000 outgrow the segment: new generations
            rows = rng.normal(size=(2 * n, DIM)).astype(np.float32)
            counts = np.array([n, n])
            header = a.write(rows, counts)  # rank 0 serves rank 1 the second block
            got = b.block(0, header[1], n, DIM * 4)
            assert np.array_equal(got.view(np.float32).reshape(n, DIM), rows[n:])
        assert a.gen == 2
    finally:
        a.close()
        b.close()


def test_a_probe_answers_false_for_a_token_that_is_not_the_peers_memory():
    from lsm_gnn.multidevice.exchange import Outboxes

    a, b = Outboxes(0, 2), Outboxes(1, 2)
    try:
        ha, hb = a.probe(), b.probe()
        assert a.check_probe(hb) and b.check_probe(ha)
        hb[:, 3] += 1  # another memory under the same name: not the peer's segment
        assert not a.check_probe(hb)
    finally:
        a.close()
        b.close()


def test_the_segments_of_a_process_that_no_longer_exists_are_removed(tmp_path):
    import subprocess
    import sys

    from lsm_gnn.multidevice.exchange import SHM_PREFIX, sweep_stale

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale, live = tmp_path / f"{SHM_PREFIX}{dead}-0-1", tmp_path / f"{SHM_PREFIX}{os.getpid()}-0-1"
    stale.write_bytes(b"x")
    live.write_bytes(b"x")
    assert sweep_stale(str(tmp_path)) == [str(stale)]
    assert live.exists() and not stale.exists()


def test_bench_exchange_times_both_transports_on_the_same_rows():
    from click.testing import CliRunner

    from lsm_gnn.bench.exchange import bench_exchange

    res = CliRunner().invoke(bench_exchange, ["--megabytes", "0.05", "--reps", "2", "--warmup", "0", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["transport"] == "shm" and out["peer_bytes"] == (50_000 // 4096) * 4096
    for t in ("collective", "shm"):
        assert out["by_transport"][t]["seconds"] > 0 and out["by_transport"][t]["bytes_per_s"] > 0
    assert out["shm_vs_collective_time"] > 0


@pytest.mark.parametrize("gpus, local_ranks, want", [(0, None, "gloo"), (1, None, "gloo"), (2, None, "nccl"),
                                                       (4, None, "nccl"), (1, "1", "nccl"), (2, "3", "gloo")])
def test_auto_backend_is_nccl_only_where_every_rank_of_the_host_has_a_gpu(monkeypatch, gpus, local_ranks, want):
    import torch

    from lsm_gnn.config import DistributedConfig
    from lsm_gnn.multidevice.group import resolve_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    if local_ranks is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local_ranks)   # torchrun: the ranks on this host
    two = DistributedConfig(devices=2)
    assert resolve_backend(two, "cuda") == want
    assert resolve_backend(two, "cpu") == "gloo"
    assert resolve_backend(DistributedConfig(devices=2, backend="nccl"), "cpu") == "nccl"   # as configured

"""Owner split, reorder and per-owner feature files (CPU engine; GPU engine against it)."""

import json
import shutil

import numpy as np
import pytest

from lsm_gnn.multidevice.owner_files import ensure_owner_files, owner_num_rows, read_owner_rows
from lsm_gnn.ownership import reorder, split_by_owner
from lsm_gnn.utils.errors import InputError


def slow_split(ids, G):
    buckets = [[] for _ in range(G)]
    for pos, v in enumerate(ids):
        buckets[v % G].append((v, pos))
    flat = [x for b in buckets for x in b]
    return ([v for v, _ in flat], [p for _, p in flat], [len(b) for b in buckets])


@pytest.mark.parametrize("G", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", [0, 1])
def test_split_matches_reference_and_reorder_inverts(G, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 500, size=rng.integers(0, 400))  # duplicates on purpose
    s = split_by_owner(ids, G, num_rows=500)
    ref_ids, ref_pos, ref_counts = slow_split(ids.tolist(), G)
    assert s.send_ids.tolist() == ref_ids
    assert s.positions.tolist() == ref_pos
    assert s.counts.tolist() == ref_counts
    for o in range(G):
        assert np.all(s.bucket(o) % G == o)
    rows = np.stack([s.send_ids, -s.send_ids], axis=1).astype(np.float32)  # row k belongs to send_ids[k]
    back = reorder(rows, s.positions)
    assert np.array_equal(back[:, 0], ids.astype(np.float32))


def test_split_rejects_bad_ids():
    with pytest.raises(InputError, match="range"):
        split_by_owner(np.array([1, -2]), 2)
    with pytest.raises(InputError, match=r"\[0, 10\)"):
        split_by_owner(np.array([3, 10]), 2, num_rows=10)
    with pytest.raises(InputError, match="integer"):
        split_by_owner(np.array([1.5]), 2)
    with pytest.raises(InputError, match="1-D"):
        split_by_owner(np.zeros((2, 2), np.int64), 2)


@pytest.mark.parametrize("G", [2, 3])
def test_owner_files_hold_owned_rows_at_v_div_G(random_dataset, G):
    ds = random_dataset(num_nodes=301, dim=12)  # 48-byte rows: padded stride, several per sector
    feats = ds.feature_array()
    lays = ensure_owner_files(ds, G, progress=False)
    assert len(lays) == G
    for o, lay in enumerate(lays):
        assert lay.num_rows == owner_num_rows(301, G, o) == len(range(o, 301, G))
        assert lay.row_stride == ds.features().row_stride
        assert lay.path.stat().st_size == lay.file_bytes and lay.file_bytes % 4096 == 0
        owned = np.arange(o, 301, G)
        assert np.array_equal(read_owner_rows(lay, owned // G), feats[owned])
    # a second call reuses the files; a changed checksum makes them stale and rewrites them
    mtime = lays[0].path.stat().st_mtime_ns
    assert ensure_owner_files(ds, G, progress=False)[0].path.stat().st_mtime_ns == mtime
    lays[0].path.write_bytes(b"x" * 4096)
    again = ensure_owner_files(ds, G, progress=False)
    assert np.array_equal(read_owner_rows(again[0], np.arange(0, 301, G) // G), feats[0::G])



def test_owner_files_under_an_owners_dir_leave_the_dataset_folder_untouched(random_dataset, tmp_path):
    ds = random_dataset(num_nodes=301, dim=12)
    before = sorted(p.relative_to(ds.root) for p in ds.root.rglob("*"))
    from click.testing import CliRunner

    from lsm_gnn.cli import cli

    res = CliRunner().invoke(cli, ["dataset", "owners", str(ds.root), "--devices", "2", "--out", str(tmp_path / "res"),
                                   "--no-progress"])
    assert res.exit_code == 0, res.output
    assert sorted(p.relative_to(ds.root) for p in ds.root.rglob("*")) == before
    made = sorted(p.name for p in (tmp_path / "res/owners-2").iterdir())
    assert made == ["manifest.json", "owner-0.bin", "owner-1.bin"]
    # the runs find them there: nothing written again, nothing beside the dataset
    lays = ensure_owner_files(ds, 2, out_dir=tmp_path / "res", progress=False)
    assert [la.path.parent for la in lays] == [tmp_path / "res/owners-2"] * 2
    assert np.array_equal(read_owner_rows(lays[1], np.arange(1, 301, 2) // 2), ds.feature_array()[1::2])
    assert not (ds.root / "owners-2").exists()

def test_owner_files_go_each_into_its_ranks_own_folder_with_a_manifest_of_its_own(random_dataset, tmp_path):
    from lsm_gnn.multidevice.owner_files import owner_files_build_seconds

    ds = random_dataset(num_nodes=301, dim=12)
    feats = ds.feature_array()
    dirs = [str(tmp_path / "nvme0" / "lsm"), str(tmp_path / "nvme1" / "lsm")]
    # a rank writes only its own file, in its own folder
    lays = ensure_owner_files(ds, 2, owners=[1], rank_dirs=dirs, progress=False)
    assert [la.path for la in lays] == [tmp_path / f"nvme{o}/lsm/owners-2/owner-{o}.bin" for o in range(2)]
    assert not lays[0].path.exists() and lays[1].path.is_file()
    lays = ensure_owner_files(ds, 2, rank_dirs=dirs, progress=False)
    for o, lay in enumerate(lays):
        assert sorted(p.name for p in lay.path.parent.iterdir()) == ["manifest.json", f"owner-{o}.bin"]
        assert json.loads((lay.path.parent / "manifest.json").read_text())["files"] == [f"owner-{o}.bin"]
        assert np.array_equal(read_owner_rows(lay, np.arange(o, 301, 2) // 2), feats[o::2])
    mtimes = [la.path.stat().st_mtime_ns for la in lays]
    assert [la.path.stat().st_mtime_ns for la in ensure_owner_files(ds, 2, rank_dirs=dirs, progress=False)] == mtimes
    assert owner_files_build_seconds(ds, 2, rank_dirs=dirs) >= 0.0
    assert not (ds.root / "owners-2").exists()
    with pytest.raises(InputError, match=r"storage.rank_dirs names 1 folder\(s\); expected one per device \(2\)"):
        ensure_owner_files(ds, 2, rank_dirs=dirs[:1], progress=False)


@pytest.mark.parametrize("reader", ["direct", "buffered"])
def test_a_plain_rank_reads_every_row_from_the_replica_in_its_own_folder(random_dataset, tmp_path, reader):
    from lsm_gnn.config import parse_config
    from lsm_gnn.sources.factory import make_feature_source

    ds = random_dataset(num_nodes=301, dim=12)
    dirs = [str(tmp_path / "r0"), str(tmp_path / "r1")]
    cfg = parse_config({"dataset": {"path": str(ds.root)}, "cache": {"enabled": False},
                        "storage": {"reader": reader, "rank_dirs": dirs}, "distributed": {"devices": 2}})
    src = make_feature_source(cfg, ds, storage_rank=1)   # what a plain loader's rank 1 builds
    try:
        assert src.store.path == str(tmp_path / "r1/owners-1/owner-0.bin")
        assert src.store.checksum_state == "verified"
        ids = np.array([300, 0, 17, 17, 150])
        assert np.array_equal(src.fetch(ids), ds.feature_array()[ids])
    finally:
        src.close()
    assert not (tmp_path / "r0").exists()   # rank 0's replica is rank 0's to write
    bad = cfg.model_copy(update={"distributed": cfg.distributed.model_copy(update={"devices": 3})})
    with pytest.raises(InputError, match="expected one per device \\(3\\)"):
        make_feature_source(bad, ds, storage_rank=1)


@pytest.mark.gpu
@pytest.mark.parametrize("G", [2, 3, 8])
def test_gpu_split_and_reorder_equal_cpu(G):
    import cupy as cp

    from lsm_gnn.multidevice.gpu import reorder_gpu, split_by_owner_gpu

    rng = np.random.default_rng(G)
    ids = rng.integers(0, 10**6, 200_003)
    s = split_by_owner(ids, G)
    send, pos, counts = split_by_owner_gpu(cp.asarray(ids), G)
    assert np.array_equal(cp.asnumpy(send), s.send_ids)
    assert np.array_equal(cp.asnumpy(pos), s.positions)
    assert np.array_equal(cp.asnumpy(counts), s.counts)
    for dim, dtype in ((1024, np.float32), (3, np.float16)):
        rows = rng.normal(size=(len(ids), dim)).astype(dtype)
        assert np.array_equal(cp.asnumpy(reorder_gpu(cp.asarray(rows), pos)), reorder(rows, s.positions))


# ---- the kernels on torch tensors (the shared cache's device data plane) ------------------------
_has_cxx = bool(shutil.which("g++") or shutil.which("c++"))


def emulate_gpu_kernels(monkeypatch=None):
    """Run lsm_gnn.multidevice.gpu on tests/cuda_emu.py (g++): CPU tensors stand for device ones."""
    from cuda_emu import fake_cupy

    from lsm_gnn.multidevice import gpu

    cp = fake_cupy()
    mods = {name: cp.RawModule(code=gpu.module_source(name)) for name in gpu.SOURCES}
    if monkeypatch is None:
        gpu._require, gpu._module = (lambda: cp), (lambda name: mods[name])
    else:
        monkeypatch.setattr(gpu, "_require", lambda: cp)
        monkeypatch.setattr(gpu, "_module", lambda name: mods[name])


def _tensor_split_and_reorder_equal_cpu(device, G, n):
    import torch

    from lsm_gnn.multidevice.gpu import reorder_tensor, split_by_owner_tensor

    rng = np.random.default_rng(G)
    ids = rng.integers(0, 10**6, n)
    s = split_by_owner(ids, G)
    send, pos, counts = split_by_owner_tensor(torch.from_numpy(ids).to(device), G)
    assert send.device.type == pos.device.type == counts.device.type == torch.device(device).type
    assert np.array_equal(send.cpu().numpy(), s.send_ids)
    assert np.array_equal(pos.cpu().numpy(), s.positions)
    assert np.array_equal(counts.cpu().numpy(), s.counts)
    for dim, dtype in ((16, torch.float32), (3, torch.float16), (5, torch.bfloat16)):  # words and bytes
        rows = torch.randn(n, dim, generator=torch.Generator().manual_seed(dim)).to(dtype)
        expect = rows[torch.from_numpy(np.argsort(s.positions))]  # out[positions[k]] = rows[k]
        got = reorder_tensor(rows.to(device), pos)
        assert got.device.type == torch.device(device).type and got.dtype == dtype
        assert torch.equal(got.cpu(), expect)
        out = torch.empty_like(rows, device=device)
        assert reorder_tensor(rows.to(device), pos, out=out) is out and torch.equal(out.cpu(), expect)
    empty = split_by_owner_tensor(torch.zeros(0, dtype=torch.int64, device=device), G)
    assert [len(x) for x in empty] == [0, 0, G]


@pytest.mark.skipif(not _has_cxx, reason="needs g++ for the CUDA emulator")
@pytest.mark.parametrize("G", [2, 3])
def test_tensor_split_and_reorder_equal_cpu_emulated(G, monkeypatch):
    emulate_gpu_kernels(monkeypatch)
    _tensor_split_and_reorder_equal_cpu("cpu", G, 701)


@pytest.mark.gpu
@pytest.mark.parametrize("G", [2, 3, 8])
def test_gpu_tensor_split_and_reorder_equal_cpu(G):
    _tensor_split_and_reorder_equal_cpu("cuda", G, 200_003)


@pytest.mark.skipif(not _has_cxx, reason="needs g++ for the CUDA emulator")
@pytest.mark.parametrize("row_bytes,n,offset", [
    (4096, 9, 0),     # 16-byte units, a warp per row, a block of 8 rows and one more
    (48, 67, 0),      # 16-byte units, 4 threads per row: 64 rows per block and 3 more
    (48, 20, 4),      # views 4 bytes into their buffers: 4-byte units
    (24, 33, 8),      # 8-byte units
    (10, 300, 0),     # a row size that only bytes divide
])
def test_reorder_kernels_on_every_unit_and_partial_blocks_emulated(row_bytes, n, offset, monkeypatch):
    """reorder_gpu through the stand-in: out[positions[k]] = rows[k] whatever the unit the plan
    takes (lsm_gnn.utils.rowcopy), for row counts that leave the last block part-filled, and
    nothing outside `out` is written."""
    from cuda_emu import fake_cupy

    from lsm_gnn.multidevice.gpu import reorder_gpu
    from lsm_gnn.utils import rowcopy

    emulate_gpu_kernels(monkeypatch)
    cp = fake_cupy()
    rng = np.random.default_rng(row_bytes + n)
    src_buf = cp.asarray(rng.integers(0, 255, offset + n * row_bytes + 16).astype(np.uint8))
    out_buf = cp.asarray(np.zeros(offset + n * row_bytes + 16, np.uint8))
    rows = src_buf[offset: offset + n * row_bytes].reshape(n, row_bytes)
    out = out_buf[offset: offset + n * row_bytes].reshape(n, row_bytes)
    positions = rng.permutation(n).astype(np.int64)
    plan = rowcopy.plan(n, row_bytes, rowcopy.address(rows), rowcopy.address(out))
    assert plan.unit == max(u for u in rowcopy.UNITS if row_bytes % u == 0 and offset % u == 0)
    assert reorder_gpu(rows, cp.asarray(positions), out=out) is out
    np.testing.assert_array_equal(np.asarray(out), reorder(np.asarray(rows), positions))
    rest = np.concatenate([np.asarray(out_buf)[:offset], np.asarray(out_buf)[offset + n * row_bytes:]])
    assert not rest.any()

"""The GPU check's new steps' host logic (`lsm-gnn check gpu`, lsm_gnn/check/gpu.py): the zero-copy
gather (lsm_gnn.bench.cache.zero_copy_gather_vs_memcpy) on a GPU and on the CUDA stand-in
(tests/cuda_emu.py, where "mapped" host memory is the host memory itself), and the raw disk probe
(lsm_gnn.bench.storage.probe_disk) beside which LSM-GNN's storage rate is read."""

from __future__ import annotations

import ctypes
import shutil
import time
import types
from pathlib import Path

import numpy as np
import pytest

from lsm_gnn.bench import cache as bench_cache
from lsm_gnn.bench import storage as bench_storage

_has_cxx = bool(shutil.which("g++") or shutil.which("c++"))
BACKENDS = [
    pytest.param("cupy", marks=pytest.mark.gpu),
    pytest.param("emulated", marks=pytest.mark.skipif(not _has_cxx, reason="needs g++ for the CUDA emulator")),
]
_EMU: dict = {}


def _wall_ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _stand_in(shift_bytes: int = 0):
    """The CUDA stand-in with the runtime calls the gather makes: registration is recorded, the
    mapped device address is the host address (plus `shift_bytes`, to fake a wrong one) and a
    memcpy is a memmove."""
    from cuda_emu import fake_cupy

    if "cp" not in _EMU:
        _EMU["cp"] = fake_cupy()
    cp = _EMU["cp"]
    calls = []
    cp.cuda.runtime = types.SimpleNamespace(
        **{**vars(cp.cuda.runtime),
           "hostRegister": lambda ptr, n, flags: calls.append(("register", ptr, n, flags)),
           "hostUnregister": lambda ptr: calls.append(("unregister", ptr)),
           "pointerGetAttributes": lambda ptr: types.SimpleNamespace(devicePointer=ptr + shift_bytes),
           "memcpy": lambda dst, src, n, kind: ctypes.memmove(dst, src, n)})
    return cp, calls


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("row_bytes", [4096, 48])
def test_the_zero_copy_gather_returns_the_tables_rows_and_times_both_paths(backend, row_bytes):
    """Rows of 4 KiB (8 16-byte words a lane) and of 48 bytes (fewer words than lanes)."""
    if backend == "cupy":
        out = bench_cache.zero_copy_gather_vs_memcpy(rows=2000, table_rows=8000, row_bytes=row_bytes, reps=3)
    else:
        cp, calls = _stand_in()
        out = bench_cache.zero_copy_gather_vs_memcpy(rows=150, table_rows=600, row_bytes=row_bytes, reps=2,
                                                     warmup=1, cp=cp, timer=_wall_ms)
        # the whole table registered portable and mapped, and unregistered after
        (kind, ptr, n, flags), last = calls[0], calls[-1]
        assert kind == "register" and n == 600 * row_bytes and flags == 3 and last == ("unregister", ptr)
        assert ptr % 4096 == 0   # whole pages, every row 16-byte aligned for the kernel's loads
    assert "error" not in out, out.get("error")
    assert out["gather_correct"] and out["memcpy_correct"]
    assert out["bytes"] == out["rows"] * row_bytes
    assert out["zero_copy_gather_vs_memcpy"] == pytest.approx(out["memcpy_ms"] / out["gather_ms"])
    assert out["gather_gb_per_s"] > 0 and out["memcpy_gb_per_s"] > 0


@pytest.mark.skipif(not _has_cxx, reason="needs g++ for the CUDA emulator")
def test_a_wrong_mapped_address_makes_the_zero_copy_gather_report_wrong_rows():
    cp, _ = _stand_in(shift_bytes=64)
    out = bench_cache.zero_copy_gather_vs_memcpy(rows=40, table_rows=200, row_bytes=64, reps=1, warmup=0,
                                                 cp=cp, timer=_wall_ms)
    assert out["gather_correct"] is False and "different from table[index]" in out["error"]


def test_the_zero_copy_gather_refuses_rows_of_odd_width_or_more_rows_than_the_table():
    with pytest.raises(ValueError, match="multiple of 16"):
        bench_cache.zero_copy_gather_vs_memcpy(rows=10, table_rows=100, row_bytes=4100, cp=object())
    with pytest.raises(ValueError, match="rows: expected 1..table_rows"):
        bench_cache.zero_copy_gather_vs_memcpy(rows=101, table_rows=100, cp=object())


def test_the_zero_copy_grid_gives_every_row_a_warp_and_no_more_blocks_than_that():
    for rows in (1, 7, 8, 9, 21_000):
        grid = bench_cache.zero_copy_grid(rows)
        warps = grid * bench_cache.ZERO_COPY_BLOCK // 32
        assert warps >= rows and warps - rows < bench_cache.ZERO_COPY_BLOCK // 32


def test_the_mapped_address_comes_from_host_get_device_pointer_where_cupy_has_it():
    attrs = types.SimpleNamespace(pointerGetAttributes=lambda p: types.SimpleNamespace(devicePointer=p + 1))
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=attrs))
    assert bench_cache.mapped_device_pointer(cp, 4096) == 4097
    attrs.hostGetDevicePointer = lambda p, flags: p + 2
    assert bench_cache.mapped_device_pointer(cp, 4096) == 4098


# ---- the raw disk probe ---------------------------------------------------------------------------
def _o_direct(path: Path) -> bool:
    from lsm_gnn.utils.machine import o_direct_works

    return o_direct_works(path)


def test_the_native_probe_reads_random_blocks_of_a_file_and_says_why_it_cannot(tmp_path):
    f = tmp_path / "blocks.bin"
    np.random.default_rng(0).integers(0, 255, 64 * 4096, dtype=np.uint8).tofile(f)
    if not _o_direct(f):
        pytest.skip(f"{tmp_path}: the filesystem refuses O_DIRECT")
    r = bench_storage.native_random_iops(str(f), seconds=0.05, depth=4, chunk=64)
    assert r["available"], r
    assert r["reads"] >= 64 and r["reads"] % 64 == 0 and r["failed_reads"] == 0 and r["iops"] > 0
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 100)
    r = bench_storage.native_random_iops(str(small), seconds=0.05)
    assert not r["available"] and "smaller than one 4096-byte block" in r["reason"]


def test_the_native_probe_stops_and_says_why_when_every_read_fails(tmp_path, monkeypatch):
    import errno

    from lsm_gnn.storage import aio

    f = tmp_path / "blocks.bin"
    np.zeros(16 * 4096, np.uint8).tofile(f)
    if not _o_direct(f):
        pytest.skip(f"{tmp_path}: the filesystem refuses O_DIRECT")

    def failing(ctx, fd, buf, offs, boffs, lens, depth, got, *rest):
        got[:] = -errno.EIO
        return len(got)

    monkeypatch.setattr(aio, "aio_reads", failing)
    r = bench_storage.native_random_iops(str(f), seconds=0.05, depth=4, chunk=32)
    assert not r["available"] and "every one of 32 reads failed" in r["reason"]
    assert "Input/output error" in r["reason"]


def test_the_disk_probe_step_probes_the_datasets_feature_file_with_the_probe_it_finds(tmp_path):
    from lsm_gnn.datasets.synthetic import generate

    ds = generate(tmp_path / "ds", 2000, seed=0, feature_dim=256, progress=False, overwrite=True)
    if not _o_direct(Path(ds.features().path)):
        pytest.skip(f"{tmp_path}: the filesystem refuses O_DIRECT")
    out = bench_storage.probe_disk(str(tmp_path / "ds"), seconds=0.05, depth=4, fio="lsm-gnn-no-such-fio")
    assert "error" not in out, out
    assert out["file"] == str(ds.features().path) and out["probe"] == "native"
    assert not out["by_probe"]["fio"]["available"] and "fio not found" in out["by_probe"]["fio"]["reason"]
    assert out["iops"] == out["by_probe"]["native"]["iops"] > 0


def test_the_zero_copy_kernel_compiles_for_sm_80_and_sm_90_with_no_warning():
    """With nvcc (lsm-gnn check compile's compiler; the GPU machine compiles it with NVRTC): no
    error, warning or spill, its one kernel in the cubin."""
    from lsm_gnn.check import compile as cc

    nvcc = cc.find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc here (lsm-gnn check compile's compiler)")
    for arch in ("sm_80", "sm_90"):
        res = cc.compile_unit(nvcc, "zero-copy gather", bench_cache.ZERO_COPY_GATHER_SRC, arch)
        assert res["ok"], res
        k = res["kernels"]["zero_copy_gather"]
        assert k["spill_stores"] == 0 and k["spill_loads"] == 0

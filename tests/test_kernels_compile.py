"""Every program of the GPU engines compiles for real GPUs (sm_80, sm_90) with nvcc: no error, no
warning, no register spill outside lsm_gnn.check.compile.SPILL_ALLOWED, every kernel in the cubin
with the options the engines compile with. No GPU needed; without nvcc the compile tests skip,
except on CI (CI=true), where nvcc is part of the machine and its absence fails them."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest
from click.testing import CliRunner

from lsm_gnn.check import compile as cc
from lsm_gnn.check.nvrtc import translation_units
from lsm_gnn.utils import cuda_sources

ON_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="module")
def report():
    """One nvcc compile of every unit for every architecture (cached by source and arch)."""
    nvcc = cc.find_nvcc()
    if nvcc is None:
        why = "nvcc (CUDA toolkit) is not on the PATH nor under $CUDA_HOME/bin or /usr/local/cuda/bin"
        if ON_CI:
            pytest.fail(f"CI must compile the kernels: {why}")
        pytest.skip(why)
    return cc.run(cc.ARCHS, nvcc)


# ---- with nvcc --------------------------------------------------------------------------------
def test_every_unit_compiles_for_sm80_and_sm90_without_errors_or_warnings(report):
    units = {(u["unit"], u["arch"]) for u in report["units"]}
    assert units == {(name, arch) for name in translation_units() for arch in cc.ARCHS}
    for u in report["units"]:
        assert not u["errors"], (u["unit"], u["arch"], u["errors"])
        assert not u["warnings"], (u["unit"], u["arch"], u["warnings"])
        assert not u["missing"], (u["unit"], u["arch"], u["missing"])
    assert report["ok"], report["problems"]


def test_every_kernel_is_in_the_cubin_of_each_architecture(report):
    for arch in cc.ARCHS:
        compiled = {r["kernel"] for r in report["kernels"] if r["arch"] == arch}
        defined = {k for src, _ in translation_units().values() for k in cuda_sources.kernels(src)}
        assert compiled == defined, (arch, defined ^ compiled)


def test_no_kernel_spills_registers_unless_the_allow_list_says_why(report):
    for r in report["kernels"]:
        if r["spill_stores"] or r["spill_loads"]:
            assert r["kernel"] in cc.SPILL_ALLOWED, (r["kernel"], r["arch"], r["spill_stores"], r["spill_loads"])


def test_every_kernel_has_its_launch_size_and_an_occupancy_on_each_gpu(report):
    for r in report["kernels"]:
        occ = r["occupancy"]
        assert r["threads_per_block"] == cc.launch_threads()[r["kernel"]]
        assert occ["gpu"] == cc.LIMITS[r["arch"]].gpu and occ["blocks_per_sm"] >= 1, r
        assert 0 < occ["occupancy"] <= 1 and 0 < r["registers"] <= 255, r


def test_the_cli_reports_every_kernel_and_writes_the_json(report, tmp_path):
    from lsm_gnn.check.cli import check

    out = tmp_path / "compile.json"
    res = CliRunner().invoke(check, ["compile", "--arch", "sm_80,sm_90", "--json", str(out)])
    assert res.exit_code == 0, res.output
    saved = json.loads(out.read_text())
    assert saved["ok"] and saved["archs"] == ["sm_80", "sm_90"]
    assert {(r["kernel"], r["arch"]) for r in saved["kernels"]} == {(r["kernel"], r["arch"]) for r in report["kernels"]}
    for r in report["kernels"]:
        assert r["kernel"] in res.output
    n = len(translation_units()) * len(cc.ARCHS)
    assert "occupancy" in res.output and f"{n} of {n} compiled cleanly" in res.output


def test_a_warning_fails_the_unit(report):
    """A source nvcc warns about (an unused variable) is not ok, with the warning reported."""
    src = 'extern "C" __global__ void warn_me(int* a) { int unused = 3; a[threadIdx.x] = 1; }\n'
    res = cc.compile_unit(report["nvcc"], "warning probe", src, "sm_80")
    assert res["returncode"] == 0 and res["warnings"] and not res["ok"]


def test_an_error_fails_the_unit_and_names_the_line(report):
    src = 'extern "C" __global__ void broken(int* a) { a[threadIdx.x] = undefined_name; }\n'
    res = cc.compile_unit(report["nvcc"], "error probe", src, "sm_90")
    assert res["returncode"] != 0 and not res["ok"]
    assert any("undefined_name" in e for e in res["errors"]), res["errors"]


# ---- without nvcc -----------------------------------------------------------------------------
def test_the_cli_without_any_compiler_exits_2_and_says_so(monkeypatch):
    from lsm_gnn.check import nvrtc
    from lsm_gnn.check.cli import check

    monkeypatch.setattr(cc, "find_nvcc", lambda: None)
    monkeypatch.setattr(nvrtc, "nvrtc_version", lambda: (None, "ImportError: no cupy"))
    res = CliRunner().invoke(check, ["compile"])
    assert res.exit_code == 2 and "neither nvcc" in res.output


def test_an_unknown_architecture_is_a_clear_error():
    from lsm_gnn.check.cli import check

    res = CliRunner().invoke(check, ["compile", "--arch", "sm_75"])
    assert res.exit_code == 2 and "sm_75" in res.output and "sm_80" in res.output


def test_the_engines_compile_with_the_options_the_check_uses(monkeypatch):
    """cupy.RawModule receives cuda_sources.COMPILE_OPTIONS from both engines (a stand-in module
    records the call), and the check's flags are those options plus target and report only."""
    from lsm_gnn.cache import gpu_engine
    from lsm_gnn.multidevice import gpu as md_gpu

    seen = []
    fake = types.SimpleNamespace(RawModule=lambda code, options: seen.append((code, tuple(options))),
                                 is_available=lambda: True)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(gpu_engine, "_cupy", lambda: fake)
    gpu_engine._compiled.__wrapped__(())  # uncached: the module of the registry as it is
    for name in md_gpu.SOURCES:
        md_gpu._module.__wrapped__(name)
    units = translation_units()
    assert [code for code, _ in seen] == [src for src, _ in units.values()]
    assert {opts for _, opts in seen} == {cuda_sources.COMPILE_OPTIONS}
    for arch in cc.ARCHS:
        assert cc.nvcc_flags(arch)[: len(cuda_sources.COMPILE_OPTIONS)] == list(cuda_sources.COMPILE_OPTIONS)
        assert cc.nvcc_flags(arch)[len(cuda_sources.COMPILE_OPTIONS):] == ["-cubin", f"-arch={arch}", "-Xptxas", "-v"]


def test_launch_sizes_cover_exactly_the_kernels_of_the_programs():
    defined = {k for src, _ in translation_units().values() for k in cuda_sources.kernels(src)}
    assert set(cc.launch_threads()) == defined


# ---- the parts, on fixed inputs ---------------------------------------------------------------
PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'k_spill' for 'sm_80'
ptxas info    : Function properties for k_spill
    40 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'k_plain' for 'sm_80'
ptxas info    : Function properties for k_plain
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 18 registers, used 0 barriers, 360 bytes cmem[0]
"""


def test_ptxas_reports_are_read_per_entry_kernel():
    got = cc.parse_ptxas(PTXAS)
    assert got == {
        "k_spill": {"registers": 255, "spill_stores": 24, "spill_loads": 16, "stack": 40, "smem": 2048},
        "k_plain": {"registers": 18, "spill_stores": 0, "spill_loads": 0, "stack": 0, "smem": 0},
    }


@pytest.mark.parametrize("regs,smem,threads,arch,blocks,occ,limit", [
    (32, 0, 256, "sm_80", 8, 1.0, "threads"),           # 2048 threads / 256
    (128, 0, 256, "sm_80", 2, 0.25, "registers"),       # 4096 regs per warp: 4 warps per sub-partition
    (56, 0, 128, "sm_80", 9, 36 / 64, "registers"),     # 1792 per warp: 9 warps per sub-partition
    (10, 0, 1, "sm_90", 32, 0.5, "blocks"),             # one-thread blocks: 32 blocks, a warp each
    (16, 48 * 1024, 256, "sm_80", 3, 24 / 64, "shared memory"),   # 164 KiB / (48 KiB + 1 KiB)
    (16, 48 * 1024, 256, "sm_90", 4, 32 / 64, "shared memory"),   # 228 KiB / 49 KiB
])
def test_occupancy_follows_the_register_thread_block_and_shared_memory_limits(regs, smem, threads, arch, blocks,
                                                                              occ, limit):
    got = cc.occupancy(regs, smem, threads, cc.LIMITS[arch])
    assert got["blocks_per_sm"] == blocks and got["occupancy"] == pytest.approx(occ)
    assert limit in got["limited_by"]

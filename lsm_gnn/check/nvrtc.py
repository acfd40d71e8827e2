"""The programs of the GPU engines (`translation_units`), and their compile with NVRTC; no GPU needed.

lsm_gnn.check.compile compiles them with nvcc for real architectures (what CI runs); NVRTC here is
`lsm-gnn check compile`'s fallback where nvcc is absent.

Needs CuPy and the NVRTC library (e.g. `pip install cupy-cuda13x nvidia-cuda-nvrtc` in a scratch
venv): CuPy's RawModule cannot compile without a driver, but its low-level NVRTC binding can. The
programs are `translation_units()`, exactly what the engines compile (the NVRTC compile check,
`lsm-gnn check compile`, the CUDA stand-in's tests and the wheel test compile these, and check that
together they use every source); each `extern "C" __global__` kernel must appear as an entry in
the PTX.
"""

from __future__ import annotations

import re

from lsm_gnn.cache import gpu_codegen
from lsm_gnn.multidevice import gpu
from lsm_gnn.utils import cuda_sources


def translation_units() -> dict[str, tuple[str, list[str]]]:
    """Every program the GPU engines compile: name -> (source text, the files it is made of)."""
    units = {"cache module": (gpu_codegen.module_source(), gpu_codegen.module_files())}
    for name in gpu.SOURCES:
        units[name] = (gpu.module_source(name), gpu.module_files(name))
    return units


def nvrtc_version() -> tuple[tuple[int, int] | None, str]:
    """(NVRTC version, "") or (None, why it is not usable here)."""
    try:
        from cupy.cuda import nvrtc

        return tuple(nvrtc.getVersion()), ""
    except Exception as exc:  # noqa: BLE001 - no CuPy, or no libnvrtc
        return None, f"{type(exc).__name__}: {exc}"


def compile_source(name: str, src: str, arch: str) -> tuple[bool, str]:
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(src, name, (), ())
    try:
        try:
            nvrtc.compileProgram(prog, list(cuda_sources.COMPILE_OPTIONS) + [f"-arch={arch}"])
        except nvrtc.NVRTCError as exc:
            return False, f"{exc}\n{nvrtc.getProgramLog(prog)}"
        ptx = nvrtc.getPTX(prog)
        ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
        entries = set(re.findall(r"\.entry\s+(\w+)", ptx))
        missing = [k for k in cuda_sources.kernels(src) if k not in entries]
        if missing:
            return False, f"kernels missing from the PTX: {missing}"
        log = nvrtc.getProgramLog(prog).strip()
        return True, f"{len(entries)} kernels, {len(ptx)} bytes of PTX" + (f"; log: {log}" if log else "")
    finally:
        nvrtc.destroyProgram(prog)

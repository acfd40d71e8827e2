#!/usr/bin/env python
"""Compile-check the CUDA sources in cuda/ with NVRTC; no GPU or driver needed.

Usage:  python cuda/check_compile.py [--arch compute_80] [FILE.cu ...]

Needs CuPy and the NVRTC library (e.g. `pip install cupy-cuda13x==14.2.0 nvidia-cuda-nvrtc==13.*`
in a scratch venv). CuPy's RawModule cannot compile without a driver, but its low-level NVRTC
binding can. Every `cache_*.cu` is compiled with the headers prepended (`cache_common.cuh`, each
policy's `policies/*.cuh`, `policy_hooks.cuh`), exactly as lsm_gnn/cache/gpu_engine.py loads it, and so is the combined cache module (all cache sources in
one translation unit, as the engine builds it: this catches duplicate definitions). Each
`extern "C" __global__` kernel must appear as an entry in the PTX. Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

CUDA_DIR = Path(__file__).resolve().parent
COMMON = "cache_common.cuh"
KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


def headers() -> str:
    """The headers of every cache source, in gpu_engine.header_paths()'s order."""
    paths = [CUDA_DIR / COMMON] + sorted((CUDA_DIR / "policies").glob("*.cuh")) + [CUDA_DIR / "policy_hooks.cuh"]
    return "\n".join(p.read_text() for p in paths)


def source_of(path: Path) -> str:
    text = path.read_text()
    if path.name.startswith("cache_") and path.suffix == ".cu":
        return headers() + "\n" + text
    return text


def cache_module_source() -> str:
    parts = [headers()]
    parts += [p.read_text() for p in sorted(CUDA_DIR.glob("cache_*.cu"))]
    return "\n".join(parts)


def compile_source(name: str, src: str, arch: str) -> tuple[bool, str]:
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(src, name, (), ())
    try:
        try:
            nvrtc.compileProgram(prog, ["-std=c++11", f"-arch={arch}"])
        except nvrtc.NVRTCError as exc:
            return False, f"{exc}\n{nvrtc.getProgramLog(prog)}"
        ptx = nvrtc.getPTX(prog)
        ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
        entries = set(re.findall(r"\.entry\s+(\w+)", ptx))
        missing = [k for k in KERNEL_RE.findall(src) if k not in entries]
        if missing:
            return False, f"kernels missing from the PTX: {missing}"
        log = nvrtc.getProgramLog(prog).strip()
        return True, f"{len(entries)} kernels, {len(ptx)} bytes of PTX" + (f"; log: {log}" if log else "")
    finally:
        nvrtc.destroyProgram(prog)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="compute_80", help="virtual architecture (default compute_80)")
    ap.add_argument("files", nargs="*", type=Path, help="sources (default: every cuda/*.cu)")
    args = ap.parse_args(argv)
    try:
        from cupy.cuda import nvrtc

        version = nvrtc.getVersion()
    except Exception as exc:  # no CuPy, or no libnvrtc
        print(f"check_compile: NVRTC is not usable here ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    files = args.files or sorted(CUDA_DIR.glob("*.cu"))
    jobs = [(p.name, source_of(p)) for p in files]
    if not args.files:
        jobs.append(("<cache module>", cache_module_source()))
    print(f"NVRTC {version[0]}.{version[1]}, -arch={args.arch}")
    failed = 0
    for name, src in jobs:
        ok, msg = compile_source(name, src, args.arch)
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {msg}")
    print(f"{len(jobs) - failed} of {len(jobs)} compiled")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

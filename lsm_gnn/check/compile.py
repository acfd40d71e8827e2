"""Compile every program of the GPU engines for real GPUs with nvcc, and read each kernel's resources.

The programs are `lsm_gnn.check.nvrtc.translation_units()`, exactly what the engines compile, with
exactly their options (`cuda_sources.COMPILE_OPTIONS`, what the engines give cupy.RawModule);
the check adds only the target (`-cubin -arch=sm_XX`: machine code for that GPU, through ptxas,
as the driver would produce it) and ptxas' resource report (`-Xptxas -v`, which changes no code).
Why nvcc rather than NVRTC (the run-time compiler CuPy uses): nvcc is on every machine of the
project (CI included) while NVRTC needs CuPy or a CUDA wheel that CI does not install; both are
the same CUDA release's front end (NVVM) and ptxas, so what nvcc rejects or spills for sm_80 /
sm_90, NVRTC does too. Where nvcc is absent, `lsm-gnn check compile` falls back to NVRTC through
CuPy (errors and the kernel list only, no resource report).

Per kernel: registers, spill stores / loads (bytes), stack frame, static shared memory, and the
occupancy those imply at the block size the engine launches the kernel with (LAUNCH_THREADS of
lsm_gnn.cache.gpu_engine and lsm_gnn.multidevice.gpu), on an A100 (sm_80) and an H100 (sm_90).
The per-SM limits are NVIDIA's CUDA C++ Programming Guide, "Compute Capabilities", Table
"Technical Specifications per Compute Capability" (8.0 and 9.0); the rounding (registers in units
of 256 per warp over 4 sub-partitions, shared memory in units of 128 bytes plus 1 KiB reserved per
block) is NVIDIA's occupancy calculator, cuda_occupancy.h in the CUDA toolkit.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lsm_gnn.cache import gpu_engine
from lsm_gnn.check.nvrtc import translation_units
from lsm_gnn.multidevice import gpu as md_gpu
from lsm_gnn.utils import cuda_sources

ARCHS = ("sm_80", "sm_90")
# kernel -> why a spill is acceptable; a spill of a kernel not listed here fails the check
SPILL_ALLOWED: dict[str, str] = {}


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits of one GPU (CUDA C++ Programming Guide, Technical Specifications per Compute
    Capability) and the allocation rules of cuda_occupancy.h."""

    gpu: str
    regs: int = 65536            # 32-bit registers per SM (and per block)
    threads: int = 2048          # resident threads per SM
    blocks: int = 32             # resident blocks per SM
    smem: int = 164 * 1024       # shared memory per SM usable by blocks, bytes
    warp: int = 32
    reg_unit: int = 256          # registers are allocated per warp in units of 256
    sub_partitions: int = 4      # register file split across 4 sub-partitions
    smem_unit: int = 128         # shared memory allocation granularity, bytes
    smem_reserved: int = 1024    # shared memory the system reserves per block (cc >= 8.0)
    max_regs_per_thread: int = 255


LIMITS = {"sm_80": SmLimits("A100", smem=164 * 1024), "sm_90": SmLimits("H100", smem=228 * 1024)}


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(registers: int, smem: int, threads: int, lim: SmLimits) -> dict:
    """Resident blocks per SM and the occupancy (resident warps / max warps) of a kernel using
    `registers` per thread and `smem` static shared bytes per block, launched with `threads`."""
    warps = -(-threads // lim.warp)
    by = {"threads": lim.threads // (warps * lim.warp), "blocks": lim.blocks}
    per_warp = _round_up(registers * lim.warp, lim.reg_unit)
    if registers > lim.max_regs_per_thread or per_warp * _round_up(warps, lim.sub_partitions) > lim.regs:
        by["registers"] = 0
    elif per_warp:
        by["registers"] = (lim.regs // lim.sub_partitions // per_warp) * lim.sub_partitions // warps
    smem_block = _round_up(smem + lim.smem_reserved, lim.smem_unit)
    by["shared memory"] = lim.smem // smem_block
    blocks = min(by.values())
    limiter = sorted(k for k, v in by.items() if v == blocks)
    max_warps = lim.threads // lim.warp
    return {"gpu": lim.gpu, "threads_per_block": threads, "blocks_per_sm": blocks,
            "warps_per_sm": blocks * warps, "occupancy": blocks * warps / max_warps, "limited_by": limiter}


def launch_threads() -> dict[str, int]:
    """Every kernel of the engines -> the threads per block it is launched with."""
    return {**gpu_engine.LAUNCH_THREADS, **md_gpu.LAUNCH_THREADS}


def find_nvcc() -> str | None:
    """nvcc on the PATH, else under $CUDA_HOME / /usr/local/cuda."""
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return None


def nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    return f"{m.group(1)} ({m.group(2)})" if m else out.strip().splitlines()[-1] if out.strip() else "unknown"


def nvcc_flags(arch: str) -> list[str]:
    """The engines' options, plus the target and the resource report."""
    return list(cuda_sources.COMPILE_OPTIONS) + ["-cubin", f"-arch={arch}", "-Xptxas", "-v"]


_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\w+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict[str, dict]:
    """ptxas -v's report -> entry kernel -> registers, spill_stores, spill_loads, stack, smem
    (bytes). Device functions that were not inlined have properties but no entry: left out."""
    out: dict[str, dict] = {}
    current = props = None
    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            out[current] = {"registers": 0, "spill_stores": 0, "spill_loads": 0, "stack": 0, "smem": 0}
            continue
        m = _PROPS.search(line)
        if m:
            props = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and props in out:
            out[props].update(stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
            continue
        m = _USED.search(line)
        if m and current in out:
            out[current]["registers"] = int(m.group(1))
            s = _SMEM.search(line)
            out[current]["smem"] = int(s.group(1)) if s else 0
    return out


def diagnostics(text: str) -> tuple[list[str], list[str]]:
    """(errors, warnings): the compiler's lines that say so (ptxas' "info" lines are neither)."""
    errors, warnings = [], []
    for line in text.splitlines():
        low = line.lower()
        if "ptxas info" in low:
            continue
        if re.search(r"\berror\b", low):
            errors.append(line.strip())
        elif re.search(r"\bwarning\b", low):
            warnings.append(line.strip())
    return errors, warnings


@lru_cache(maxsize=None)
def compile_unit(nvcc: str, name: str, src: str, arch: str) -> dict:
    """nvcc one program for one architecture: ok, returncode, errors, warnings, kernels (ptxas' report
    per entry kernel), missing (extern "C" kernels without an entry in the cubin)."""
    with tempfile.TemporaryDirectory(prefix="lsm-gnn-nvcc-") as tmp:
        cu = Path(tmp) / (re.sub(r"\W+", "_", name) + ".cu")
        cu.write_text(src)
        cmd = [nvcc] + nvcc_flags(arch) + ["-o", str(cu.with_suffix(".cubin")), str(cu)]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    text = (p.stdout + "\n" + p.stderr).replace(tmp, "<tmp>")
    errors, warnings = diagnostics(text)
    if p.returncode and not errors:
        errors = [f"nvcc exited {p.returncode}: {text.strip()[-2000:]}"]
    kernels = parse_ptxas(text) if not p.returncode else {}
    missing = [] if p.returncode else [k for k in cuda_sources.kernels(src) if k not in kernels]
    return {"unit": name, "arch": arch, "ok": not p.returncode and not errors and not warnings and not missing,
            "returncode": p.returncode, "errors": errors, "warnings": warnings, "missing": missing,
            "kernels": kernels, "command": " ".join(["nvcc"] + nvcc_flags(arch) + ["-o", "<unit>.cubin", "<unit>.cu"])}


def run(archs=ARCHS, nvcc: str | None = None) -> dict:
    """Compile every program for every architecture; the report `lsm-gnn check compile --json`
    writes. ok: no error, no warning, every kernel compiled, no spill outside SPILL_ALLOWED."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("nvcc is not on the PATH (nor under $CUDA_HOME/bin or /usr/local/cuda/bin)")
    for arch in archs:
        if arch not in LIMITS:
            raise ValueError(f"--arch: expected some of {sorted(LIMITS)}, found {arch!r}")
    threads = launch_threads()
    units, rows, problems = [], [], []
    for name, (src, files) in translation_units().items():
        for arch in archs:
            res = compile_unit(nvcc, name, src, arch)
            units.append({k: res[k] for k in ("unit", "arch", "ok", "errors", "warnings", "missing", "command")}
                         | {"files": files})
            problems += [f"{name} ({arch}): {m}" for m in res["errors"] + res["warnings"]]
            problems += [f"{name} ({arch}): kernel {k} has no entry in the cubin" for k in res["missing"]]
            for kernel, r in sorted(res["kernels"].items()):
                block = threads.get(kernel)
                row = {"kernel": kernel, "unit": name, "arch": arch, **r, "threads_per_block": block,
                       "occupancy": occupancy(r["registers"], r["smem"], block, LIMITS[arch]) if block else None}
                if block is None:
                    problems.append(f"{kernel} ({arch}): no launch size in the engines' LAUNCH_THREADS")
                if (r["spill_stores"] or r["spill_loads"]) and kernel not in SPILL_ALLOWED:
                    problems.append(f"{kernel} ({arch}): {r['spill_stores']} bytes spill stores, "
                                    f"{r['spill_loads']} bytes spill loads")
                if kernel in SPILL_ALLOWED:
                    row["spill_allowed"] = SPILL_ALLOWED[kernel]
                rows.append(row)
    return {"compiler": f"nvcc {nvcc_version(nvcc)}", "nvcc": nvcc, "options": list(cuda_sources.COMPILE_OPTIONS),
            "flags": {a: nvcc_flags(a) for a in archs}, "archs": list(archs), "sources": cuda_sources.where(),
            "limits": {a: LIMITS[a].__dict__ for a in archs}, "units": units, "kernels": rows,
            "problems": problems, "ok": not problems and all(u["ok"] for u in units)}


def table(report: dict) -> str:
    """The human table: one line per kernel and architecture."""
    head = f"{'kernel':<26} {'arch':<6} {'regs':>4} {'spill st/ld':>11} {'stack':>5} {'smem':>5} " \
           f"{'threads':>7} {'blocks/SM':>9} {'occupancy':>9}  limited by"
    lines = [head, "-" * len(head)]
    for r in report["kernels"]:
        occ = r["occupancy"] or {}
        lines.append(f"{r['kernel']:<26} {r['arch']:<6} {r['registers']:>4} "
                     f"{str(r['spill_stores']) + '/' + str(r['spill_loads']):>11} {r['stack']:>5} {r['smem']:>5} "
                     f"{r['threads_per_block'] or '?':>7} {occ.get('blocks_per_sm', '?'):>9} "
                     f"{occ.get('occupancy', 0):>9.0%}  {', '.join(occ.get('limited_by', []))}")
    return "\n".join(lines)

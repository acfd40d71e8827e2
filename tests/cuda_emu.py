"""A CPU stand-in for the slice of CuPy that lsm_gnn.cache.gpu_engine uses, for tests without a GPU.

`fake_cupy()` returns a module-like object: arrays are NumPy arrays of a marker subclass
(`.get()` copies to the host), and `RawModule(code=...)` compiles the CUDA C source with the host
C++ compiler after a small prelude that maps the CUDA built-ins to host code:

* a kernel launch runs its blocks, and the threads of a block, in a seeded random order, so a
  kernel whose result depends on thread order shows it;
* kernels that use warp intrinsics (`__shfl*_sync`, `__syncwarp`) run the 32 lanes of a warp
  as coroutines (ucontext) on one host thread; every intrinsic is a barrier where all lanes
  meet, and a lane that returns while others wait at one aborts the run (a divergent barrier);
* everything runs on one host thread, so atomics are plain read-modify-writes.

It checks the kernels' logic and the engine's host code (launch arguments, scans, sorts); it
does not check CUDA's memory model, occupancy or speed: the GPU tests (`@pytest.mark.gpu`) do that on a GPU.
"""

from __future__ import annotations

import ctypes
import hashlib
import re
import shutil
import subprocess
import tempfile
import types
from pathlib import Path

import numpy as np

PRELUDE = r"""
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>
#include <algorithm>
#include <ucontext.h>
struct emu_dim3 { unsigned x, y, z; };
struct uint4 { unsigned int x, y, z, w; };   // CUDA's 16-byte vector type (the row copies' unit)
static emu_dim3 threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
// warp mode: the 32 lanes are coroutines on one host thread; every warp intrinsic is a barrier
// where a lane yields to the scheduler, which resumes the lanes round by round
static ucontext_t emu_sched, emu_lane[32];
static char emu_stack[32][1 << 16];
static int emu_cur = -1;
static bool emu_done[32];
static const std::function<void()>* emu_body = nullptr;
static uint64_t emu_slots[32];
static void emu_barrier() {
    if (emu_cur < 0) { std::fprintf(stderr, "cuda_emu: warp intrinsic outside warp mode\n"); std::abort(); }
    swapcontext(&emu_lane[emu_cur], &emu_sched);
}
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_barrier(); }
template <class T> static T emu_exchange(T v, int src_lane) {
    uint64_t raw = 0; std::memcpy(&raw, &v, sizeof(T));
    emu_slots[threadIdx.x & 31] = raw;
    emu_barrier();
    uint64_t got = emu_slots[src_lane & 31];
    emu_barrier();
    T out; std::memcpy(&out, &got, sizeof(T)); return out;
}
template <class T> static T __shfl_xor_sync(unsigned, T v, int off) { return emu_exchange(v, (threadIdx.x & 31) ^ off); }
template <class T> static T __shfl_sync(unsigned, T v, int src) { return emu_exchange(v, src); }
static int atomicMin(int* p, int v) { int old = *p; if (v < old) *p = v; return old; }
static unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    unsigned long long old = *p; if (v < old) *p = v; return old;
}
static unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    unsigned long long old = *p; *p = old + v; return old;
}
static void emu_lane_entry() { (*emu_body)(); emu_done[emu_cur] = true; }
static void emu_run_warp(unsigned b, unsigned w) {
    for (int l = 0; l < 32; ++l) {
        emu_done[l] = false;
        getcontext(&emu_lane[l]);
        emu_lane[l].uc_stack.ss_sp = emu_stack[l];
        emu_lane[l].uc_stack.ss_size = sizeof(emu_stack[l]);
        emu_lane[l].uc_link = &emu_sched;
        makecontext(&emu_lane[l], emu_lane_entry, 0);
    }
    for (;;) {
        for (int l = 0; l < 32; ++l) {
            if (emu_done[l]) continue;
            emu_cur = l; blockIdx = {b, 0, 0}; threadIdx = {w * 32 + l, 0, 0};
            swapcontext(&emu_sched, &emu_lane[l]);
        }
        int done = 0; for (int l = 0; l < 32; ++l) done += emu_done[l];
        if (done == 32) break;
        if (done) { std::fprintf(stderr, "cuda_emu: %d lanes left while others wait at a warp barrier\n", done); std::abort(); }
    }
    emu_cur = -1;
}
static void emu_run(unsigned gx, unsigned bx, int warp_mode, unsigned seed, const std::function<void()>& body) {
    gridDim = {gx, 1, 1}; blockDim = {bx, 1, 1};
    std::mt19937 rng(seed);
    std::vector<unsigned> blocks(gx); for (unsigned b = 0; b < gx; ++b) blocks[b] = b;
    std::shuffle(blocks.begin(), blocks.end(), rng);
    emu_body = &body;
    for (unsigned b : blocks) {
        if (!warp_mode) {
            std::vector<unsigned> ths(bx); for (unsigned i = 0; i < bx; ++i) ths[i] = i;
            std::shuffle(ths.begin(), ths.end(), rng);
            for (unsigned i : ths) { blockIdx = {b, 0, 0}; threadIdx = {i, 0, 0}; body(); }
            continue;
        }
        std::vector<unsigned> warps(bx / 32); for (unsigned w = 0; w < bx / 32; ++w) warps[w] = w;
        std::shuffle(warps.begin(), warps.end(), rng);
        for (unsigned w : warps) emu_run_warp(b, w);
    }
}
"""

_KERNEL_RE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)
_WARP_RE = re.compile(r"__shfl\w*_sync|__syncwarp")


def _ctype(decl: str):
    decl = " ".join(decl.split())
    if "*" in decl:
        return ctypes.c_void_p
    base = decl.rsplit(" ", 1)[0].replace("const ", "")
    return {"long long": ctypes.c_longlong, "int": ctypes.c_int, "unsigned int": ctypes.c_uint,
            "unsigned long long": ctypes.c_ulonglong}[base]


def _uses_warp(code: str, name: str, kernels: list[str]) -> bool:
    """True if kernel `name` (or a device function it may call) uses warp intrinsics: the
    kernel's body up to the next kernel, plus every device function before it that does."""
    start = code.index(f"void {name}(")
    nxt = [code.index(f"void {k}(") for k in kernels if code.index(f"void {k}(") > start]
    body = code[start: min(nxt) if nxt else len(code)]
    helpers = re.findall(r"__device__[^{;]*?(\w+)\s*\([^)]*\)\s*\{", code)
    warp_helpers = [h for h in helpers if _WARP_RE.search(_function_text(code, h))]
    return bool(_WARP_RE.search(body)) or any(re.search(rf"\b{h}\s*\(", body) for h in warp_helpers)


def _function_text(code: str, name: str) -> str:
    start = code.index(name + "(") if name + "(" in code else 0
    depth, i = 0, code.index("{", start)
    for j in range(i, len(code)):
        depth += {"{": 1, "}": -1}.get(code[j], 0)
        if depth == 0:
            return code[start: j + 1]
    return code[start:]


class _Module:
    def __init__(self, code: str, options=()):
        code = re.sub(r"//[^\n]*", "", code)  # kernel parameter lists are read as plain declarations
        kernels = _KERNEL_RE.findall(code)
        names = [k for k, _ in kernels]
        launchers = []
        self._sig = {}
        for name, params in kernels:
            decls = [p.strip() for p in params.split(",") if p.strip()]
            args = [re.findall(r"(\w+)\s*$", d)[0] for d in decls]
            self._sig[name] = ([_ctype(d) for d in decls], _uses_warp(code, name, names))
            launchers.append(
                f'extern "C" void emu_launch_{name}(unsigned gx, unsigned bx, int warp, unsigned seed'
                + "".join(", " + d for d in decls)
                + f") {{ emu_run(gx, bx, warp, seed, [&]() {{ {name}({', '.join(args)}); }}); }}")
        src = PRELUDE + code + "\n" + "\n".join(launchers) + "\n"
        digest = hashlib.sha1(src.encode()).hexdigest()[:16]
        cxx = shutil.which("g++") or shutil.which("c++")
        with tempfile.TemporaryDirectory(prefix="cuda-emu-") as tmp:
            cpp, so = Path(tmp) / f"m{digest}.cpp", Path(tmp) / f"m{digest}.so"
            cpp.write_text(src)
            p = subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", "-fno-strict-aliasing", "-w",
                                str(cpp), "-o", str(so)], capture_output=True, text=True)
            if p.returncode:
                raise RuntimeError(f"cuda_emu: the host compiler rejected the CUDA source:\n{p.stderr[-4000:]}")
            self._lib = ctypes.CDLL(str(so))  # stays mapped after the file is removed
        self._launches = 0

    def get_function(self, name: str):
        types_, warp = self._sig[name]
        fn = getattr(self._lib, f"emu_launch_{name}")
        fn.argtypes = [ctypes.c_uint, ctypes.c_uint, ctypes.c_int, ctypes.c_uint] + types_
        fn.restype = None

        def launch(grid, block, args):
            if len(args) != len(types_):
                raise TypeError(f"{name}: expected {len(types_)} arguments, got {len(args)}")
            conv = []
            for a, ct in zip(args, types_):
                if ct is ctypes.c_void_p:
                    if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
                        raise TypeError(f"{name}: pointer argument must be a contiguous array")
                    conv.append(a.ctypes.data)
                else:
                    if not isinstance(a, np.generic):
                        raise TypeError(f"{name}: scalar arguments must be NumPy scalars, got {type(a)}")
                    conv.append(int(a))
            if warp and block[0] % 32:
                raise ValueError(f"{name}: warp kernels need blockDim % 32 == 0")
            self._launches += 1
            fn(grid[0], block[0], int(warp), self._launches, *conv)

        return launch


class ndarray(np.ndarray):
    """A 'device' array: a NumPy array that knows `.get()`."""

    def get(self):
        return np.array(self)


def _dev(a):
    return np.asarray(a).view(ndarray)


def _poisoned_empty(n, dtype=float):
    """Uninitialised memory stands out: every byte 0xA5, not zeros."""
    a = np.empty(n, dtype=dtype)
    a.view(np.uint8)[...] = 0xA5
    return _dev(a)


def fake_cupy():
    """A module object with the CuPy names gpu_engine uses, backed by NumPy and g++."""
    if not (shutil.which("g++") or shutil.which("c++")):
        raise RuntimeError("the CUDA emulator needs a C++17 compiler (g++)")
    m = types.SimpleNamespace()
    m.ndarray = ndarray
    m.is_available = lambda: True
    m.RawModule = _Module
    for name in ("int8", "int32", "int64", "uint8", "uint32"):
        setattr(m, name, getattr(np, name))
    m.asarray = lambda a, dtype=None: _dev(np.ascontiguousarray(a, dtype=dtype) if dtype else np.asarray(a))
    m.ascontiguousarray = lambda a, dtype=None: _dev(np.ascontiguousarray(a, dtype=dtype))
    m.asnumpy = lambda a: np.array(a)
    m.full = lambda n, v, dtype=None: _dev(np.full(n, v, dtype=dtype))
    m.zeros = lambda n, dtype=float: _dev(np.zeros(n, dtype=dtype))
    m.empty = _poisoned_empty
    m.cumsum = lambda a: _dev(np.cumsum(a))
    m.sort = lambda a: _dev(np.sort(a))
    m.concatenate = lambda arrs: _dev(np.concatenate(arrs))
    return m

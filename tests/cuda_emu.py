"""A CPU stand-in for the slice of CuPy that lsm_gnn.cache.gpu_engine uses, for tests without a GPU.

`fake_cupy()` returns a module-like object: arrays are NumPy arrays of a marker subclass
(`.get()` copies to the host), and `RawModule(code=...)` compiles the CUDA C source with the host
C++ compiler after a small prelude that maps the CUDA built-ins to host code:

* a kernel launch runs its blocks, and the threads of a block, in a seeded random order, so a
  kernel whose result depends on thread order shows it;
* kernels that use warp intrinsics (`__shfl*_sync`, `__syncwarp`) run the 32 lanes of a warp
  as coroutines (ucontext) on one host thread; every intrinsic is a barrier where all lanes
  meet, and a lane that returns while others wait at one aborts the run (a divergent barrier);
* everything runs on one host thread, so atomics are plain read-modify-writes;
* the stream API the engine uses is synchronous underneath: `cuda.runtime.memcpyAsync` copies at
  once, events and streams are markers, and a stream capture (`Stream.begin_capture`) records
  the launches and copies (scalars by value, arrays by address, as a CUDA graph does) that
  `Graph.launch` replays;
* `no_host_sync()`: inside it (and inside a capture) any read of device memory by the host
  (`.get()`, `int()`, `bool()`, `.item()`, `.tolist()`, `asnumpy`, an event, stream or device
  synchronize) raises HostSyncError, which is how a test proves a step has none; an asynchronous
  copy (`memcpyAsync`) is a stream operation and allowed.

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
template <class T> static T __shfl_up_sync(unsigned, T v, unsigned d) {
    int lane = threadIdx.x & 31; return emu_exchange(v, lane >= (int)d ? lane - (int)d : lane);
}
static unsigned __ballot_sync(unsigned, int pred) {
    emu_slots[threadIdx.x & 31] = pred ? 1 : 0;
    emu_barrier();
    unsigned m = 0; for (int l = 0; l < 32; ++l) m |= (unsigned)(emu_slots[l] != 0) << l;
    emu_barrier();
    return m;
}
static int __popc(unsigned x) { return __builtin_popcount(x); }
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
_WARP_RE = re.compile(r"__shfl\w*_sync|__syncwarp|__ballot_sync")


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
            seed = self._launches
            _run_or_record(lambda: fn(grid[0], block[0], int(warp), seed, *conv))

        return launch


class HostSyncError(RuntimeError):
    """A host read of device memory where none may happen (no_host_sync, or a stream capture)."""


_STATE = {"no_sync": 0, "capture": None}


def _host_read(what: str) -> None:
    if _STATE["no_sync"] or _STATE["capture"] is not None:
        raise HostSyncError(f"cuda_emu: {what} reads device memory on the host inside a no-sync region")


def _run_or_record(op) -> None:
    """Run a device operation now, or record it into the stream capture under way."""
    if _STATE["capture"] is not None:
        _STATE["capture"].append(op)
    else:
        op()


class _Ptr:
    def __init__(self, ptr: int):
        self.ptr = ptr


class ndarray(np.ndarray):
    """A 'device' array: a NumPy array that knows `.get()` and `.data.ptr`."""

    def get(self):
        _host_read(".get()")
        return np.array(self)

    @property
    def data(self):
        return _Ptr(self.ctypes.data)

    def __getitem__(self, idx):
        out = super().__getitem__(idx)   # an element is a 0-d device array, as in CuPy
        return out if isinstance(out, np.ndarray) else np.asarray(out).view(ndarray)

    def __int__(self):
        _host_read("int()")
        return int(np.asarray(self).reshape(-1)[0]) if self.size == 1 else np.asarray(self).__int__()

    def __bool__(self):
        _host_read("bool()")
        return bool(np.asarray(self))

    def item(self, *args):
        _host_read(".item()")
        return np.asarray(self).item(*args)

    def tolist(self):
        _host_read(".tolist()")
        return np.asarray(self).tolist()


def _dev(a):
    return np.asarray(a).view(ndarray)


def _poisoned_empty(n, dtype=float):
    """Uninitialised memory stands out: every byte 0xA5, not zeros."""
    a = np.empty(n, dtype=dtype)
    a.view(np.uint8)[...] = 0xA5
    return _dev(a)


class _PinnedMemory(bytearray):
    """Pinned host memory (cupy.cuda.alloc_pinned_memory): a buffer with its address."""

    @property
    def ptr(self) -> int:
        return ctypes.addressof((ctypes.c_char * len(self)).from_buffer(self))


class _Stream:
    ptr = 0

    def __init__(self, non_blocking: bool = False):
        self.records = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def begin_capture(self, mode=None):
        if _STATE["capture"] is not None:
            raise RuntimeError("cuda_emu: a stream capture is already under way")
        _STATE["capture"] = []

    def end_capture(self):
        ops, _STATE["capture"] = _STATE["capture"], None
        return _Graph(ops)

    def synchronize(self):
        _host_read("Stream.synchronize()")


class _Graph:
    def __init__(self, ops):
        self.ops = ops

    def launch(self, stream=None):
        for op in self.ops:
            op()


class _Event:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, stream=None):
        pass

    def synchronize(self):
        _host_read("Event.synchronize()")

    @property
    def done(self):
        return True


def _memcpy_async(dst: int, src: int, size: int, kind: int, stream: int) -> None:
    """cudaMemcpyAsync: a stream operation, not a host wait (the host learns that a device-to-host
    copy is done only from an event or a synchronize, which no_host_sync forbids)."""
    _run_or_record(lambda: ctypes.memmove(dst, src, size))


class no_host_sync:
    """Context manager: any host read of device memory inside raises HostSyncError."""

    def __enter__(self):
        _STATE["no_sync"] += 1

    def __exit__(self, *exc):
        _STATE["no_sync"] -= 1
        return False


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
    def asnumpy(a):
        if isinstance(a, ndarray):
            _host_read("asnumpy")
        return np.array(a)

    m.asnumpy = asnumpy
    m.full = lambda n, v, dtype=None: _dev(np.full(n, v, dtype=dtype))
    m.zeros = lambda n, dtype=float: _dev(np.zeros(n, dtype=dtype))
    m.empty = _poisoned_empty
    m.cumsum = lambda a: _dev(np.cumsum(a))
    m.sort = lambda a: _dev(np.sort(a))
    m.concatenate = lambda arrs: _dev(np.concatenate(arrs))
    stream = _Stream()
    m.cuda = types.SimpleNamespace(
        Stream=_Stream, Event=_Event, get_current_stream=lambda: stream,
        alloc_pinned_memory=lambda n: _PinnedMemory(int(n)),
        runtime=types.SimpleNamespace(memcpyAsync=_memcpy_async),
        Device=lambda *a: types.SimpleNamespace(synchronize=lambda: _host_read("Device.synchronize()")))
    m.HostSyncError, m.no_host_sync = HostSyncError, no_host_sync
    return m

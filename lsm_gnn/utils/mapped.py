"""Host memory a GPU kernel reads and writes in place (zero-copy): pinned and mapped into the device.

A kernel that reads a row of mapped pinned host memory pulls it over PCIe itself: no staging copy,
no cudaMemcpy, no device buffer for it. LSM-GNN's fetch uses this for the rows read from storage
(the data plane's staging buffer: lsm_gnn.cache.device_pool, cuda/cache_serve.cu) and for the spills
into the victim queues; lsm_gnn.bench.cache's `zero_copy_gather_vs_memcpy` measures how fast a
warp-per-row kernel reads such memory against a DMA of the same bytes.

Two kinds of host memory:
* already pinned by CUDA (torch's `pin_memory=True`, cudaHostAlloc underneath: with unified
  addressing, every 64-bit CUDA platform, it is mapped too): only its device address is looked up;
* any other host buffer (a NumPy array, the in-memory feature array, a reader's staging): page-locked
  and mapped with cudaHostRegister(portable | mapped), unregistered by `close()`.

GPU-only: CuPy's runtime bindings (`cp` may be a stand-in with the same names, as in the tests).
A failed registration or lookup raises InputError naming the buffer, its size and CUDA's error.
"""

from __future__ import annotations

from lsm_gnn.utils.errors import InputError

HOST_REGISTER_PORTABLE, HOST_REGISTER_MAPPED = 1, 2   # cudaHostRegisterPortable, cudaHostRegisterMapped


def mapped_device_pointer(cp, host_ptr: int) -> int:
    """The device address of pinned, mapped host memory: cudaHostGetDevicePointer where CuPy has it,
    else the pointer's attributes (cudaPointerGetAttributes gives the same for registered memory)."""
    rt = cp.cuda.runtime
    get = getattr(rt, "hostGetDevicePointer", None)
    return int(get(host_ptr, 0)) if get is not None else int(rt.pointerGetAttributes(host_ptr).devicePointer)


def _cupy():
    try:
        import cupy
    except ImportError as e:
        raise InputError("mapped pinned host memory needs CuPy (the `gpu` extra: cupy-cuda13x)") from e
    return cupy


class MappedHost:
    """`nbytes` of host memory at `host_ptr`, mapped into the device: `device_ptr` is where a
    kernel reads it. `pinned`: the memory is already page-locked by CUDA (torch pinned memory),
    so it is only looked up; otherwise it is registered here and unregistered by `close()`."""

    def __init__(self, host_ptr: int, nbytes: int, *, pinned: bool, what: str = "host buffer", cp=None):
        self.cp = cp if cp is not None else _cupy()
        self.host_ptr, self.nbytes, self.what = int(host_ptr), int(nbytes), what
        self.registered = False
        rt = self.cp.cuda.runtime
        if not pinned and self.nbytes:
            try:
                rt.hostRegister(self.host_ptr, self.nbytes, HOST_REGISTER_PORTABLE | HOST_REGISTER_MAPPED)
            except Exception as e:  # noqa: BLE001 - CUDARuntimeError, or a stand-in's error
                raise InputError(f"could not register the {what} ({self.nbytes} bytes at {self.host_ptr:#x}) as "
                                 f"mapped pinned memory (cudaHostRegister portable|mapped): {e}; the host may "
                                 f"lack the memory to lock (ulimit -l) or the device mapped host memory") from e
            self.registered = True
        try:
            self.device_ptr = mapped_device_pointer(self.cp, self.host_ptr) if self.nbytes else 0
        except Exception as e:  # noqa: BLE001
            self.close()
            raise InputError(f"the {what} ({self.nbytes} bytes at {self.host_ptr:#x}) has no device address "
                             f"(cudaHostGetDevicePointer): {e}; is it pinned memory of this process?") from e

    def close(self) -> None:
        if self.registered:
            self.registered = False
            self.cp.cuda.runtime.hostUnregister(self.host_ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def map_tensor(t, *, what: str = "host buffer", cp=None) -> MappedHost:
    """A host tensor (or NumPy array) mapped into the device: looked up where torch pinned it,
    registered otherwise (then `close()` the result when done)."""
    if hasattr(t, "data_ptr"):
        ptr, nbytes, pinned = t.data_ptr(), t.numel() * t.element_size(), bool(t.is_pinned())
    else:
        ptr, nbytes, pinned = t.ctypes.data, t.nbytes, False
    return MappedHost(ptr, nbytes, pinned=pinned, what=what, cp=cp)

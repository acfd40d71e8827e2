"""GPU engine of the owner split and the reorder (CuPy RawModule over `cuda/owner_split.cu`, `cuda/reorder.cu`).

Import-safe without CuPy or a GPU: `available()` says whether the engine can run, and the
functions raise `InputError` when it cannot. Decisions are identical to `lsm_gnn.ownership`'s:
a stable split (bucket order = input order) and `out[positions[k]] = rows[k]`.

`split_by_owner_tensor` and `reorder_tensor` run the same kernels on torch tensors without a copy
(DLPack), on torch's current stream and device, so they are ordered with the torch work around
them: what the shared cache's device data plane (lsm_gnn.sources.shared) calls. Tensors on
the CPU go through NumPy: that is how tests/cuda_emu.py runs them without a GPU.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache

from lsm_gnn.utils import cuda_sources, rowcopy
from lsm_gnn.utils.errors import InputError

SOURCES = ("owner_split.cu", "reorder.cu")   # each its own program
CHUNK = 256          # ids per thread in the split: bounds the serial work per thread
THREADS = 128
MAX_OWNERS = 64      # must match cuda/owner_split.cu
HEADERS = {"reorder.cu": ("row_copy.cuh",)}   # prepended to a program (the row-copy loop)
# threads per block of every kernel, as launched (the compile check's occupancy reads this)
LAUNCH_THREADS = {"owner_chunk_count": THREADS, "owner_chunk_scatter": THREADS,
                  **dict.fromkeys(rowcopy.kernel_names("reorder_rows"), rowcopy.THREADS)}


def available() -> bool:
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:
        return False


def module_files(name: str) -> list[str]:
    """The files of the program of one of SOURCES, in order: its headers, then the file."""
    return list(HEADERS.get(name, ())) + [name]


def module_source(name: str) -> str:
    """The program of one of SOURCES: its headers prepended to the file (no #include, so CuPy's
    kernel cache, keyed on the source text, sees a change of a header)."""
    return "\n".join(cuda_sources.read(f) for f in module_files(name))


@lru_cache(maxsize=None)
def _module(name: str):
    import cupy

    return cupy.RawModule(code=module_source(name), options=cuda_sources.COMPILE_OPTIONS)


def _require():
    if not available():
        raise InputError("the GPU engine needs CuPy and a CUDA GPU (cupy.is_available() is False)")
    import cupy

    return cupy


def split_by_owner_gpu(ids, num_owners: int):
    """(send_ids, positions, counts) as CuPy int64 arrays; same result as ownership.split_by_owner."""
    cp = _require()
    if not 1 <= num_owners <= MAX_OWNERS:
        raise InputError(f"num_owners must be in [1, {MAX_OWNERS}], found {num_owners}")
    ids = cp.ascontiguousarray(cp.asarray(ids, dtype=cp.int64))
    n = int(ids.size)
    n_chunks = max(1, -(-n // CHUNK))
    mod = _module("owner_split.cu")
    counts = cp.zeros(num_owners * n_chunks, dtype=cp.int64)
    grid = (-(-n_chunks // THREADS),)
    args = (ids, cp.int64(n), cp.int32(num_owners), cp.int64(CHUNK), cp.int64(n_chunks))
    mod.get_function("owner_chunk_count")(grid, (LAUNCH_THREADS["owner_chunk_count"],), args + (counts,))
    starts = cp.cumsum(counts) - counts  # exclusive scan over the owner-major table
    send_ids = cp.empty(n, dtype=cp.int64)
    positions = cp.empty(n, dtype=cp.int64)
    mod.get_function("owner_chunk_scatter")(grid, (LAUNCH_THREADS["owner_chunk_scatter"],),
                                            args + (starts, send_ids, positions))
    per_owner = counts.reshape(num_owners, n_chunks).sum(axis=1)
    return send_ids, positions, per_owner


def reorder_gpu(rows, positions, out=None):
    """out[positions[k]] = rows[k] for a 2-D CuPy array of rows."""
    cp = _require()
    rows = cp.ascontiguousarray(rows)
    positions = cp.ascontiguousarray(cp.asarray(positions, dtype=cp.int64))
    if rows.ndim != 2 or rows.shape[0] != positions.size:
        raise InputError(f"reorder: expected ({positions.size}, dim) rows, found {rows.shape}")
    if out is None:
        out = cp.empty_like(rows)
    n = rows.shape[0]
    if n == 0:
        return out
    # the unit (16, 8, 4 or 1 bytes) and the rows per block: lsm_gnn.utils.rowcopy.plan
    p = rowcopy.plan(n, rows.shape[1] * rows.dtype.itemsize, rowcopy.address(rows), rowcopy.address(out))
    fn = _module("reorder.cu").get_function(p.kernel("reorder_rows"))
    fn((p.blocks,), (rowcopy.THREADS,), (rows, positions, out, cp.int64(n), cp.int64(p.row_units), cp.int32(p.shift)))
    return out


# ---- torch tensors -----------------------------------------------------------------------------
def _as_cupy(cp, t):
    """A CuPy view of tensor `t` (no copy); a CPU tensor through NumPy (the emulator)."""
    if t.device.type == "cpu":
        return cp.asarray(t.numpy())
    return cp.from_dlpack(t.contiguous())


def _as_torch(a, device):
    import numpy as np
    import torch

    if device.type == "cpu":
        return torch.from_numpy(np.asarray(a))
    return torch.from_dlpack(a)


@contextmanager
def _on_torch_stream(cp, device):
    """CuPy's launches on torch's current stream and device (ordered with the torch work)."""
    if device.type != "cuda":
        yield
        return
    import torch

    ptr = torch.cuda.current_stream(device).cuda_stream
    stream = cp.cuda.ExternalStream(ptr) if ptr else cp.cuda.Stream.null
    with cp.cuda.Device(device.index if device.index is not None else torch.cuda.current_device()), stream:
        yield


def split_by_owner_tensor(ids, num_owners: int):
    """(send_ids, positions, counts) as int64 tensors on the device of `ids` (a 1-D int64
    tensor): the stable owner split of ownership.split_by_owner, by cuda/owner_split.cu."""
    import torch

    cp = _require()
    ids = ids.to(torch.int64).contiguous()
    with _on_torch_stream(cp, ids.device):
        send, pos, counts = split_by_owner_gpu(_as_cupy(cp, ids), num_owners)
        return tuple(_as_torch(a, ids.device) for a in (send, pos, counts))


def reorder_tensor(rows, positions, out=None):
    """out[positions[k]] = rows[k] for a 2-D tensor `rows` (any dtype), by cuda/reorder.cu, on
    the device of `rows`; `out` (same shape and dtype) is written in place, else allocated."""
    import torch

    cp = _require()
    rows = rows.contiguous()
    positions = positions.to(device=rows.device, dtype=torch.int64).contiguous()
    if out is None:
        out = torch.empty_like(rows)
    elif out.shape != rows.shape or out.dtype != rows.dtype or not out.is_contiguous():
        raise InputError(f"reorder: out must be a contiguous {tuple(rows.shape)} {rows.dtype} tensor, "
                         f"found {tuple(out.shape)} {out.dtype}")
    if rows.shape[0] == 0:
        return out
    # the kernels move raw bytes: view every dtype (bfloat16 too, which NumPy lacks) as bytes
    b_rows, b_out = rows.view(torch.uint8), out.view(torch.uint8)
    with _on_torch_stream(cp, rows.device):
        reorder_gpu(_as_cupy(cp, b_rows), _as_cupy(cp, positions), out=_as_cupy(cp, b_out))
    return out

"""GPU engine of the owner split and the reorder (CuPy RawModule over `cuda/*.cu`).

Import-safe without CuPy or a GPU: `available()` says whether the engine can run, and the
functions raise `InputError` when it cannot. Decisions are identical to `lsm_gnn.multidevice.owners`:
a stable split (bucket order = input order) and `out[positions[k]] = rows[k]`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from lsm_gnn.utils.errors import InputError

CUDA_DIR = Path(__file__).resolve().parents[2] / "cuda"
CHUNK = 256          # ids per thread in the split: bounds the serial work per thread
THREADS = 128
MAX_OWNERS = 64      # must match cuda/owner_split.cu


def available() -> bool:
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:
        return False


@lru_cache(maxsize=None)
def _module(name: str):
    import cupy

    src = (CUDA_DIR / name).read_text()
    return cupy.RawModule(code=src, options=("-std=c++11",))


def _require():
    if not available():
        raise InputError("the GPU engine needs CuPy and a CUDA GPU (cupy.is_available() is False)")
    import cupy

    return cupy


def split_by_owner_gpu(ids, num_owners: int):
    """(send_ids, positions, counts) as CuPy int64 arrays; same result as owners.split_by_owner."""
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
    mod.get_function("owner_chunk_count")(grid, (THREADS,), args + (counts,))
    starts = cp.cumsum(counts) - counts  # exclusive scan over the owner-major table
    send_ids = cp.empty(n, dtype=cp.int64)
    positions = cp.empty(n, dtype=cp.int64)
    mod.get_function("owner_chunk_scatter")(grid, (THREADS,), args + (starts, send_ids, positions))
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
    row_bytes = rows.shape[1] * rows.dtype.itemsize
    mod = _module("reorder.cu")
    if row_bytes % 4 == 0:
        fn, unit = mod.get_function("reorder_rows_words"), row_bytes // 4
        src, dst = rows.view(cp.uint32), out.view(cp.uint32)
    else:
        fn, unit = mod.get_function("reorder_rows_bytes"), row_bytes
        src, dst = rows.view(cp.uint8), out.view(cp.uint8)
    fn((n,), (min(256, max(32, unit)),), (src, positions, dst, cp.int64(n), cp.int64(unit)))
    return out

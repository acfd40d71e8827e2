"""The launch of a row copy on the GPU (cuda/row_copy.cuh): which unit, how many rows per block.

One rule for both GPU engines' row moves (lsm_gnn.cache.gpu_engine.copy_rows: the fetcher's
spill / PVP / victim-hit moves; lsm_gnn.multidevice.gpu.reorder_gpu: the shared cache's reorder):
the widest unit of UNITS that divides the row size and both base addresses (16 bytes: one
128-bit load and store per thread), and a group of threads per row (the power of two that covers
the row's units, at most a warp), THREADS per block, so short rows do not leave a block idle.
Pure Python: the CPU stand-in of the tests (tests/cuda_emu.py) launches the same shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

THREADS = 256            # threads per block of every row-copy kernel
UNITS = (16, 8, 4, 1)    # bytes per thread per load / store, widest first (kernel suffix _16 ...)
WARP = 32


@dataclass(frozen=True)
class CopyPlan:
    unit: int        # bytes per load / store
    row_units: int   # units per row
    shift: int       # log2 of the threads that copy one row
    blocks: int      # grid size for n rows

    @property
    def rows_per_block(self) -> int:
        return THREADS >> self.shift

    def kernel(self, prefix: str) -> str:
        return f"{prefix}_{self.unit}"


def plan(n: int, row_bytes: int, *addresses: int) -> CopyPlan:
    """The copy of `n` rows of `row_bytes` between arrays that start at `addresses`."""
    unit = next(u for u in UNITS if row_bytes % u == 0 and all(int(a) % u == 0 for a in addresses))
    row_units = row_bytes // unit
    group = 1
    while group < min(row_units, WARP):
        group *= 2
    shift = group.bit_length() - 1
    rows_per_block = THREADS >> shift
    return CopyPlan(unit, row_units, shift, -(-int(n) // rows_per_block))


def kernel_names(prefix: str) -> tuple[str, ...]:
    """Every kernel of a row copy, e.g. cache_copy_rows_16 ... cache_copy_rows_1."""
    return tuple(f"{prefix}_{u}" for u in UNITS)


def address(a) -> int:
    """The device address of a CuPy array (a NumPy array's in the CPU stand-in)."""
    data = a.data
    return int(data.ptr) if hasattr(data, "ptr") else int(a.ctypes.data)

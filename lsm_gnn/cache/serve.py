"""The serve step of the device data plane: one plan of a batch's row moves, two engines that run it.

The plan (`plan_batch`) says, with fixed-size arrays built from elementwise ops, gathers and one
cumsum only (no `nonzero`, no boolean indexing: nothing whose size depends on the data, so nothing
that makes the host wait for the device):

* `src[i]`, per request i: where its row is, one int64 descriptor `(kind << KIND_SHIFT) | index`,
  the kind being the request's status: LINE (a hit: cache line `index`), LANDING (a victim hit:
  landing-buffer row `index`), STAGED (a storage read: row `index` of the staging buffer, the
  k-th storage read of the batch);
* `fill_slot[d]`, `fill_req[d]`, per distinct id d: the cache line its row fills (-1: none; a
  miss fills its slot only as the slot's last fill of the batch, `keys[slot] == id`, and a miss
  the policy did not admit fills nothing) and a request whose output row holds it (its first);
* the spill records as the engine gives them (line `spill_slot[k]` -> queue row `spill_dst[k]`).

Two engines execute the plan (`TorchRows`, `KernelRows`), one code path deciding:
* `KernelRows`: cuda/cache_serve.cu, a group of up to a warp per row, 16-byte units where the row
  and the buffers allow (cuda/row_copy.cuh's rule): `cache_serve_rows_*` writes every request's row
  into the batch tensor straight from its source (the staging buffer read in place as mapped pinned
  memory: lsm_gnn.utils.mapped), `cache_put_rows_*` writes the fills into their lines (from the batch
  tensor, already on the device) and the spills into the pinned victim queues (warp writes over
  PCIe). What a CUDA pool runs when CuPy is there; tests run it on the CPU (tests/cuda_emu.py).
* `TorchRows`: the same moves as torch index ops with no data-dependent size either (a masked
  `torch.where` per kind; the fills' masked entries go to a scratch line past the last one): the
  CPU data plane, and a CUDA pool without CuPy. It gathers the batch's n rows once per kind served
  (3n row reads a batch, where the compacted lists of the previous plane read n plus the misses):
  the price of no compaction, paid in device bandwidth; a CUDA setup is meant to have CuPy (the
  `gpu` extra) and run the kernels, which read each row once.

Why (measured on an H200, docs/cache-gpu.md "The fetch path"): the previous data plane planned with
4 `torch.nonzero` (4 host syncs a batch), copied each missed row into staging, uploaded the staging
after the whole read and gathered / scattered it 2-4 more times on the device; without a disk it
took 8.4x the all-on-GPU ideal.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import torch

from lsm_gnn.cache.engine import HIT, STORAGE, VICTIM_HIT
from lsm_gnn.cache.gpu_engine import PUT_PREFIX, SERVE_KERNELS, SERVE_PREFIX
from lsm_gnn.utils import rowcopy

KIND_SHIFT = 56                    # cuda/cache_serve.cu: SERVE_KIND_SHIFT
INDEX_MASK = (1 << KIND_SHIFT) - 1
LINE, LANDING, STAGED = HIT, VICTIM_HIT, STORAGE   # a request's kind is its status
ALL = (1 << LINE) | (1 << LANDING) | (1 << STAGED)
SERVE_KERNEL, PUT_KERNEL, KERNELS = SERVE_PREFIX, PUT_PREFIX, SERVE_KERNELS


def bits(*kinds: int) -> int:
    """The kind set a serve call writes, e.g. bits(LINE, LANDING)."""
    out = 0
    for k in kinds:
        out |= 1 << int(k)
    return out


def encode(kind: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Descriptors (kind << KIND_SHIFT) | index, int64."""
    return (kind.to(torch.int64) << KIND_SHIFT) | index.to(torch.int64)


def decode(src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(kind, index) of descriptors."""
    return src >> KIND_SHIFT, src & INDEX_MASK


def plan_batch(distinct, inverse, status, slot, src, keys) -> dict:
    """The batch's row moves (the module docstring) from an engine step's decisions, as int64
    tensors on the decisions' device; elementwise ops, gathers, one cumsum and one scatter-min,
    every output sized by the inputs (requests n, distinct ids nd), so no step waits for the device.

    `storage_pos[d]`: the staging row of distinct id d's storage read (its rank among the storage
    reads, the order the reader fills the staging in), also what `storage_ids` compacts with."""
    n, nd = len(inverse), len(distinct)
    i64 = torch.int64
    dev = inverse.device
    distinct, inverse, slot, src = (t.to(i64) for t in (distinct, inverse, slot, src))
    status = status.to(i64)
    storage = status == STORAGE
    kpos = torch.cumsum(storage.to(i64), 0) - 1           # staged row of each storage read
    has_slot = slot >= 0
    line = slot.clamp(min=0)
    # a slot keeps the id of its last fill of the batch; a miss the policy did not cache has slot -1
    last = has_slot & (keys.to(i64)[line] == distinct) if len(keys) else torch.zeros_like(has_slot)
    index = torch.where(status == HIT, line, torch.where(status == VICTIM_HIT, src, kpos))
    per_distinct = encode(status, index)
    fill = (status != HIT) & last
    # the first request of each distinct id: its output row is the one a fill copies into the line
    first = torch.full((nd,), max(n - 1, 0), dtype=i64, device=dev)
    if n:
        first.scatter_reduce_(0, inverse, torch.arange(n, dtype=i64, device=dev), "amin", include_self=False)
    return dict(src=per_distinct[inverse], fill_slot=torch.where(fill, slot, torch.full_like(slot, -1)),
                fill_req=first, storage_pos=torch.where(storage, kpos, torch.full_like(kpos, -1)))


def storage_ids(distinct: torch.Tensor, storage_pos: torch.Tensor, count: int) -> torch.Tensor:
    """The storage reads' ids in staging order, on the decisions' device, without a sync: a scatter
    to each read's position (the others to a scratch entry past the end). `count`: the number of
    reads, or any bound on it (the batch's distinct ids: the entries past the reads are then unset
    and the caller cuts them off once it knows the count, with no wait for it before the copy)."""
    out = torch.empty(count + 1, dtype=torch.int64, device=distinct.device)
    pos = torch.where(storage_pos >= 0, storage_pos, torch.full_like(storage_pos, count))
    out.index_copy_(0, pos, distinct.to(torch.int64))
    return out[:count]


def remap_staged(src: torch.Tensor, kmap: torch.Tensor) -> torch.Tensor:
    """Descriptors whose staged rows moved: storage read k lies at row kmap[k] (a read-ahead's rows)."""
    if not len(kmap) or not len(src):
        return src
    kind, index = decode(src)
    staged = kind == STAGED
    moved = kmap.to(torch.int64)[torch.where(staged, index, torch.zeros_like(index))]
    return torch.where(staged, encode(kind, moved), src)


# ---- the engines ---------------------------------------------------------------------------------
class TorchRows:
    """The plan's moves as torch index ops, none of data-dependent size (on a CUDA pool: no sync)."""

    name = "torch"
    zero_copy = False     # storage rows are read from an uploaded copy of the staging

    def serve(self, sources: dict, src: torch.Tensor, out: torch.Tensor, kinds: int) -> None:
        """out[i] := the row src[i] names, for the requests whose kind is in `kinds`;
        `sources`: kind -> rows tensor on out's device (a kind absent: no request names it)."""
        if not len(src):
            return
        kind, index = decode(src)
        for k, rows in sources.items():
            if not (kinds >> k) & 1 or rows is None or not len(rows):
                continue
            mine = kind == k
            got = rows.index_select(0, torch.where(mine, index, torch.zeros_like(index)))
            out.copy_(torch.where(mine.unsqueeze(1), got, out))

    def put(self, src_rows: torch.Tensor, src_idx: torch.Tensor, dst_rows: torch.Tensor, dst_idx: torch.Tensor,
            scratch: int | None = None) -> None:
        """dst_rows[dst_idx[k]] := src_rows[src_idx[k]] where dst_idx[k] >= 0; the others are
        written to row `scratch` of dst_rows (a row nobody reads), so no entry is dropped by a
        data-dependent compaction; scratch None: every dst_idx is >= 0."""
        if not len(dst_idx):
            return
        if scratch is not None:
            dst_idx = torch.where(dst_idx >= 0, dst_idx, torch.full_like(dst_idx, scratch))
        dst_rows.index_copy_(0, dst_idx, src_rows.index_select(0, src_idx))


class KernelRows:
    """The plan's moves as launches of cuda/cache_serve.cu (`module`: the compiled cache module,
    or the CPU stand-in's); `launch_context()`: CuPy's stream, torch's current one (a null
    context in the stand-in); `address(t)`: where a kernel reads tensor t (its device address,
    or the device address of mapped pinned host memory)."""

    name = "kernel"
    zero_copy = True

    def __init__(self, module, address, launch_context=nullcontext):
        self.module, self.address, self.launch_context = module, address, launch_context
        self.launches = 0

    def _go(self, prefix: str, n: int, row_bytes: int, addresses, args, tail=()) -> None:
        """Launch kernel `prefix`_<unit> over n rows: `args`, then n, the row's units and the
        group's shift (rowcopy.plan), then `tail`."""
        p = rowcopy.plan(n, row_bytes, *addresses)
        fn = self.module.get_function(p.kernel(prefix))
        with self.launch_context():
            fn((p.blocks,), (rowcopy.THREADS,),
               tuple(args) + (np.int64(n), np.int64(p.row_units), np.int32(p.shift)) + tuple(tail))
        self.launches += 1

    def serve(self, sources: dict, src: torch.Tensor, out: torch.Tensor, kinds: int) -> None:
        n = len(src)
        if not n:
            return
        # a kind with no rows (or not served now) gets the output's address: no request of the
        # kinds served reads it, and it keeps the unit's alignment rule to the buffers that are read
        out_addr = out.data_ptr()
        base = {k: self.address(r) for k, r in sources.items() if (kinds >> k) & 1 and r is not None and len(r)}
        addrs = [base.get(k, out_addr) for k in (LINE, LANDING, STAGED)]
        src = src.contiguous()
        self._go(SERVE_KERNEL, n, out.shape[1] * out.element_size(), addrs + [out_addr],
                 [np.uint64(a) for a in addrs] + [np.uint64(src.data_ptr()), np.uint64(out_addr)],
                 (np.int32(kinds),))

    def put(self, src_rows, src_idx, dst_rows, dst_idx, scratch=None) -> None:
        n = len(dst_idx)
        if not n:
            return
        src_idx, dst_idx = src_idx.contiguous(), dst_idx.contiguous()
        s, d = self.address(src_rows), self.address(dst_rows)
        self._go(PUT_KERNEL, n, dst_rows.shape[1] * dst_rows.element_size(), (s, d),
                 (np.uint64(s), np.uint64(src_idx.data_ptr()), np.uint64(d), np.uint64(dst_idx.data_ptr())))

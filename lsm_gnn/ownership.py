"""The owner rule, in one place: which device owns a feature row and where the row sits there.

Over G owners, row v belongs to owner ``v % G`` and is that owner's local row ``v // G``; owner
o's local row r is the global row ``r * G + o``. This is the shared cache's partition (LSM-GNN,
arXiv 2407.15264, Sec. 4: each GPU caches the nodes it owns) and the per-owner feature files'
layout. Every engine, the simulator, the storage's row map and the host side of the CUDA kernels
call these functions; a numba kernel calls the ``@njit`` scalars (`owner_of_id`,
`local_row_of_id`), which LLVM inlines into the caller. The CUDA kernels keep the same two
operators in device code (`%` and `/` on the ids the host prepared with this module).

The rows of an owner, for a requester (the shared cache's request routing, CPU engine): a
requester splits its input ids into G buckets (one per owner) and remembers, for every bucket
entry, its position in the original list, so the rows that come back can be put in the
requester's order (`split_by_owner`, `reorder`). The split is a *stable* counting sort: inside a
bucket, ids keep their order of appearance (duplicates are kept; the owner's cache coalesces
them). The GPU engine (`lsm_gnn.multidevice.gpu`) makes exactly the same decisions.

A leaf of the import graph: numpy, numba and the bottom floor's leaves only (the error type, the
id check of the feature-source contract, the memcpy row scatter).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from lsm_gnn.contract import check_feature_ids
from lsm_gnn.utils.errors import InputError
from lsm_gnn.utils.native import scatter_rows


# inline="always": numba inlines them into the kernel's IR (a plain call cost the CPU engine 3-5% of
# its requests/s in `bench cache`, 3 interleaved runs each; inlined, within the runs' +-5% spread).
# numba's on-disk cache does not see a change here in its callers' caches: clear __pycache__/*.nb*.
@numba.njit(cache=True, nogil=True, inline="always")
def owner_of_id(v, num_owners):
    """Owner of row v (numba, scalar or array): v % G."""
    return v % num_owners


@numba.njit(cache=True, nogil=True, inline="always")
def local_row_of_id(v, num_owners):
    """Row v's position in its owner's local id space (numba, scalar or array): v // G."""
    return v // num_owners


def owner_of(ids, num_owners: int) -> np.ndarray:
    """Owner of every id, as int64: v % G."""
    return np.asarray(ids, dtype=np.int64) % int(num_owners)


def local_row(ids, num_owners: int) -> np.ndarray:
    """Local row of every id in its owner's file and cache records, as int64: v // G."""
    return np.asarray(ids, dtype=np.int64) // int(num_owners)


def global_row(local, owner: int, num_owners: int) -> np.ndarray:
    """Global id of owner `owner`'s local rows: r * G + owner (the inverse of `local_row`)."""
    return np.asarray(local, dtype=np.int64) * int(num_owners) + np.asarray(owner, dtype=np.int64)


def local_rows(num_rows: int, num_owners: int) -> int:
    """Size of the owner-local id space: v // G over every v < num_rows (owner 0's row count)."""
    return (int(num_rows) - 1) // int(num_owners) + 1 if num_rows > 0 else 0


def owned_count(num_rows: int, num_owners: int, owner: int) -> int:
    """Rows of [0, num_rows) owner `owner` holds (the length of its own feature file)."""
    return len(range(int(owner), int(num_rows), int(num_owners)))


def rows_of_owner(num_rows: int, num_owners: int, owner: int) -> np.ndarray:
    """Global ids of owner `owner`'s rows, in local-row order: owner, owner + G, ..."""
    return np.arange(int(owner), int(num_rows), int(num_owners), dtype=np.int64)


def owner_slice(owner: int, num_owners: int, start: int = 0, stop: int | None = None) -> slice:
    """Slice of a global-row array that picks owner `owner`'s local rows start..stop-1 (a view)."""
    lo = int(global_row(start, owner, num_owners))
    hi = None if stop is None else int(global_row(stop - 1, owner, num_owners)) + 1
    return slice(lo, hi, int(num_owners))


def foreign_ids(ids, num_owners: int, owner: int) -> np.ndarray:
    """Mask of the ids that owner `owner` does not own."""
    return owner_of(ids, num_owners) != int(owner)


def check_owned(ids, num_owners: int, owner: int, what: str = "ids") -> None:
    """InputError naming the first id of `ids` that owner `owner` of `num_owners` does not own."""
    arr = np.asarray(ids, dtype=np.int64)
    if num_owners <= 1 or not arr.size:
        return
    wrong = foreign_ids(arr, num_owners, owner)
    if wrong.any():
        v = int(arr.reshape(-1)[np.argmax(wrong.reshape(-1))])
        raise InputError(f"{what}: id {v} belongs to owner {v % num_owners}, not owner {owner} of {num_owners} "
                         f"(owner o serves the ids v with v % {num_owners} == o)")


def owner_row_map(owner: int, num_owners: int):
    """A store's row map over owner `owner`'s own feature file: global id v -> local row
    v // num_owners (InputError for a negative id or one `owner` does not own). Here with the rule
    it applies: a per-owner store maps every id it reads through it (lsm_gnn.storage.open)."""
    if not 0 <= owner < num_owners:
        raise InputError(f"owner {owner} out of range [0, {num_owners})")

    def row_map(ids: np.ndarray) -> np.ndarray:
        if ids.size and ids.min() < 0:
            raise InputError(f"id {int(ids.min())} is negative")
        check_owned(ids, num_owners, owner)
        return local_row(ids, num_owners)

    return row_map


# ---- rows of an owner, for a requester: the split by owner and the reorder back ----------------
@dataclass(frozen=True)
class OwnerSplit:
    """Ids grouped by owner. `send_ids[k] == ids[positions[k]]`; bucket o is
    `send_ids[offsets[o]:offsets[o + 1]]`."""

    send_ids: np.ndarray   # int64, len(ids)
    positions: np.ndarray  # int64, original position of each send_ids entry
    counts: np.ndarray     # int64, (G,) ids per owner

    @property
    def offsets(self) -> np.ndarray:
        out = np.zeros(len(self.counts) + 1, dtype=np.int64)
        np.cumsum(self.counts, out=out[1:])
        return out

    def bucket(self, owner: int) -> np.ndarray:
        off = self.offsets
        return self.send_ids[off[owner]: off[owner + 1]]


@numba.njit(cache=True, nogil=True)
def _split_kernel(ids, num_owners, send_ids, positions, counts):
    for i in range(ids.shape[0]):
        counts[owner_of_id(ids[i], num_owners)] += 1
    cursor = np.zeros(num_owners, dtype=np.int64)
    acc = 0
    for o in range(num_owners):
        cursor[o] = acc
        acc += counts[o]
    for i in range(ids.shape[0]):
        o = owner_of_id(ids[i], num_owners)
        k = cursor[o]
        send_ids[k] = ids[i]
        positions[k] = i
        cursor[o] = k + 1


def split_by_owner(ids, num_owners: int, num_rows: int | None = None) -> OwnerSplit:
    """Stable split of `ids` into `num_owners` buckets by `v % num_owners` (ids validated here)."""
    return split_valid_ids(check_feature_ids(ids, num_rows), num_owners)


def split_valid_ids(ids: np.ndarray, num_owners: int) -> OwnerSplit:
    """split_by_owner of ids a source has validated at its public entry (1-D contiguous int64)."""
    if num_owners < 1:
        raise InputError(f"num_owners must be >= 1, found {num_owners}")
    send_ids = np.empty_like(ids)
    positions = np.empty(len(ids), dtype=np.int64)
    counts = np.zeros(num_owners, dtype=np.int64)
    _split_kernel(ids, np.int64(num_owners), send_ids, positions, counts)
    return OwnerSplit(send_ids, positions, counts)


def reorder(rows: np.ndarray, positions: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Put rows received in owner order back into the requester's order: out[positions[k]] = rows[k]."""
    if rows.shape[0] != positions.shape[0]:
        raise InputError(f"reorder: {rows.shape[0]} rows for {positions.shape[0]} positions")
    if out is None:
        out = np.empty_like(rows)
    elif out.shape != rows.shape or out.dtype != rows.dtype:
        raise InputError(f"reorder: out must be {rows.shape} {rows.dtype}, found {out.shape} {out.dtype}")
    n = rows.shape[0]
    if n and rows.ndim == 2 and rows.flags.c_contiguous and out.flags.c_contiguous:
        pos = np.ascontiguousarray(positions, dtype=np.int64)
        if pos.min() < 0 or pos.max() >= n:
            raise InputError(f"reorder: positions must lie in [0, {n})")
        # memcpy per row: a numpy scatter of 4 KiB rows measured about 3x slower
        scatter_rows(rows.view(np.uint8).reshape(n, -1), pos, out.view(np.uint8).reshape(n, -1))
    else:
        out[positions] = rows
    return out


def reorder_blocks(blocks: list[np.ndarray], positions: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`reorder` of rows that arrive as several blocks (one per owner, in rank order, each a
    C-contiguous (n_o, row_bytes) uint8 view): out[positions[k]] = k-th row of the blocks in turn,
    with no copy into one buffer first (the shared-memory transport's blocks live in the owners'
    outboxes)."""
    n = int(sum(len(b) for b in blocks))
    if n != positions.shape[0]:
        raise InputError(f"reorder: {n} rows for {positions.shape[0]} positions")
    if out.shape[0] != n or not out.flags.c_contiguous:
        raise InputError(f"reorder: out must be C-contiguous with {n} rows, found {out.shape}")
    if not n:
        return out
    pos = np.ascontiguousarray(positions, dtype=np.int64)
    if pos.min() < 0 or pos.max() >= n:
        raise InputError(f"reorder: positions must lie in [0, {n})")
    dst = out.view(np.uint8).reshape(n, -1)
    start = 0
    for b in blocks:
        k = len(b)
        if k:
            if b.shape[1] != dst.shape[1]:
                raise InputError(f"reorder: rows of {b.shape[1]} bytes for an output of {dst.shape[1]}")
            scatter_rows(np.ascontiguousarray(b), pos[start: start + k], dst)
        start += k
    return out

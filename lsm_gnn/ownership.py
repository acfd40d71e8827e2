"""The owner rule, in one place: which device owns a feature row and where the row sits there.

Over G owners, row v belongs to owner ``v % G`` and is that owner's local row ``v // G``; owner
o's local row r is the global row ``r * G + o``. This is the shared cache's partition (LSM-GNN,
arXiv 2407.15264, Sec. 4: each GPU caches the nodes it owns) and the per-owner feature files'
layout. Every engine, the simulator, the storage's row map and the host side of the CUDA kernels
call these functions; a numba kernel calls the ``@njit`` scalars (`owner_of_id`,
`local_row_of_id`), which LLVM inlines into the caller. The CUDA kernels keep the same two
operators in device code (`%` and `/` on the ids the host prepared with this module).

A leaf of the import graph: numpy, numba and the project's error type only.
"""

from __future__ import annotations

import numba
import numpy as np

from lsm_gnn.utils.errors import InputError


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

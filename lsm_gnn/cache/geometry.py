"""Cache geometry and id ownership: how many sets and ways, which set a node maps to.

Node v belongs to owner ``v % G`` (the owner rule, lsm_gnn.ownership); the owner's cache line key
is v, its set ``local_row(v) % sets`` (the owner's local row ``v // G``, then the set rule).
A capacity of C lines with W ways gives ``sets = C // W`` (so sets * ways <= C: capacity is
never exceeded); a capacity below W gives one set of C ways.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lsm_gnn.contract import check_feature_ids
from lsm_gnn.ownership import check_owned, local_rows, owned_count  # noqa: F401 (local_rows: re-export)
from lsm_gnn.utils.errors import InputError


@dataclass(frozen=True)
class Geometry:
    sets: int
    ways: int

    @property
    def lines(self) -> int:
        return self.sets * self.ways


def cache_geometry(capacity_rows: int, ways: int) -> Geometry:
    capacity_rows, ways = int(capacity_rows), int(ways)
    if capacity_rows < 1:
        raise InputError(f"cache capacity must be at least one line, found {capacity_rows}")
    if ways < 1:
        raise InputError(f"ways must be at least 1, found {ways}")
    ways = min(ways, capacity_rows)
    return Geometry(sets=capacity_rows // ways, ways=ways)


def check_owner_args(num_rows: int, num_owners: int, owner: int) -> None:
    if num_owners < 1:
        raise InputError(f"num_owners must be at least 1, found {num_owners}")
    if not 0 <= owner < num_owners:
        raise InputError(f"owner must be in [0, {num_owners}), found {owner}")
    if num_rows < 1:
        raise InputError(f"num_rows must be positive, found {num_rows}")


def check_owned_ids(ids: np.ndarray, num_rows: int, num_owners: int, owner: int, what: str = "ids") -> np.ndarray:
    """ids as a 1-D int64 array; InputError unless they are feature ids (the contract's check,
    lsm_gnn.contract.check_feature_ids) in [0, num_rows) and every one is owned by `owner`."""
    arr = check_feature_ids(ids, num_rows, what)
    check_owned(arr, num_owners, owner, what)
    return arr


def check_owner_store(store, num_rows: int, row_dim: int, dtype, num_owners: int, owner: int) -> np.dtype:
    """The store under one owner's cache holds what the cache expects; returns the row dtype.
    A store over an owner's own file (ownership.owner_row_map) holds just the rows it owns."""
    check_owner_args(num_rows, num_owners, owner)
    dtype = np.dtype(dtype)
    rows = num_rows if getattr(store, "row_map", None) is None else owned_count(num_rows, num_owners, owner)
    if (store.num_rows, store.dim, store.dtype) != (rows, row_dim, dtype):
        raise InputError(f"store holds ({store.num_rows} rows, dim {store.dim}, {store.dtype}), "
                         f"expected ({rows} rows, dim {row_dim}, {dtype})")
    return dtype

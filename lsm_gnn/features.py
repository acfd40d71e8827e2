"""The feature-source stage of the pipeline (sampler -> feature source -> train step).

A feature source turns a mini-batch's input node ids into feature rows. Implementations: the
in-memory ideal (`MemoryFeatureSource` here), a store read straight from storage, the LSM-GNN
cache engine (lsm_gnn.cache), and the multi-device shared cache (lsm_gnn.multidevice). The loop calls
`advance(window)` once per iteration with the requests of the next W mini-batches, which is what
the reuse tags and the victim-buffer prefetcher need, then `fetch(ids)`.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Protocol, Sequence

import numpy as np

from lsm_gnn.utils.native import gather_rows


@dataclass
class TierCounters:
    """Row-level counts per tier (hit rates are computed from rows, never thread accesses)."""

    requests: int = 0
    distinct: int = 0
    local_hits: int = 0
    peer_hits: int = 0
    victim_hits: int = 0
    storage_rows: int = 0

    def add(self, other: "TierCounters") -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict:
        return asdict(self)


class FeatureSource(Protocol):
    counters: TierCounters

    def advance(self, window: Sequence[np.ndarray]) -> None:
        """Tell the source which ids the next len(window) mini-batches will request."""

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        """Rows of `ids` (int64) in order, as a (len(ids), dim) array."""

    def close(self) -> None: ...


class OutputRows:
    """Output arrays for a source's batches, reused once nothing refers to them any more.

    A fresh 175 MB output per batch (the small graph) costs the kernel a page fault and a zeroed
    page per 4 KiB before a row is written, in the thread that competes with training for the
    cores. A buffer is handed out again only when its reference count shows that no view of it
    (the batch's tensor, autograd's saved input, a user's copy of the reference) is alive, so a
    batch's rows never change under its holder. At most `keep` buffers are kept.
    """

    def __init__(self, dim: int, dtype, keep: int = 4):
        self.dim, self.dtype, self.keep = int(dim), np.dtype(dtype), int(keep)
        self._bufs: list[np.ndarray] = []

    def get(self, n: int) -> np.ndarray:
        """An uninitialised (n, dim) C-contiguous array."""
        for i, buf in enumerate(self._bufs):
            # references: the list, this loop's name, getrefcount's argument; one more is a user
            if len(buf) >= n and sys.getrefcount(buf) <= 3:
                return buf[:n]
        buf = np.empty((n + n // 8 + 64, self.dim), self.dtype)  # room for the next, larger batch
        free = [i for i, b in enumerate(self._bufs) if sys.getrefcount(b) <= 3]
        if len(self._bufs) < self.keep:
            self._bufs.append(buf)
        elif free:
            self._bufs[free[0]] = buf   # a free buffer too small for this batch makes room
        return buf[:n]


class MemoryFeatureSource:
    """The ideal: every feature row already in memory."""

    def __init__(self, features: np.ndarray):
        self.features = np.ascontiguousarray(features)
        self.counters = TierCounters()
        self._out = None

    def advance(self, window: Sequence[np.ndarray]) -> None:
        pass

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        f = self.features
        if len(ids) and (ids.min() < 0 or ids.max() >= len(f)):
            raise IndexError(f"feature ids must lie in [0, {len(f)}), found [{ids.min()}, {ids.max()}]")
        self.counters.requests += len(ids)
        self.counters.distinct += len(np.unique(ids))
        self.counters.local_hits += len(ids)
        if not (len(ids) and f.ndim == 2 and f.flags.c_contiguous):
            return f[ids]
        # the same memcpy row gather and reused outputs as the cache: the ideal is not handicapped
        if self._out is None:
            self._out = OutputRows(f.shape[1], f.dtype)
        out = self._out.get(len(ids))
        gather_rows(f.view(np.uint8).reshape(len(f), -1), ids, out.view(np.uint8).reshape(len(ids), -1))
        return out

    def close(self) -> None:
        pass

"""The feature-source stage of the pipeline (sampler -> feature source -> train step).

A feature source turns a mini-batch's input node ids into feature rows. Implementations: the
in-memory ideal (`MemoryFeatureSource` here), a store read straight from storage, the LSM-GNN
cache engine (lsm_gnn.cache), and the multi-device shared cache (lsm_gnn.dist). The loop calls
`advance(window)` once per iteration with the requests of the next W mini-batches, which is what
the reuse tags and the victim-buffer prefetcher need, then `fetch(ids)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, Sequence

import numpy as np


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


class MemoryFeatureSource:
    """The ideal: every feature row already in memory."""

    def __init__(self, features: np.ndarray):
        self.features = np.ascontiguousarray(features)
        self.counters = TierCounters()

    def advance(self, window: Sequence[np.ndarray]) -> None:
        pass

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        self.counters.requests += len(ids)
        self.counters.distinct += len(np.unique(ids))
        self.counters.local_hits += len(ids)
        return self.features[ids]

    def close(self) -> None:
        pass

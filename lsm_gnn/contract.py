"""The feature-source contract: the stage between the sampler and the train step.

A feature source turns a mini-batch's input node ids into feature rows. The loop calls
`advance(window)` once per iteration with the requests of the next W mini-batches, which is what
the reuse tags and the victim-buffer prefetcher need, then `fetch(ids)`.

The contract (`FeatureSource`, after GraphBolt's `Feature` and PyG's `FeatureStore`): the public
`fetch` / `advance` validate the ids (`check_ids`), `_fetch` / `_advance` do the work on ids
already validated. Ids are validated once, at the public entry of a fetch: a source made of
another (the shared cache over its owner's cache) calls the inner source's `_fetch` / `_advance`
with the ids it validated, and nothing under it checks them again. Every source says what it did
through methods, never through attributes a caller has to guess:

    counters                 rows per tier (TierCounters)
    stats() -> dict          the source's own figures (evictions, spills, exchange bytes, ...)
    stage_seconds()          cumulative seconds of the fetch stages {"cache", "victim", "storage"},
                             or None when a fetch is one stage (`fetch_stage`); a source that
                             exchanges rows between devices adds "exchange_ids" and
                             "exchange_rows" (lsm_gnn.metrics.EXCHANGE_STAGES: the record's stages
                             of those names), over a cache or alone
    io_counters()            the storage I/O under the source (IOCounters), or None
    memory() -> dict         the run record's memory block (lsm_gnn.cache.budget)
    storage_info() -> dict   which storage path ran (the store's path_info)
    device                   where fetched rows live: "cpu" (a numpy array, or a CPU tensor from
                             a torch data plane) or a CUDA device (torch tensors already there)
    last_tiers               a cache's tier of each request of its last fetch (None elsewhere)
    heartbeat                the rank's liveness stamps (lsm_gnn.multidevice.health), or None

This module imports no source: the sources stand above it (the in-memory ideal and the plain
store in lsm_gnn.sources; the LSM-GNN cache, lsm_gnn.sources.cached.CachedFeatureSource, and its
torch data plane, lsm_gnn.sources.cached_device.DeviceCachedFeatureSource; the shared cache over G
devices and isolated caches, lsm_gnn.sources.shared), and the one factory above them all
(lsm_gnn.sources.factory.make_feature_source). `ForeignSource` gives the contract to an object
that only has advance/fetch/counters (a user's cache, a test stand-in).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lsm_gnn.utils.counts import Counts
from lsm_gnn.utils.errors import InputError

STAGES = ("cache", "victim", "storage")
"""The keys of a cache's `stage_seconds()`; the loader records them as fetch_cache, fetch_victim,
fetch_storage (lsm_gnn.train.loader.fetch_split)."""


@dataclass
class TierCounters(Counts):
    """Row-level counts per tier (hit rates are computed from rows, never thread accesses)."""

    requests: int = 0
    distinct: int = 0
    local_hits: int = 0
    peer_hits: int = 0
    victim_hits: int = 0
    storage_rows: int = 0


class FeatureIdError(InputError, IndexError):
    """Ids outside [0, num_rows): an InputError, and an IndexError as numpy indexing raises."""


def check_feature_ids(ids, num_rows: int | None = None, what: str = "ids") -> np.ndarray:
    """`ids` as a contiguous 1-D int64 array; InputError unless they are integers in [0, num_rows)."""
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise InputError(f"{what}: expected a 1-D array of node ids, found shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise InputError(f"{what}: expected integer node ids, found dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or (num_rows is not None and hi >= num_rows):
            raise FeatureIdError(f"{what}: feature ids must lie in [0, {num_rows}), found range [{lo}, {hi}]")
    return arr


class SourceStats(dict):
    """A source's running figures: a dict (src.stats["spilled"]) that is also the contract's
    call (src.stats() -> a copy)."""

    def __call__(self) -> dict:
        return dict(self)


class FeatureSource:
    """The contract of a feature source (see the module docstring). Subclasses implement
    `_fetch` (and `_advance` when they look ahead) and the reporting methods they have."""

    counters: TierCounters
    device = "cpu"
    fetch_stage = "fetch_cache"   # the record stage of a fetch's time without per-stage timers
    heartbeat = None
    num_rows: int | None = None   # ids are checked against it when set
    last_tiers = None             # caches: the tier of each request of the last fetch (a property)

    # ---- the pipeline ---------------------------------------------------------------------------
    def check_ids(self, ids, what: str = "ids") -> np.ndarray:
        """Validated ids (1-D int64 in [0, num_rows)); InputError otherwise."""
        return check_feature_ids(ids, self.num_rows, what)

    def advance(self, window: Sequence[np.ndarray]) -> None:
        """Tell the source which ids the next len(window) mini-batches will request."""
        self._advance([self.check_ids(w, "window batch") for w in window])

    def fetch(self, ids: np.ndarray):
        """Rows of `ids` in order, (len(ids), dim): a numpy array, or a torch tensor on the
        source's `device` (a torch data plane's, on the CPU too)."""
        return self._fetch(self.check_ids(ids))

    def _advance(self, window: list[np.ndarray]) -> None:
        pass

    def _fetch(self, ids: np.ndarray):
        raise NotImplementedError(f"{type(self).__name__} must implement _fetch")

    # ---- what it did --------------------------------------------------------------------------
    def stats(self) -> dict:
        return {}

    def stage_seconds(self) -> dict | None:
        return None

    def io_counters(self):
        return None

    def memory(self) -> dict:
        raise NotImplementedError(f"{type(self).__name__} must state its memory()")

    def storage_info(self) -> dict:
        return {}

    @property
    def source_name(self) -> str:
        """The name the run record gives the source."""
        return type(self).__name__

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ForeignSource(FeatureSource):
    """The contract for an object that has only advance/fetch/counters (and maybe close): a
    user's cache or a test stand-in. It reports no stats, I/O or storage path; its memory block
    is the one the caller states (`memory`, e.g. what the config says for the system)."""

    def __init__(self, inner, memory: dict | None = None):
        self.inner, self._memory = inner, memory
        self.counters = inner.counters

    def _advance(self, window) -> None:
        self.inner.advance(window)

    def _fetch(self, ids):
        return self.inner.fetch(ids)

    def memory(self) -> dict:
        if self._memory is None:
            raise InputError(f"{type(self.inner).__name__} states no memory; pass the run's memory block")
        return dict(self._memory)

    @property
    def source_name(self) -> str:
        return type(self.inner).__name__

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


def as_source(obj, memory: dict | None = None) -> FeatureSource:
    """`obj` if it implements the contract, else `obj` behind a ForeignSource."""
    return obj if isinstance(obj, FeatureSource) else ForeignSource(obj, memory)

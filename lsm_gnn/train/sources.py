"""Which feature source a run uses, from its config; and how to read a source's counters.

`make_feature_source(cfg, dataset)`:
- `storage.reader: memory` and `cache.enabled: false`: the in-memory ideal (every row loaded into
  RAM up front; the load is reported as preprocessing, not epoch time);
- `cache.enabled: false` otherwise: a plain store, every request read from storage
  (`StoreFeatureSource`, the "direct"/"mmap" loaders without a cache);
- `cache.enabled: true`: the LSM-GNN cache engine (`lsm_gnn.cache.fetcher.CachedFeatureSource`)
  over the configured store (with `reader: memory`, over an in-memory store: the cache's decisions
  without disk I/O).
Store and cache modules are imported lazily, so the ideal needs neither.

`fetch_split(source, seconds, before, after)` splits one fetch's wall time into the record's
stages fetch_cache / fetch_victim / fetch_storage: from the source's per-stage timers when it has
them, else all of it to the one tier the source is (memory: fetch_cache; plain store:
fetch_storage).
"""

from __future__ import annotations

import numpy as np

from lsm_gnn.features import MemoryFeatureSource, OutputRows, TierCounters
from lsm_gnn.utils.errors import ConfigError, InputError


class StoreFeatureSource:
    """Every request read from a FeatureStore (no cache): the plain storage loader. With a
    `heartbeat` (lsm_gnn.multidevice.health), every fetch stamps the rank's progress."""

    kind = "store"
    reuse_outputs = True  # features.OutputRows, as the cache and the ideal

    def __init__(self, store, heartbeat=None):
        self.store = store
        self.heartbeat = heartbeat
        self.counters = TierCounters()
        self._out = OutputRows(store.dim, store.dtype) if self.reuse_outputs else None

    def advance(self, window) -> None:
        pass

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        if self.heartbeat is not None:
            self.heartbeat.beat()
        ids = np.asarray(ids, dtype=np.int64)
        rows = self.store.read_rows(ids, out=None if self._out is None else self._out.get(len(ids)))
        self.counters.requests += len(ids)
        distinct = len(np.unique(ids))
        self.counters.distinct += distinct
        self.counters.storage_rows += distinct
        return rows

    def close(self) -> None:
        self.store.close()


def system_name(cfg) -> str:
    """The record's `system`: memory (the ideal), lsm (cache engine), or the plain reader's name."""
    if not cfg.cache.enabled:
        return "memory" if cfg.storage.reader == "memory" else cfg.storage.reader
    if cfg.distributed.devices > 1 and cfg.distributed.mode == "isolated":
        return "isolated"
    return "lsm"


def open_store(cfg, layout, row_map=None):
    from lsm_gnn.storage.open import open_feature_store

    s = cfg.storage
    return open_feature_store(layout, reader=s.reader, queue_depth=s.queue_depth, threads=s.threads,
                              backend=s.backend, drop_page_cache=s.drop_page_cache, row_map=row_map)


def make_feature_source(cfg, dataset, *, rank: int = 0, world_size: int = 1):
    """The feature source `cfg` asks for (one device; see lsm_gnn.multidevice for the shared cache)."""
    if not 0 <= rank < world_size:
        raise InputError(f"rank must lie in [0, world_size), found rank={rank} world_size={world_size}")
    lay = dataset.features()
    if not cfg.cache.enabled and cfg.storage.reader == "memory":
        return MemoryFeatureSource(np.array(lay.view("r")))
    store = open_store(cfg, lay)
    if not cfg.cache.enabled:
        return StoreFeatureSource(store)
    try:
        from lsm_gnn.cache.fetcher import CachedFeatureSource
    except ModuleNotFoundError as e:  # pragma: no cover - until the cache engine lands
        store.close()
        raise ConfigError("<config>", "cache.enabled", f"the cache engine is not available ({e})") from None
    shared = world_size > 1 and cfg.distributed.mode == "shared"
    return CachedFeatureSource(store, lay.num_rows, lay.dim, lay.dtype, cfg.cache, dataset.static_scores(),
                               num_owners=world_size if shared else 1, owner=rank if shared else 0)


def close_source(source) -> None:
    """Close a source made by `make_feature_source`, and the store under a cache (which leaves it open)."""
    source.close()
    store = getattr(source, "store", None)
    if store is not None and not isinstance(source, StoreFeatureSource):
        store.close()


# ---- reading a source's counters -----------------------------------------------------------------
def io_counters(source):
    """The IOCounters of the store under `source` (plain, cached, shared), or None."""
    for path in (("store",), ("cache", "store"), ("cache", "cache", "store")):
        obj = source
        for attr in path:
            obj = getattr(obj, attr, None)
        c = getattr(obj, "counters", None)
        if c is not None and hasattr(c, "bytes_read"):
            return c
    return None


def _stats(source) -> dict:
    st = getattr(source, "stats", None)
    if callable(st):
        st = st()
    return dict(st) if isinstance(st, dict) else {}


def _stage_seconds(stats: dict) -> dict:
    """Per-stage seconds from a cache source's stats, whatever its key style (time_cache_s, ...)."""
    out = {}
    for stage in ("cache", "victim", "storage"):
        if isinstance(stats.get(f"time_{stage}_s"), (int, float)):
            out[stage] = float(stats[f"time_{stage}_s"])
            continue
        for k, v in stats.items():
            lk = k.lower()
            if stage in lk and ("time" in lk or lk.endswith("_s") or "second" in lk) \
                    and isinstance(v, (int, float, np.integer, np.floating)):
                out[stage] = float(v)
                break
    return out


ROWS = ("requests", "distinct", "local_hits", "peer_hits", "victim_hits", "storage_rows")


def counts(source) -> dict:
    """Row counters and storage I/O counters of `source` now (for per-batch deltas)."""
    c = source.counters
    out = {k: int(getattr(c, k, 0)) for k in ROWS}
    io = io_counters(source)
    if io is not None:
        out["bytes_read"], out["io_ops"] = int(io.bytes_read), int(io.io_ops)
    return out


def snapshot(source) -> dict:
    """What `fetch_split` compares before and after a fetch."""
    return _stage_seconds(_stats(source))


def fetch_split(source, seconds: float, before: dict, after: dict) -> dict:
    if isinstance(source, MemoryFeatureSource):
        return {"fetch_cache": seconds}
    if isinstance(source, StoreFeatureSource):
        return {"fetch_storage": seconds}
    if not after:
        return {"fetch_cache": seconds}
    d = {k: max(0.0, after.get(k, 0.0) - before.get(k, 0.0)) for k in ("cache", "victim", "storage")}
    victim, storage = d["victim"], d["storage"]
    if victim + storage > seconds:  # the source's timers overlap ours; keep the sum = our wall time
        f = seconds / (victim + storage)
        victim, storage = victim * f, storage * f
    return {"fetch_cache": seconds - victim - storage, "fetch_victim": victim, "fetch_storage": storage}


def extra_stats(source) -> dict:
    """A source's numeric stats (evictions, spills, prefetches ...) for the record."""
    out = {}
    for k, v in _stats(source).items():
        if isinstance(v, (bool, np.bool_)):
            continue
        if isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = float(v)
    return out

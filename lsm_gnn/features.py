"""The feature-source stage of the pipeline (sampler -> feature source -> train step), in one place.

A feature source turns a mini-batch's input node ids into feature rows. The loop calls
`advance(window)` once per iteration with the requests of the next W mini-batches, which is what
the reuse tags and the victim-buffer prefetcher need, then `fetch(ids)`.

The contract (`FeatureSource`, after GraphBolt's `Feature` and PyG's `FeatureStore`): the public
`fetch` / `advance` validate the ids (`check_ids`), `_fetch` / `_advance` do the work, and every
source says what it did through methods, never through attributes a caller has to guess:

    counters                 rows per tier (TierCounters)
    stats() -> dict          the source's own figures (evictions, spills, exchange bytes, ...)
    stage_seconds()          cumulative seconds of the fetch stages {"cache", "victim", "storage"},
                             or None when a fetch is one stage (`fetch_stage`)
    io_counters()            the storage I/O under the source (IOCounters), or None
    memory() -> dict         the run record's memory block (lsm_gnn.cache.budget)
    storage_info() -> dict   which storage path ran (the store's path_info)
    device                   where fetched rows live: "cpu" (numpy arrays) or a CUDA device
                             (torch tensors already there)
    last_tiers               a cache's tier of each request of its last fetch (None elsewhere)
    heartbeat                the rank's liveness stamps (lsm_gnn.multidevice.health), or None

Sources: the in-memory ideal (`MemoryFeatureSource`) and a plain store (`StoreFeatureSource`)
here; the LSM-GNN cache (lsm_gnn.cache.fetcher.CachedFeatureSource; its GPU data plane
lsm_gnn.cache.device_source through `DeviceCacheSource`); the shared cache over G devices and
isolated caches (lsm_gnn.multidevice.source). `ForeignSource` gives the contract to an object
that only has advance/fetch/counters (a user's cache, a test stand-in).

`make_feature_source(cfg, dataset, rank, world, ...)` is the one factory: every training run,
rank (trace replay included) and plain-loader baseline gets its source from it. Caches size
themselves from the config (lsm_gnn.cache.budget.memory_budget); the factory computes no sizes.
Store, cache and multi-device modules are imported lazily, so the ideal needs none of them.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from lsm_gnn.utils.errors import ConfigError, InputError
from lsm_gnn.utils.native import gather_rows

STAGES = ("cache", "victim", "storage")


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


def numeric_stats(stats: dict) -> dict:
    """The numbers of a source's stats (ints and floats; strings and flags left out), for records."""
    out = {}
    for k, v in stats.items():
        if isinstance(v, (bool, np.bool_)):
            continue
        if isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = float(v)
    return out


def cache_stage_seconds(stats: dict) -> dict:
    """Per-stage seconds of a cache's stats (time_cache_s, time_victim_s, time_storage_s)."""
    return {s: float(stats.get(f"time_{s}_s", 0.0)) for s in STAGES}


def device_memory(per_device_bytes: int, victim_bytes: int, feature_bytes: int, devices: int = 1, **extra) -> dict:
    """A memory block (lsm_gnn.cache.budget.memory_record) for `devices` devices."""
    from lsm_gnn.cache.budget import for_devices, memory_record

    return for_devices({**memory_record(per_device_bytes, victim_bytes, feature_bytes), **extra}, devices)


def _lookahead(cache_cfg) -> int:
    """Future batches the cache policy reads (W, or K for horizon): lsm_gnn.cache.policies."""
    from lsm_gnn.cache.policies import lookahead_batches

    return lookahead_batches(cache_cfg.policy, cache_cfg.window, getattr(cache_cfg, "lookahead", None))


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
        """Rows of `ids` in order, (len(ids), dim): a numpy array on the CPU, a torch tensor on
        the source's `device` otherwise."""
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


class MemoryFeatureSource(FeatureSource):
    """The ideal: every feature row already in memory."""

    def __init__(self, features: np.ndarray):
        self.features = np.ascontiguousarray(features)
        self.num_rows = len(self.features)
        self.counters = TierCounters()
        self._out = None

    def _fetch(self, ids: np.ndarray) -> np.ndarray:
        f = self.features
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

    def memory(self) -> dict:
        """Every feature row on the device."""
        return device_memory(self.features.nbytes, 0, self.features.nbytes)


class StoreFeatureSource(FeatureSource):
    """Every request read from a FeatureStore (no cache): the plain storage loader. With a
    `heartbeat` (lsm_gnn.multidevice.health), every fetch stamps the rank's progress. The store
    checks the ids (and maps them to an owner file's rows); `close()` closes it.
    `feature_bytes`: the bytes of the whole feature file (default: the store's), for memory()."""

    fetch_stage = "fetch_storage"

    def __init__(self, store, heartbeat=None, *, feature_bytes: int | None = None):
        self.store = store
        self.heartbeat = heartbeat
        self.counters = TierCounters()
        self.feature_bytes = int(store.num_rows * store.row_bytes if feature_bytes is None else feature_bytes)
        self._out = OutputRows(store.dim, store.dtype)

    @property
    def reuse_outputs(self) -> bool:
        """Outputs reused across batches (OutputRows, as the cache and the ideal); False: a fresh
        array per fetch (what a page-cache cap's accounting of new memory needs)."""
        return self._out is not None

    @reuse_outputs.setter
    def reuse_outputs(self, on: bool) -> None:
        self._out = OutputRows(self.store.dim, self.store.dtype) if on else None

    def check_ids(self, ids, what: str = "ids") -> np.ndarray:
        return check_feature_ids(ids, None, what)  # the store checks the range, after its row map

    def _fetch(self, ids: np.ndarray) -> np.ndarray:
        if self.heartbeat is not None:
            self.heartbeat.beat()
        rows = self.store.read_rows(ids, out=None if self._out is None else self._out.get(len(ids)))
        self.counters.requests += len(ids)
        distinct = len(np.unique(ids))
        self.counters.distinct += distinct
        self.counters.storage_rows += distinct
        return rows

    def io_counters(self):
        return self.store.counters

    def storage_info(self) -> dict:
        return dict(self.store.path_info or {})

    def memory(self) -> dict:
        """What holds rows: the memory reader its rows, mmap the page cache (uncapped: every
        row), the block readers nothing."""
        reader = self.store.reader_name
        held = self.store.num_rows * self.store.row_bytes if reader == "memory" else \
            self.feature_bytes if reader == "mmap" else 0
        return device_memory(held, 0, self.feature_bytes)

    def close(self) -> None:
        self.store.close()


class DeviceCacheSource(FeatureSource):
    """The contract over lsm_gnn.cache.device_source.DeviceCachedFeatureSource (the cache with
    its rows on a torch device; fetch returns a tensor there). The wrapped cache validates the
    ids, sizes itself from the config, and leaves its store open: `close()` closes both."""

    def __init__(self, cache):
        self.cache = cache
        self.counters = cache.counters
        self.num_rows = cache.num_rows
        self.device = cache.device

    def check_ids(self, ids, what: str = "ids"):
        return ids  # the cache checks them (range and ownership)

    def _advance(self, window) -> None:
        self.cache.advance(window)

    def _fetch(self, ids):
        return self.cache.fetch(ids)

    @property
    def last_tiers(self):
        return self.cache.last_tiers

    def stats(self) -> dict:
        return dict(self.cache.stats)

    def stage_seconds(self) -> dict:
        return cache_stage_seconds(self.cache.stats)

    def io_counters(self):
        return self.cache.store.counters

    def storage_info(self) -> dict:
        return dict(self.cache.store.path_info or {})

    def memory(self) -> dict:
        from lsm_gnn.cache.budget import for_devices

        return for_devices(self.cache.budget.record(), 1)

    def close(self) -> None:
        self.cache.close()
        self.cache.store.close()


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


# ---- the factory ------------------------------------------------------------------------------------
def system_name(cfg) -> str:
    """The record's `system`: memory (the ideal), lsm (cache engine), isolated, or the plain reader's name."""
    if not cfg.cache.enabled:
        return "memory" if cfg.storage.reader == "memory" else cfg.storage.reader
    if cfg.distributed.devices > 1 and cfg.distributed.mode == "isolated":
        return "isolated"
    return "lsm"


def open_store(cfg, layout, row_map=None):
    """The FeatureStore `cfg.storage` describes over `layout` (a dataset's or an owner's file)."""
    from lsm_gnn.storage.open import open_feature_store

    s = cfg.storage
    opts = {"advice": s.mmap_advice} if s.reader == "mmap" else {}
    return open_feature_store(layout, reader=s.reader, queue_depth=s.queue_depth, threads=s.threads,
                              backend=s.backend, drop_page_cache=s.drop_page_cache, row_map=row_map, **opts)


def _over_store(cfg, store, lay, static, *, num_owners: int, owner: int) -> FeatureSource:
    """A device's own source over `store`: plain storage, the cache, or the cache on the GPU."""
    if not cfg.cache.enabled:
        return StoreFeatureSource(store, feature_bytes=lay.num_rows * lay.row_bytes)
    args = (store, lay.num_rows, lay.dim, lay.dtype, cfg.cache, static)
    try:
        if cfg.train.device == "cuda":
            from lsm_gnn.cache.device_source import DeviceCachedFeatureSource

            return DeviceCacheSource(DeviceCachedFeatureSource(*args, num_owners=num_owners, owner=owner,
                                                               device="cuda"))
        from lsm_gnn.cache.fetcher import CachedFeatureSource

        return CachedFeatureSource(*args, num_owners=num_owners, owner=owner, owns_store=True)
    except ModuleNotFoundError as e:  # pragma: no cover - a missing optional module
        store.close()
        raise ConfigError("<config>", "cache.enabled", f"the cache engine is not available ({e})") from None
    except BaseException:
        store.close()
        raise


def make_feature_source(cfg, dataset, rank: int = 0, world: int = 1, *, heartbeat=None, exchange=None,
                        owner_layouts=None) -> FeatureSource:
    """The feature source `cfg` asks for, on rank `rank` of `world` devices.

    One device's source (world 1 without a heartbeat; inside a rank, see below):
      cache off, storage.reader memory  MemoryFeatureSource (the ideal: every row loaded up front,
                                        reported as preprocessing, not epoch time)
      cache off                         StoreFeatureSource (direct / buffered / mmap / gpu reader)
      cache on                          CachedFeatureSource over the configured store (over an
                                        in-memory store with reader memory: the cache's decisions
                                        without disk I/O); with train.device cuda,
                                        DeviceCachedFeatureSource (rows on the GPU) in DeviceCacheSource
    A rank of a multi-device run (world > 1, or a launcher's `heartbeat`):
      distributed.mode shared, world > 1  SharedCacheFeatureSource: the rank's own source (as
                                        above, over its owner file, serving ids v % world == rank)
                                        plus the exchange; rows on the device when its cache is
      isolated (or world 1)             IsolatedFeatureSource over the one-device source
    `exchange`: the Exchange to use (default: one on a process group of its own);
    `owner_layouts`: the per-owner files (default: written or reused beside the dataset).
    """
    if not 0 <= rank < world:
        raise InputError(f"rank must lie in [0, world), found rank={rank} world={world}")
    lay = dataset.features()
    if world > 1 and cfg.distributed.mode == "shared":
        return _shared_source(cfg, dataset, lay, rank, world, heartbeat, exchange, owner_layouts)
    if not cfg.cache.enabled and cfg.storage.reader == "memory":
        local = MemoryFeatureSource(np.array(lay.view("r")))
    else:
        local = _over_store(cfg, open_store(cfg, lay), lay, dataset.static_scores(), num_owners=1, owner=0)
    if world == 1 and heartbeat is None:
        return local
    from lsm_gnn.multidevice.health import NULL_HEARTBEAT
    from lsm_gnn.multidevice.source import IsolatedFeatureSource

    return IsolatedFeatureSource(local, rank, heartbeat=heartbeat or NULL_HEARTBEAT, devices=world)


def _shared_source(cfg, dataset, lay, rank, world, heartbeat, exchange, owner_layouts):
    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn.multidevice.group import exchange_group, resolve_backend
    from lsm_gnn.multidevice.health import NULL_HEARTBEAT
    from lsm_gnn.multidevice.owner_files import ensure_owner_files
    from lsm_gnn.multidevice.source import SharedCacheFeatureSource
    from lsm_gnn.storage.open import owner_row_map

    hb = heartbeat or NULL_HEARTBEAT
    layouts = owner_layouts or ensure_owner_files(dataset, world, owners=[rank], progress=False)
    # the owner's own file: global id v is its row v // G (ids of other owners are an error)
    store = open_store(cfg, layouts[rank], row_map=owner_row_map(rank, world))
    local = _over_store(cfg, store, lay, dataset.static_scores(), num_owners=world, owner=rank)
    try:
        ex = exchange or Exchange(rank, world, device="cuda" if resolve_backend(cfg) == "nccl" else "cpu",
                                  group=exchange_group(cfg), heartbeat=hb,
                                  transport=cfg.distributed.row_transport)
        return SharedCacheFeatureSource(local, ex, num_rows=lay.num_rows, row_dim=lay.dim, dtype=lay.dtype,
                                        max_window=_lookahead(cfg.cache), heartbeat=hb)
    except BaseException:
        local.close()
        raise

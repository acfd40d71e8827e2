"""`make_feature_source(cfg, dataset, rank, world, ...)`: the one factory of feature sources.

Every training run, rank (trace replay included) and plain-loader baseline gets its source here.
The factory stands above every source it builds (the contract, lsm_gnn.contract, below them all):
it imports them, none of them imports it. Caches size themselves from the config
(lsm_gnn.cache.budget.memory_budget); the factory computes no sizes.
"""

from __future__ import annotations


from lsm_gnn.sources.cached_device import DeviceCachedFeatureSource
from lsm_gnn.sources.cached import CachedFeatureSource
from lsm_gnn.contract import FeatureSource
from lsm_gnn.multidevice.exchange import Exchange
from lsm_gnn.multidevice.group import exchange_group, resolve_backend
from lsm_gnn.multidevice.health import NULL_HEARTBEAT
from lsm_gnn.multidevice.owner_files import ensure_owner_files, replica_layout
from lsm_gnn.sources.isolated import IsolatedFeatureSource
from lsm_gnn.sources.shared import SharedCacheFeatureSource
from lsm_gnn.sources.ideal import MemoryFeatureSource
from lsm_gnn.sources.store import StoreFeatureSource
from lsm_gnn.ownership import owner_row_map
from lsm_gnn.storage.open import open_from_config
from lsm_gnn.utils.errors import InputError


def _over_store(cfg, store, lay, static, *, num_owners: int, owner: int) -> FeatureSource:
    """A device's own source over `store` (which it closes): plain storage, the cache, or the
    cache with its rows on the GPU."""
    if not cfg.cache.enabled:
        return StoreFeatureSource(store, feature_bytes=lay.num_rows * lay.row_bytes)
    args = (store, lay.num_rows, lay.dim, lay.dtype, cfg.cache, static)
    try:
        if cfg.train.device == "cuda":
            return DeviceCachedFeatureSource(*args, num_owners=num_owners, owner=owner, device="cuda",
                                             owns_store=True)
        return CachedFeatureSource(*args, num_owners=num_owners, owner=owner, owns_store=True)
    except BaseException:
        store.close()
        raise


def make_feature_source(cfg, dataset, rank: int = 0, world: int = 1, *, heartbeat=None, exchange=None,
                        owner_layouts=None, storage_rank: int | None = None) -> FeatureSource:
    """The feature source `cfg` asks for, on rank `rank` of `world` devices.

    One device's source (world 1 without a heartbeat; inside a rank, see below):
      cache off, storage.reader memory  MemoryFeatureSource (the ideal: every row loaded up front,
                                        reported as preprocessing, not epoch time; with train.device
                                        cuda, every row in the GPU's memory)
      cache off                         StoreFeatureSource (direct / buffered / mmap / gpu reader)
      cache on                          CachedFeatureSource over the configured store (over an
                                        in-memory store with reader memory: the cache's decisions
                                        without disk I/O); with train.device cuda,
                                        DeviceCachedFeatureSource (rows on the GPU)
    A rank of a multi-device run (world > 1, or a launcher's `heartbeat`):
      distributed.mode shared, world > 1  SharedCacheFeatureSource: the rank's own source (as
                                        above, over its owner file, serving ids v % world == rank)
                                        plus the exchange; rows on the device when its cache is
      isolated (or world 1)             IsolatedFeatureSource over the one-device source
    `exchange`: the Exchange to use (default: one on a process group of its own);
    `owner_layouts`: the per-owner files (default: written or reused beside the dataset, or in
    each rank's folder of `storage.rank_dirs`);
    `storage_rank`: the rank whose folder of `storage.rank_dirs` a one-device source reads its
    replica of features.bin from (a plain loader's rank, which builds its source with world 1;
    default: `rank`).
    """
    if not 0 <= rank < world:
        raise InputError(f"rank must lie in [0, world), found rank={rank} world={world}")
    lay = dataset.features()
    if world > 1 and cfg.distributed.mode == "shared":
        return _shared_source(cfg, dataset, lay, rank, world, heartbeat, exchange, owner_layouts)
    if not cfg.cache.enabled and cfg.storage.reader == "memory":
        local = MemoryFeatureSource(lay.load_rows(verify=cfg.storage.verify_checksums),
                                    device="cuda" if cfg.train.device == "cuda" else None)
    else:
        # every row of the file, from this rank's own folder where each rank has one
        read = lay if cfg.storage.rank_dirs is None else replica_layout(
            dataset, cfg.storage.rank_dirs, rank if storage_rank is None else storage_rank, cfg.distributed.devices)
        local = _over_store(cfg, open_from_config(read, cfg.storage, time_scale=cfg.emulation.time_scale), lay,
                            dataset.static_scores(), num_owners=1, owner=0)
    if world == 1 and heartbeat is None:
        return local
    return IsolatedFeatureSource(local, rank, heartbeat=heartbeat or NULL_HEARTBEAT, devices=world)


def _shared_source(cfg, dataset, lay, rank, world, heartbeat, exchange, owner_layouts):
    hb = heartbeat or NULL_HEARTBEAT
    layouts = owner_layouts or ensure_owner_files(dataset, world, out_dir=cfg.dataset.owners_dir, owners=[rank],
                                                   progress=False, rank_dirs=cfg.storage.rank_dirs)
    # the owner's own file: global id v is its row v // G (ids of other owners are an error)
    store = open_from_config(layouts[rank], cfg.storage, row_map=owner_row_map(rank, world),
                             time_scale=cfg.emulation.time_scale)
    local = _over_store(cfg, store, lay, dataset.static_scores(), num_owners=world, owner=rank)
    try:
        nccl = resolve_backend(cfg.distributed, cfg.train.device) == "nccl"
        ex = exchange or Exchange(rank, world, device="cuda" if nccl else "cpu",
                                  group=exchange_group(cfg.distributed, cfg.train.device), heartbeat=hb,
                                  transport=cfg.distributed.row_transport)
        # the future batches the owner's policy reads (W, or K for horizon)
        max_horizon = cfg.cache.horizon
        return SharedCacheFeatureSource(local, ex, num_rows=lay.num_rows, row_dim=lay.dim, dtype=lay.dtype,
                                        max_horizon=max_horizon, heartbeat=hb, testbed=cfg.emulation.testbed)
    except BaseException:
        local.close()
        raise

"""Plain storage loaders: lsm-gnn's sampler, model and loop with features read straight from storage.

- `mmap`: a numpy memmap gather (the DGL mmap loader GIDS compares against); the page cache is the
  only cache. Its pages are dropped before the run and the page cache is capped with a cgroup
  memory limit (`lsm_gnn.storage.memcap`) to a budget, by default LSM-GNN's total feature memory, with
  kernel readahead off (`storage.mmap_advice: random`, set by baselines.harness). The
  fetch runs in the train thread (`train.overlap_fetch: false`) so no train-step allocation
  coincides with a capped fetch. Its storage bytes are what the kernel read during the fetches
  (`/proc/self/io` read_bytes around each one, readahead and re-faults included), counted over the
  same timed iterations as every other system's; its reads are those bytes in 4 KiB faults.
- `direct`: O_DIRECT reads of every requested row, no cache at all.

The store source is lsm_gnn.sources.factory.make_feature_source's (the plain store `cfg.storage`
describes); the mmap system runs it under the cap (`CappedStoreSource`). `plain_worker` runs
inside each rank started by `lsm_gnn.ranks.launch.run_multi_device`.
"""

from __future__ import annotations

import numpy as np

from lsm_gnn.cache.budget import device_memory
from lsm_gnn.contract import FeatureSource
from lsm_gnn.sources.factory import make_feature_source
from lsm_gnn.sources.store import StoreFeatureSource
from lsm_gnn.storage.base import IOCounters
from lsm_gnn.storage.mmap_store import PAGE  # the unit the kernel faults file pages in
from lsm_gnn.storage.pagecache import kernel_read_bytes


class CappedStoreSource(FeatureSource):
    """A plain store source whose every fetch runs under the page-cache cap (`cap`, a
    lsm_gnn.storage.memcap.PageCacheCap); its memory is the page cache it may hold.

    Its I/O counters are the kernel's: the bytes read during each fetch (`/proc/self/io`, so
    readahead and pages faulted in again after the cap evicted them count), and one read per 4 KiB
    page of them. The store's own count (one read per distinct page a gather touches) is a lower
    bound that misses both; `stats()["store_page_bytes"]` keeps it. The training loop takes its
    per-batch deltas, so the record counts the same timed iterations as for every other system:
    the process-wide counter over the whole run would add the warm-up, the cold epoch and
    evaluation."""

    fetch_stage = "fetch_storage"

    def __init__(self, inner: StoreFeatureSource, cap, row_bytes: int):
        inner.reuse_outputs = False  # the cap's arithmetic counts each batch's output as new memory
        self.inner, self.cap, self.row_bytes = inner, cap, int(row_bytes)
        self.counters, self.heartbeat = inner.counters, inner.heartbeat
        self.kernel = IOCounters()

    def check_ids(self, ids, what: str = "ids"):
        return ids  # the store source checks them

    def _fetch(self, ids) -> np.ndarray:
        self.cap.before_fetch(len(ids) * self.row_bytes)
        read0 = kernel_read_bytes()
        try:
            return self.inner.fetch(ids)
        finally:
            read = max(0, kernel_read_bytes() - read0)
            self.cap.after_fetch()
            self.kernel.bytes_read += read
            self.kernel.io_ops += -(-read // PAGE)
            self.kernel.batches += 1

    def io_counters(self):
        return self.kernel

    def stats(self) -> dict:
        return {"store_page_bytes": int(self.inner.io_counters().bytes_read)}

    def storage_info(self) -> dict:
        return self.inner.storage_info()

    def memory(self) -> dict:
        """Each device's share of the page-cache budget (uncapped: every row)."""
        fb = self.inner.feature_bytes
        return device_memory(self.cap.budget if self.cap.enabled else fb, 0, fb,
                             page_cache_capped=bool(self.cap.enabled))

    def close(self) -> None:
        self.inner.close()


def plain_worker(cfg, rank: int, world_size: int, heartbeat, args: dict) -> dict:
    """One rank of the mmap or direct system (`worker="baselines.loaders:plain_worker"`)."""
    import torch.distributed as dist

    from lsm_gnn.storage.memcap import PageCacheCap
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.ranks.workers import source_metrics
    from lsm_gnn.train.loop import import_optimizer, run_training

    import_optimizer(cfg)  # while still starting (lsm_gnn.train.loop.import_optimizer)
    dataset = Dataset(cfg.dataset.path)
    lay = dataset.features()
    reader = cfg.storage.reader
    # the plain store (cache off): every rank reads the whole file (its replica in its own folder
    # where storage.rank_dirs gives each rank one)
    src = make_feature_source(cfg, dataset, storage_rank=rank)
    src.heartbeat = heartbeat  # a rank that fetches is alive
    cap = None
    if reader == "mmap":
        budget = int(args.get("page_cache_budget", 0)) // world_size  # each rank caps its own share
        # the file this rank maps: features.bin, or its replica in the rank's own folder
        cap = PageCacheCap(budget, src.store.path, enabled=bool(args.get("cap", True))).__enter__()
        src = CappedStoreSource(src, cap, lay.row_bytes)
    heartbeat.beat()
    try:
        rec = run_training(cfg, rank=rank, world_size=world_size, feature_source=src,
                           process_group_ready=world_size > 1, progress=False, record_path=None)
    finally:
        if cap is not None:
            cap.close()
        src.close()
    m = rec["metrics"]
    if reader == "mmap":
        caps = [cap.info()]
        if world_size > 1 and dist.is_initialized():
            caps = [None] * world_size
            dist.all_gather_object(caps, cap.info())
        m["page_cache_cap"] = {**caps[0], "budget_bytes": sum(c["budget_bytes"] for c in caps),
                               "peak_page_cache_bytes": _sum_or_none(c["peak_page_cache_bytes"] for c in caps),
                               "stall_lifts": sum(c["stall_lifts"] for c in caps), "ranks": len(caps)}
    return {"record": rec, "source": source_metrics(src)}


def _sum_or_none(values):
    values = list(values)
    return None if any(v is None for v in values) else sum(values)

"""Plain storage loaders: lsm-gnn's sampler, model and loop with features read straight from storage.

- `mmap`: a numpy memmap gather (the DGL mmap loader GIDS compares against); the page cache is the
  only cache. Its pages are dropped before the run and the page cache is capped with a cgroup
  memory limit (`baselines.memcap`) to a budget, by default the lsm-gnn caches' total bytes. The
  fetch runs in the train thread (`train.overlap_fetch: false`) so no train-step allocation
  coincides with a capped fetch. Storage bytes are what the kernel read for the process
  (`/proc/self/io` read_bytes, readahead included), next to the store's page-level lower bound.
- `direct`: O_DIRECT reads of every requested row, no cache at all.

`plain_worker` runs inside each rank started by `lsm_gnn.multidevice.launch.run_multi_device`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lsm_gnn.train.sources import StoreFeatureSource


def kernel_read_bytes() -> int:
    """Bytes this process caused to be read from storage (page faults and readahead included)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


class CappedStoreSource(StoreFeatureSource):
    """A plain store whose every fetch runs under the page-cache cap."""

    reuse_outputs = False  # the cap's arithmetic counts each batch's output as new memory

    def __init__(self, store, cap, row_bytes: int, heartbeat=None):
        super().__init__(store, heartbeat=heartbeat)
        self.cap, self.row_bytes = cap, row_bytes

    def fetch(self, ids: np.ndarray) -> np.ndarray:
        self.cap.before_fetch(len(ids) * self.row_bytes)
        try:
            return super().fetch(ids)
        finally:
            self.cap.after_fetch()


def plain_worker(cfg, rank: int, world_size: int, heartbeat, args: dict) -> dict:
    """One rank of the mmap or direct system (`worker="baselines.loaders:plain_worker"`)."""
    import torch.distributed as dist

    from baselines.memcap import PageCacheCap
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.multidevice.launch import source_metrics
    from lsm_gnn.storage.open import open_feature_store
    from lsm_gnn.train.loop import run_training

    dataset = Dataset(cfg.dataset.path)
    lay = dataset.features()
    reader = cfg.storage.reader
    opts = {}
    if reader == "mmap" and args.get("cap", True):
        # under a page-cache cap as small as the caches' budget, readahead evicts the rows being
        # gathered and the loader thrashes; a cache-aware mmap loader would madvise(RANDOM) too
        opts = dict(advice="random")
    if reader == "direct":
        s = cfg.storage
        opts = dict(queue_depth=s.queue_depth, threads=s.threads, backend=s.backend)
    store = open_feature_store(lay, reader=reader, drop_page_cache=cfg.storage.drop_page_cache, **opts)
    cap = None
    if reader == "mmap":
        budget = int(args.get("page_cache_budget", 0)) // world_size  # each rank caps its own share
        cap = PageCacheCap(budget, lay.path, enabled=bool(args.get("cap", True))).__enter__()
        src = CappedStoreSource(store, cap, lay.row_bytes, heartbeat=heartbeat)
    else:
        src = StoreFeatureSource(store, heartbeat=heartbeat)  # a rank that fetches is alive
    heartbeat.beat()
    read0 = kernel_read_bytes()
    try:
        rec = run_training(cfg, rank=rank, world_size=world_size, feature_source=src,
                           process_group_ready=world_size > 1, progress=False, record_path=None)
    finally:
        if cap is not None:
            cap.close()
        src.close()
    mine = {"kernel_read_bytes": kernel_read_bytes() - read0, "page_cache_cap": cap.info() if cap else None}
    everyone = [mine]
    if world_size > 1 and dist.is_initialized():
        everyone = [None] * world_size
        dist.all_gather_object(everyone, mine)
    m = rec["metrics"]
    m["traffic"]["storage_bytes_store_count"] = m["traffic"].get("storage_bytes", 0)
    m["traffic"]["storage_bytes_kernel"] = sum(e["kernel_read_bytes"] for e in everyone)
    if reader == "mmap":
        caps = [e["page_cache_cap"] for e in everyone]
        m["page_cache_cap"] = {**caps[0], "budget_bytes": sum(c["budget_bytes"] for c in caps),
                               "peak_page_cache_bytes": _sum_or_none(c["peak_page_cache_bytes"] for c in caps),
                               "stall_lifts": sum(c["stall_lifts"] for c in caps), "ranks": len(caps)}
    return {"record": rec, "source": source_metrics(src)}


def _sum_or_none(values):
    values = list(values)
    return None if any(v is None for v in values) else sum(values)

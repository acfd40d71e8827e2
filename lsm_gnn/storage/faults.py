"""What one page fault of the mmap loader costs on this machine, measured the loader's way.

P processes (the devices of a run) each gather batches of distinct random rows from the feature
file through the mmap system's own store (a numpy memmap, readahead off), under the page-cache cap
(lsm_gnn.storage.memcap, each process capped at `cap_fraction` of the file), all at once, as the mmap
system's ranks do. Per process: the gather's seconds over the pages the kernel read for it
(`/proc/self/io`), after a warm-up. fio's queue-depth-1 jobs give the device's latency; this adds
what the fio figure leaves out and the loader pays: the cgroup's reclaim of an evicted page for
every page faulted in, the memcg charge, and several processes faulting on one device. On the VM:
fio 49 us per read alone and 64 us beside a second job; the mmap system's own fetches 108-116 us
per fault at batch 128 (2 ranks, 2026-12-01).

Used by `lsm-gnn bench storage` (the `fault.capped_mmap_s` figure) and, through it, by
`lsm-gnn project --storage-from` (`storage.fault_s`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import numpy as np

from lsm_gnn.storage.memcap import PageCacheCap
from lsm_gnn.storage.mmap_store import PAGE
from lsm_gnn.storage.pagecache import kernel_read_bytes


def _one_process(args: tuple) -> dict:
    dataset, batch, batches, warmup, budget, seed, start = args
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.storage.open import open_feature_store

    lay = Dataset(dataset).features()
    store = open_feature_store(lay, "mmap", advice="random")  # the mmap system's store, readahead off
    rng = np.random.default_rng(seed)
    seconds, faults = 0.0, 0
    with PageCacheCap(budget, lay.path) as cap:
        capped = cap.active
        while time.time() < start:  # every process starts gathering at the same moment
            time.sleep(0.001)
        for i in range(warmup + batches):
            ids = np.unique(rng.integers(0, lay.num_rows, batch))
            cap.before_fetch(len(ids) * lay.row_bytes)
            read0, t0 = kernel_read_bytes(), time.perf_counter()
            out = store.read_rows(ids)
            t, read = time.perf_counter() - t0, kernel_read_bytes() - read0
            cap.after_fetch()
            del out
            if i >= warmup:
                seconds += t
                faults += -(-read // PAGE)
    store.close()
    return {"seconds": seconds, "faults": faults, "capped": capped}


def capped_fault_seconds(dataset: str | os.PathLike, *, processes: int = 2, batch: int = 4096, batches: int = 20,
                         warmup: int | None = None, cap_fraction: float = 0.1, seed: int = 0) -> dict:
    """Seconds per page fault of `processes` capped mmap gathers from `dataset`'s features running
    at once (see the module). `warmup` (default: the batches that fill the cap, + 2): the mmap
    system runs at its cap, where every page faulted in first costs the reclaim of another; below
    the cap a fault is cheaper. On the VM, with 5 warm-up batches of 4096 rows (the cap of
    409.6 MB was only reached in the last measured batch) this gave 84-109 us per fault while the
    mmap system's own fetches took 108-116 us."""
    from lsm_gnn.datasets.format import Dataset

    lay = Dataset(dataset).features()
    budget = int(cap_fraction * lay.file_bytes)
    batch = min(batch, lay.num_rows)
    if warmup is None:
        warmup = -(-budget // (batch * lay.row_bytes)) + 2
    start = time.time() + 2.0  # after every process has started and set up its cap
    jobs = [(os.fspath(dataset), batch, batches, warmup, budget, seed + p, start) for p in range(processes)]
    with mp.get_context("spawn").Pool(processes) as pool:
        per = pool.map(_one_process, jobs)
    faults = sum(r["faults"] for r in per)
    return {"processes": processes, "batch": batch, "batches": batches, "warmup": warmup, "cap_bytes_per_process": budget,
            "capped": all(r["capped"] for r in per), "faults": faults,
            "fault_s": (sum(r["seconds"] for r in per) / faults) if faults else None,
            "per_process": per}

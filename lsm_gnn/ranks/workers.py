"""What each rank runs (inside its process, after joining the group): the workers.

- `train_worker`: the training loop with the rank's feature source (shared cache or isolated);
- `trace_worker`: replays a recorded request trace through the same feature sources, no model
  (what `lsm-gnn bench multidevice` and the tests use);
- any `module:function` with the same signature (e.g. `baselines.loaders:plain_worker`).

A worker returns a JSON-able dict; `source_metrics` is what a rank's feature source contributes
to the merged record (lsm_gnn.ranks.merge.merge_records).
"""

from __future__ import annotations

import importlib
import time

import numpy as np

from lsm_gnn.config import RunConfig
from lsm_gnn.records import numeric_stats
from lsm_gnn.multidevice.health import Heartbeat
from lsm_gnn.sources.factory import make_feature_source


def source_metrics(src) -> dict:
    """What a rank contributes to the merged record: rows, stats, storage I/O, memory."""
    stats = src.stats()
    out = {"rows": src.counters.as_dict(), "stats": numeric_stats(stats), "memory": src.memory()}
    if stats.get("exchange_transport"):  # a name, which numeric_stats leaves out
        out["row_transport"] = stats["exchange_transport"]
    if stats.get("exchange_transport_note"):  # why `auto` fell back to the collective
        out["row_transport_note"] = stats["exchange_transport_note"]
    io = src.io_counters()
    if io is not None:
        out["io"] = io.as_dict()
    return out


def train_worker(cfg: RunConfig, rank: int, world_size: int, heartbeat: Heartbeat, args: dict) -> dict:
    """The training loop of one rank with the shared (or isolated) feature source."""
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.train.loop import import_optimizer, run_training

    import_optimizer(cfg)  # before the source's first collective: still starting
    dataset = Dataset(cfg.dataset.path)
    src = make_feature_source(cfg, dataset, rank, world_size, heartbeat=heartbeat)
    heartbeat.beat()
    try:
        rec = run_training(cfg, rank=rank, world_size=world_size, feature_source=src,
                           process_group_ready=True, progress=False, record_path=None)
    finally:
        src.close()
    return {"record": rec, "source": source_metrics(src)}


def trace_worker(cfg: RunConfig, rank: int, world_size: int, heartbeat: Heartbeat, args: dict) -> dict:
    """Replay device `rank`'s part of a recorded trace through the feature source (no model).

    args: trace (path), verify (compare every row with features.bin), epoch_batches (batches
    per epoch, for per-epoch counts; default: the whole trace is one epoch).
    """
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.sim.trace import Trace
    from lsm_gnn.utils.errors import DataError

    dataset = Dataset(cfg.dataset.path)
    trace = Trace.load(args["trace"])
    if trace.num_devices != world_size:
        raise DataError(args["trace"], "trace devices", expected=world_size, found=trace.num_devices)
    mine = trace.device(rank)
    W = cfg.cache.horizon  # K for horizon
    truth = dataset.feature_array() if args.get("verify") else None
    src = make_feature_source(cfg, dataset, rank, world_size, heartbeat=heartbeat)
    per_epoch = args.get("epoch_batches") or len(mine)
    epochs, mismatched, per_iteration = [], 0, []
    try:
        t_epoch, start_rows = time.perf_counter(), 0
        for b, ids in enumerate(mine):
            e0 = (b // per_epoch) * per_epoch
            src.advance(mine[b + 1: min(b + 1 + W, e0 + per_epoch)] if W else [])
            before = src.counters.storage_rows
            rows = src.fetch(ids)
            per_iteration.append(src.counters.storage_rows - before)
            if truth is not None:
                rows = rows if isinstance(rows, np.ndarray) else rows.cpu().numpy()  # the device plane
                if not np.array_equal(rows, truth[ids]):
                    mismatched += int((rows != truth[ids]).any(axis=1).sum())
            if (b + 1) % per_epoch == 0 or b + 1 == len(mine):
                epochs.append({"epoch": len(epochs), "seconds": time.perf_counter() - t_epoch,
                               "storage_rows": src.counters.storage_rows - start_rows,
                               "batches": b + 1 - e0})
                t_epoch, start_rows = time.perf_counter(), src.counters.storage_rows
    finally:
        src.close()
    if mismatched:
        raise DataError(dataset.features().path, f"rank {rank}: {mismatched} rows received differ from the file")
    return {"source": source_metrics(src), "epochs": epochs, "verified": truth is not None,
            "iterations": len(mine), "storage_rows_per_iteration": per_iteration}


WORKERS = {"train": train_worker, "trace": trace_worker}


def resolve_worker(name: str):
    """A worker by name: "train", "trace", or "module:function"."""
    if name in WORKERS:
        return WORKERS[name]
    module, attr = name.split(":")
    return getattr(importlib.import_module(module), attr)

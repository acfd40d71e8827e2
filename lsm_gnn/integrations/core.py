"""What the DGL and PyG integrations share: seeds per rank, the windowed loader, stats, the record.

`SeedBatches(seeds, batch_size, sample, ...)` is the sampler side of
lsm_gnn.train.loader.FeatureLoader for any per-batch sampling function: each epoch it deals the
seeds to the ranks exactly as lsm-gnn's own sampler does (lsm_gnn.sampling.deal_seeds), cuts them
into batches and calls `sample(seeds, epoch, step) -> MiniBatch`.

`WindowedLoader` runs FeatureLoader over it, so an integration samples the lookahead window
ahead (W batches, K for horizon: `lsm_gnn.train.loader.loader_horizon`), calls the source's `advance(window)` before
each `fetch`, overlaps sampling and fetching with the user's train step, and times every stage
as `lsm-gnn train` does. The user's step is the time between a yield and the next request (the
record's "train"; "other" is the loader's own work in the training thread). Every `iter(loader)`
is the next epoch (0, 1, ...: reshuffled with the seed), unless `set_epoch(e)` names one.

`loader.stats()` is the run record's metrics block so far (rows per tier, hit rates, storage
traffic, seconds per iteration and stage); `loader.record(path)` the whole record, in the schema
of `lsm-gnn train` (lsm_gnn.records), merged over the ranks under torch.distributed
(lsm_gnn.ranks.merge.merge_records, as the torchrun entry does) and written by rank 0.
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from lsm_gnn.contract import as_source
from lsm_gnn.records import numeric_stats
from lsm_gnn.models.blocks import batch_edges
from lsm_gnn.records import (dataset_block, emulation_records, epoch_window, new_record, system_name, training_metrics,
                             write_record)
from lsm_gnn.sampling import deal_seeds
from lsm_gnn.train.loader import FeatureLoader, StageTimes, loader_horizon
from lsm_gnn.utils.errors import InputError
from lsm_gnn.utils.machine import process_cpu_seconds


def process_rank() -> tuple[int, int]:
    """(rank, world size) of this process: torch.distributed's when a group is up, else (0, 1)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def require_homogeneous(dataset) -> None:
    """InputError unless the lsm-gnn dataset has one node type and one edge type."""
    if len(dataset.node_types) != 1 or len(dataset.edge_types) != 1:
        raise InputError(f"{dataset.root}: the DGL and PyG integrations take homogeneous datasets; this one has "
                         f"node types {list(dataset.node_types)} and edge types {list(dataset.edge_types)}")


def seed_array(seeds, what: str = "seeds") -> np.ndarray:
    """`seeds` (a tensor, array or list of node ids, or a boolean mask) as a 1-D int64 array."""
    if isinstance(seeds, torch.Tensor):
        seeds = seeds.detach().cpu().numpy()
    arr = np.asarray(seeds)
    if arr.dtype == bool:
        arr = np.flatnonzero(arr)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise InputError(f"{what}: expected a 1-D array of node ids or a boolean mask, "
                         f"found shape {arr.shape} dtype {arr.dtype}")
    return np.ascontiguousarray(arr, dtype=np.int64)


class SeedBatches:
    """Batches of an epoch's seeds for this rank, each sampled by `sample(seeds, epoch, step)`."""

    def __init__(self, seeds, batch_size: int, sample, *, seed: int = 0, shuffle: bool = True, rank: int = 0,
                 world_size: int = 1, drop_last: bool = False):
        self.seeds = seed_array(seeds)
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, found {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise InputError(f"rank must lie in [0, world_size), found rank={rank} world_size={world_size}")
        self.per_rank = len(self.seeds) // world_size
        if self.per_rank == 0:
            raise InputError(f"{len(self.seeds)} seeds are fewer than world_size={world_size}")
        self.batch_size, self.sample, self.seed, self.shuffle = int(batch_size), sample, int(seed), bool(shuffle)
        self.rank, self.world_size, self.drop_last = rank, world_size, bool(drop_last)
        if len(self) == 0:
            raise InputError(f"drop_last leaves no batch: {self.per_rank} seeds per rank, batch_size {batch_size}")

    def __len__(self) -> int:
        return self.per_rank // self.batch_size if self.drop_last else -(-self.per_rank // self.batch_size)

    def epoch_seeds(self, epoch: int) -> np.ndarray:
        return deal_seeds(self.seeds, epoch, seed=self.seed, shuffle=self.shuffle, rank=self.rank,
                          world_size=self.world_size)

    def epoch(self, epoch: int):
        seeds = self.epoch_seeds(epoch)
        for step in range(len(self)):
            yield self.sample(seeds[step * self.batch_size:(step + 1) * self.batch_size], epoch, step)


def setting(explicit, cfg, section: str, key: str):
    """An explicit argument, else the config's value, else the config's default (lsm_gnn.config)."""
    if explicit is not None:
        return explicit
    if cfg is not None:
        return getattr(getattr(cfg, section), key)
    from lsm_gnn.config import RunConfig

    return getattr(RunConfig.model_fields[section].default, key)


class WindowedLoader:
    """FeatureLoader over SeedBatches, with the stats and the run record (see the module docstring).
    Subclasses give `kind` and `_batch(item) -> what the user's loop receives`."""

    kind = "custom"

    def __init__(self, batches: SeedBatches, source, *, cfg=None, window: int | None = None, dataset=None,
                 sample_ahead: int | None = None, overlap_fetch: bool | None = None, device=None,
                 max_iters: int | None = None, warmup_iters: int | None = None):
        self.cfg, self.dataset, self.batches = cfg, dataset, batches
        self.source = as_source(source)
        if window is None:
            window = loader_horizon(cfg.cache, source) if cfg is not None else 0
        self.window = int(window)
        self.warmup_iters = int(setting(warmup_iters, cfg, "train", "warmup_iters"))
        if max_iters is None and cfg is not None and cfg.train.timed_iters is not None:
            max_iters = cfg.train.warmup_iters + cfg.train.timed_iters
        self.device = torch.device(setting(device, cfg, "train", "device"))
        self.sample_ahead = int(setting(sample_ahead, cfg, "sampler", "prefetch_batches"))
        self.overlap_fetch = bool(setting(overlap_fetch, cfg, "train", "overlap_fetch"))
        self.loader = FeatureLoader(batches, self.source, window=self.window, sample_ahead=self.sample_ahead,
                                    overlap_fetch=self.overlap_fetch, device=self.device, max_iters=max_iters)
        self.epochs: list[dict] = []
        self._next_epoch = 0
        self._current: dict | None = None
        self._cpu0 = (process_cpu_seconds(), time.perf_counter())  # the record's CPU share: from here

    # ---- the user's loop ------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next `iter(loader)` runs (as torch's DistributedSampler.set_epoch)."""
        self._next_epoch = int(epoch)

    def __iter__(self):
        epoch, self._next_epoch = self._next_epoch, self._next_epoch + 1
        return self._run(epoch)

    def _batch(self, item):
        return item

    def log_loss(self, loss) -> None:
        """Note the current iteration's loss for the record (a tensor or a number; optional)."""
        if self._current is None:
            raise InputError("log_loss: no epoch is running (call it inside the loop over the loader)")
        self._current["losses"].append(float(loss))

    def _run(self, epoch: int):
        cur = self._current = {"epoch": epoch, "items": [], "counts": [], "losses": [], "h2d": 0, "shapes": []}
        gen = self.loader.epoch(epoch)
        t_start = t_prev = time.perf_counter()
        try:
            for item in gen:
                out = self._batch(item)
                t_yield = time.perf_counter()
                try:
                    yield out
                finally:  # also when the user's loop stops here (break)
                    now = time.perf_counter()
                    st = StageTimes(item.times)
                    st["train"], st["wall"] = now - t_yield, now - t_prev
                    st["other"] = max(0.0, st["wall"] - st["train"] - st["wait"])
                    cur["items"].append(st)
                    cur["counts"].append(item.counts)
                    cur["shapes"].append((len(item.seeds), len(item.input_nodes), batch_edges(item.blocks), 0.0))
                    cur["h2d"] += item.h2d_bytes
                    t_prev = now
        finally:
            gen.close()
            cur["time_s"] = time.perf_counter() - t_start
            self.epochs.append(cur)
            self._current = None

    # ---- what it did ----------------------------------------------------------------------------
    def stats(self) -> dict:
        """The run record's metrics over the epochs run so far (this rank)."""
        return _metrics(self)[0]

    def record(self, path: str | os.PathLike | None = None) -> dict:
        """The run record (kind train) of the epochs run so far: this rank's, or under
        torch.distributed the ranks' merged (every rank must call it); rank 0 writes `path`."""
        rec = _record(self)
        rank, world = process_rank()
        cpu_s, wall_s = process_cpu_seconds() - self._cpu0[0], time.perf_counter() - self._cpu0[1]
        if world > 1:
            rec, cpu_s = _merged(self, rec, world, cpu_s)
        if self.cfg is not None:  # the storage device and time scale, as every training record has them
            emulation_records(rec, self.cfg, {"cpu_s": cpu_s, "wall_s": wall_s})
        if path is not None and rank == 0:
            write_record(path, rec)
        return rec

    def close(self) -> None:
        """Close the feature source (the loader does not own it otherwise)."""
        self.source.close()


# ---- the record (the vocabulary of lsm_gnn.train.loop) -----------------------------------------------
def _epoch_entry(ep: dict, per_epoch: int, warmup: int) -> tuple[dict, list]:
    its = ep["items"]
    skip = warmup if len(its) > warmup else 0  # an epoch shorter than the warm-up: all of it
    timed = its[skip:]
    full = len(its) >= per_epoch
    measured = epoch_window(timed, ep["counts"][skip:], ep["shapes"][skip:])
    out = {"epoch": ep["epoch"], "iterations": len(its), "time_s": ep["time_s"],
           "epoch_s": ep["time_s"] if full else measured["per_iteration"]["wall"] * per_epoch,
           "extrapolated": not full, **measured}
    if ep["losses"]:
        out["loss"], out["losses"] = float(np.mean(ep["losses"])), list(ep["losses"])
    return out, timed


def _metrics(loader: WindowedLoader) -> dict:
    from lsm_gnn.cache.budget import for_devices

    rank, world = process_rank()
    per_epoch = len(loader.batches)
    done = [_epoch_entry(ep, per_epoch, loader.warmup_iters) for ep in loader.epochs if ep["items"]]
    entries = [e for e, _ in done]
    src = loader.source
    source_stats = numeric_stats(src.stats())
    h2d = sum(ep["h2d"] for ep in loader.epochs) + source_stats.get("h2d_bytes", 0)
    # the user's own step runs between two batches: real compute, on the device the rows land on
    metrics = training_metrics(
        entries, [timed for _, timed in done], rank=rank, timed=False, warmup_iters=loader.warmup_iters,
        timed_window={"full_epoch": all(not e["extrapolated"] for e in entries), "timed_iters": None,
                       "iterations_per_epoch": per_epoch,
                       "iterations_run_per_epoch": [e["iterations"] for e in entries]},
        accelerator={"emulated": None, "device": str(getattr(src, "device", "cpu"))},
        host_to_device_bytes=h2d,
        source={"kind": src.source_name, "window": loader.window, "stats": source_stats,
                "storage_path": src.storage_info()},
        memory=for_devices(src.memory(), world), preprocessing_s=None, eval_s=0.0)
    metrics["accuracy"] = {"val": None, "test": None}
    metrics["pipeline"] = {"loader": loader.kind, "sample_ahead": loader.sample_ahead,
                           "overlap_fetch": loader.overlap_fetch, "torch_threads": torch.get_num_threads()}
    if loader.dataset is not None:
        metrics["dataset"] = dataset_block(loader.dataset)
    return metrics, entries


def _record(loader: WindowedLoader) -> dict:
    from lsm_gnn.config import config_to_dict

    cfg = loader.cfg
    rec = new_record("train", system_name(cfg) if cfg is not None else loader.source.source_name,
                     config_to_dict(cfg) if cfg is not None else {})
    rec["metrics"], rec["epochs"] = _metrics(loader)
    return rec


def _merged(loader: WindowedLoader, rec: dict, world: int, cpu_s: float) -> tuple[dict, float]:
    """Every rank's record and source figures gathered, merged as the torchrun entry merges them;
    and the ranks' CPU seconds summed (the merged record's CPU share counts every rank)."""
    from lsm_gnn.ranks.launch import run_head
    from lsm_gnn.ranks.merge import merge_records
    from lsm_gnn.ranks.workers import source_metrics

    if loader.cfg is None:
        raise InputError("record() under torch.distributed needs the run's config (cfg=...) to merge the ranks")
    gathered = [None] * world
    torch.distributed.all_gather_object(gathered, {"record": rec, "source": source_metrics(loader.source),
                                                   "cpu_s": cpu_s})
    merged = merge_records(run_head(loader.cfg), gathered, "train", max(ep["time_s"] for ep in loader.epochs) if loader.epochs
                           else 0.0)
    return merged, sum(g["cpu_s"] for g in gathered)


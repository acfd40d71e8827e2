"""The training loop of one device: `run_training(cfg) -> run record`.

Per epoch: the loader yields (input_nodes, seeds, blocks, features) with the sampler running
ahead and features fetched through the configured source (in-memory ideal, plain store, or the
LSM-GNN cache); Adam + cross-entropy; stage timers per iteration; validation accuracy after the
epoch, test accuracy at the end.

Timing (written to `metrics.time.timed_window`):
- whole epochs (`train.timed_iters` unset): each epoch's time is its measured wall time;
  `warmup_iters` only excludes the first iterations of every epoch from the per-iteration means.
- a timed window (`timed_iters` set): each epoch runs `warmup_iters + timed_iters` iterations and
  its epoch time is extrapolated: mean wall time per timed iteration x batches per epoch.
- cold = the first epoch (with a single timed epoch: extrapolated from all its iterations,
  warm-up included); steady = the mean of the later epochs (with a single timed epoch: its timed
  window, which follows the warm-up). The rule, the hit rates and the rest of the metrics block are
  lsm_gnn.records' (`training_metrics`), shared with the integrations' loaders.
`hidden_fetch_fraction` = 1 - (time the train step waited for inputs) / (fetch busy time): the
share of fetch time hidden behind compute (waits for sampling count against it, so it is a
lower bound).

Accelerator (`metrics.accelerator`): `train.accelerator: real` trains the model on train.device;
`emulated` replaces each train step by a wait of the profile's step time for that batch
(lsm_gnn.accelerator, after MLPerf Storage): no model is built, nothing is evaluated, the record's
accuracy is null with `trained: false`, and AU = busy time / wall time over the timed windows.

Multi-device: with world_size > 1 and torch.distributed initialised, seeds are sharded, the model
is wrapped in DDP, and the caller's feature source is used (lsm_gnn.multidevice). Only rank 0 writes a
record; every rank returns its own, with `metrics.ranks[rank]`.

Interrupts: the record's path is checked and locked before the run (a second run on it is
refused), and the record is written once, atomically, at the end. Ctrl-C writes nothing; any
other error, a dataset that does not open included, writes a record with status "failed" (if a
record path is set) and re-raises; a config rejected before training starts writes nothing. `process_group_ready` is accepted for the
launcher's benefit; whether a group is up is read from torch.distributed itself.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from lsm_gnn.accelerator import EmulatedAccelerator, load_accelerator, step_scale
from lsm_gnn.config import RunConfig, config_to_dict
from lsm_gnn.datasets.format import Dataset
from lsm_gnn.contract import FeatureSource, as_source
from lsm_gnn.records import numeric_stats
from lsm_gnn.models import build_model
from lsm_gnn.models.blocks import batch_edges
from lsm_gnn.metrics import mean_times
from lsm_gnn.records import claim_record, dataset_block, emulation_records, epoch_window, new_record, \
    system_name, training_metrics, write_record
from lsm_gnn.sampling import NeighborSampler
from lsm_gnn.sources.factory import make_feature_source
from lsm_gnn.sources.ideal import MemoryFeatureSource
from lsm_gnn.storage.emulated import timed_window_begin, timed_window_end, timed_windows_reset
from lsm_gnn.train.evaluate import evaluate
from lsm_gnn.train.loader import FeatureLoader, StageTimer, loader_horizon
from lsm_gnn.train.sync import Meeting, allreduce_gradients
from lsm_gnn.utils.errors import ConfigError, DataError, InputError, NumericalError
from lsm_gnn.utils.machine import cpu_time_around


def _storage_info(source) -> dict:
    """The source's storage path, its emulated pacing judged on this run's timed windows (then
    forgotten, so a later run in this process starts without them)."""
    try:
        return source.storage_info()
    finally:
        timed_windows_reset()


def _distributed_ready(world_size: int) -> bool:
    return world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized()


def _check(cfg: RunConfig, world_size: int, source: str):
    if cfg.train.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(source, "train.device", "cuda requested but torch sees no CUDA device")
    if world_size > 1 and not _distributed_ready(world_size):
        raise InputError(f"world_size={world_size} needs an initialised torch.distributed process group "
                         "(use `lsm-gnn train --devices N`, which starts one)")


def _clamp_window(cfg: RunConfig, per_epoch: int) -> tuple[RunConfig, dict | None]:
    """A lookahead window W longer than the epoch becomes the epoch's length, said in the record
    (`metrics.source.window_clamp`; `lsm-gnn train` prints it): the window is filled within an epoch, and
    `--window 1000` on a 235-iteration epoch left the victim buffer empty (0 bytes) while the
    record said it was enabled. A clamp, not an error: the default W = 8 is longer than the epoch
    of a tiny graph."""
    w = cfg.cache.window
    if w <= per_epoch:
        return cfg, None
    clamp = {"requested": w, "used": per_epoch, "iterations_per_epoch": per_epoch}
    return cfg.model_copy(update={"cache": cfg.cache.model_copy(update={"window": per_epoch})}), clamp


def _non_finite(loss: float, x: torch.Tensor, input_nodes, dataset, epoch: int, step: int, lr: float):
    """Stop on a non-finite loss, naming the feature row that caused it (checked only now: the
    finite case costs the one `isfinite` of the loss per step). DataError when a fetched row is
    not finite (a row of the file, whatever its checksum says), NumericalError otherwise."""
    bad = (~torch.isfinite(x)).any(dim=1).nonzero().flatten()
    where = f"epoch {epoch} step {step}: the loss is {loss}"
    if bad.numel():
        nodes = input_nodes.cpu().numpy() if isinstance(input_nodes, torch.Tensor) else np.asarray(input_nodes)
        ids = nodes[bad.cpu().numpy()]
        more = f" ({bad.numel()} of the batch's {len(x)} input rows are)" if bad.numel() > 1 else ""
        raise DataError(dataset.features().path, f"row {int(ids[0])} holds non-finite values{more}; {where} "
                        "(`lsm-gnn dataset verify` reports every such row)")
    raise NumericalError(f"{where} with every input row finite: training diverged (train.lr {lr}); "
                         "lower the learning rate")


def _accelerator(cfg: RunConfig):
    """The emulated accelerator of `train.accelerator: emulated` (None: the model really trains)."""
    tr = cfg.train
    if tr.accelerator != "emulated":
        return None
    return EmulatedAccelerator(load_accelerator(tr.accelerator_profile), scale=step_scale(cfg))


def import_optimizer(cfg: RunConfig) -> None:
    """Import now what the optimiser imports on first use: torch.optim's first Adam imports
    torch._dynamo, 15-30 s on the loaded 2-core VM. A rank calls this while it is still starting
    (under the launcher's start-up limit), so that the import is not taken for a rank that stopped
    making progress (the watchdog then blamed the wrong rank). Nothing to import when an emulated
    accelerator trains nothing."""
    if cfg.train.accelerator != "emulated":
        import torch._dynamo  # noqa: F401


def run_training(cfg: RunConfig, *, rank: int = 0, world_size: int = 1, feature_source=None,
                 process_group_ready: bool = False, progress: bool = True, record_path=None) -> dict:
    """Train as `cfg` says; return the run record (and write it if a path is given, on rank 0)."""
    path = record_path if record_path is not None else (cfg.output.record if world_size == 1 else None)
    _check(cfg, world_size, "<config>")
    record = new_record("train", system_name(cfg), config_to_dict(cfg))
    own_source = feature_source is None
    opened: dict = {}
    # the record's path is checked and locked before anything runs (lsm_gnn.records.claim_record)
    with claim_record(path if rank == 0 else None):
        try:
            with _ctrl_c_between_iterations() as interrupted, cpu_time_around() as cpu:
                opened["interrupted"] = interrupted
                _train(cfg, record, rank, world_size, feature_source, progress, opened)
                if interrupted.is_set():  # Ctrl-C during the last evaluation
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise                                       # nothing written: no record that looks complete
        except Exception as e:
            # a config or argument rejected before training started is an error, not a failed run;
            # anything else (a dataset that does not open, a fault while training) is a failed run
            rejected = isinstance(e, (ConfigError, InputError)) and not opened.get("started")
            if path is not None and rank == 0 and not rejected:
                record["status"] = "failed"
                record["failure"] = {"rank": rank, "message": f"{type(e).__name__}: {e}"}
                try:
                    write_record(path, record)
                except Exception:  # noqa: BLE001 - never mask the original error
                    traceback.print_exc(file=sys.stderr)
            raise
        finally:
            if own_source and opened.get("source") is not None:
                opened["source"].close()
            if opened.get("eval_store") is not None:
                opened["eval_store"].close()
        if world_size == 1:  # one process's run: its storage device and time scale (G ranks: the merge's)
            emulation_records(record, cfg, cpu)
        if path is not None and rank == 0:
            write_record(path, record)
    return record


@contextlib.contextmanager
def _ctrl_c_between_iterations():
    """Turn the first Ctrl-C into a flag the loop checks after each iteration.

    A KeyboardInterrupt raised wherever the signal lands can hit a finalizer, where Python only
    prints "Exception ignored" and carries on training; the flag makes the stop certain. A second
    Ctrl-C interrupts at once (for a loop stuck in a collective).
    """
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def on_sigint(signum, frame):
        if flag.is_set():
            raise KeyboardInterrupt
        flag.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


class _StoreRows:
    """`rows[ids]` read through a plain store: what evaluation indexes instead of a memmap."""

    def __init__(self, store):
        self.store = store

    def __getitem__(self, ids):
        return self.store.read_rows(np.asarray(ids, dtype=np.int64))

    def close(self) -> None:
        self.store.close()


def _eval_rows(dataset, opened: dict) -> _StoreRows:
    """Evaluation reads the feature file with O_DIRECT (buffered where the filesystem refuses it),
    never through the training cache. A memmap gather faulted pages in with readahead: on the
    small graph one evaluation read ~10x the bytes it needed and outlasted the ranks' no-progress
    timeout, and it filled the page cache that the mmap baseline must not find warm."""
    from lsm_gnn.storage.open import open_feature_store
    from lsm_gnn.utils.errors import DataError

    try:
        store = open_feature_store(dataset.features(), reader="direct")
    except DataError:
        store = open_feature_store(dataset.features(), reader="buffered")
    opened["eval_store"] = _StoreRows(store)
    return opened["eval_store"]


def _train(cfg: RunConfig, record: dict, rank: int, world_size: int, feature_source, progress: bool,
           opened: dict) -> None:
    distributed = _distributed_ready(world_size)
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    torch.manual_seed(cfg.train.seed)
    device = torch.device(cfg.train.device)
    if device.type == "cuda" and distributed:
        device = torch.device("cuda", torch.cuda.current_device())

    dataset = Dataset(cfg.dataset.path)
    fanouts = list(cfg.sampler.fanouts)
    sampler = NeighborSampler(dataset, fanouts, cfg.sampler.batch_size, seed=cfg.train.seed,
                              shuffle=cfg.sampler.shuffle, rank=rank, world_size=world_size)
    cfg, window_clamp = _clamp_window(cfg, len(sampler))
    tr = cfg.train
    accel = _accelerator(cfg)
    # the ranks' gradient all-reduce (or, emulated, their meeting): the `sync` stage (lsm_gnn.train.sync)
    meet = Meeting() if (accel is not None and distributed) else None
    # an emulated accelerator trains nothing: no model, no optimiser, no evaluation
    model = build_model(cfg.model, dataset, len(fanouts)).to(device) if accel is None else None

    t0 = time.perf_counter()
    source = feature_source if feature_source is not None else make_feature_source(cfg, dataset, rank, world_size)
    if not isinstance(source, FeatureSource):  # a caller's own source: the config says its memory
        from lsm_gnn.cache.budget import system_memory

        lay = dataset.features()
        source = as_source(source, system_memory(cfg.cache, system_name(cfg), lay.num_rows, lay.row_bytes,
                                                 devices=world_size))
    opened["source"] = source
    preprocessing_s = time.perf_counter() - t0

    net = opt = None
    if model is not None:
        net = model
        if distributed:
            from torch.nn.parallel import DistributedDataParallel as DDP

            net = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
        opt = torch.optim.Adam(net.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    evaluating = tr.eval and accel is None

    per_epoch = len(sampler)
    timed = tr.timed_iters is not None
    planned = min(per_epoch, tr.warmup_iters + tr.timed_iters) if timed else per_epoch
    if tr.warmup_iters >= planned:
        raise ConfigError("<config>", "train.warmup_iters",
                          f"{tr.warmup_iters} warm-up iterations leave none to time in an epoch of {planned}")
    # the loader samples as far ahead as the policy reads (W, or K for horizon), when anything reads it
    window = loader_horizon(cfg.cache, feature_source)
    loader = FeatureLoader(sampler, source, window=window, sample_ahead=cfg.sampler.prefetch_batches,
                           overlap_fetch=tr.overlap_fetch, device=device, max_iters=planned)
    eval_features = None if not evaluating else \
        source.features if isinstance(source, MemoryFeatureSource) else _eval_rows(dataset, opened)
    # evaluation fetches nothing through the source: stamp the rank's heartbeat per batch instead
    eval_tick = source.heartbeat.beat if source.heartbeat is not None else None
    interactive = progress and sys.stderr.isatty()

    epochs, measured_items, eval_s = [], [], 0.0
    h2d = 0
    # an emulated store judges its pacing on the iterations the metrics measure (lsm_gnn.storage.emulated)
    timed_windows_reset()
    opened["started"] = True
    for epoch in range(tr.epochs):
        if net is not None:
            net.train()
        timer = StageTimer()
        losses, correct, seen = [], 0, 0
        batch_counts, shapes = [], []   # shapes: (seeds, input rows, edges, accelerator busy s) per batch
        bar = tqdm(total=planned, desc=f"epoch {epoch}", unit="it", disable=not interactive, leave=False)
        t_epoch = t_iter = time.perf_counter()
        if tr.warmup_iters == 0:
            timed_window_begin()
        for step, batch in enumerate(loader.epoch(epoch)):
            n_rows, n_edges = len(batch.input_nodes), batch_edges(batch.blocks)
            busy = 0.0
            if accel is not None:
                with timer.stage("train"):
                    busy = accel.step(n_rows, n_edges)
                loss_v = None
                if meet is not None:
                    with timer.stage("sync"):
                        meet()
            else:
                with timer.stage("train"):
                    x = batch.features if batch.features.dtype == torch.float32 else batch.features.float()
                    # DDP's all-reduce is taken out of the backward and timed as `sync` (lsm_gnn.train.sync)
                    with (net.no_sync() if distributed else contextlib.nullcontext()):
                        logits = net(batch.blocks, x)
                        loss = F.cross_entropy(logits, batch.labels)
                        opt.zero_grad(set_to_none=True)
                        loss.backward()
                if distributed:
                    with timer.stage("sync"):
                        allreduce_gradients(model.parameters(), world_size)
                with timer.stage("train"):
                    opt.step()
                    loss_v = float(loss.item())
                    if not math.isfinite(loss_v):
                        _non_finite(loss_v, x, batch.input_nodes, dataset, epoch, step, cfg.train.lr)
            h2d += batch.h2d_bytes
            shapes.append((len(batch.labels), n_rows, n_edges, busy))
            if loss_v is not None:
                losses.append(loss_v)
                correct += int((logits.argmax(1) == batch.labels).sum())
                seen += len(batch.labels)
            timer.add(batch.times)
            batch_counts.append(batch.counts)
            now = time.perf_counter()
            cur = timer.current
            cur["wall"] = now - t_iter
            cur["other"] = max(0.0, cur["wall"] - cur["train"] - cur["sync"] - cur["wait"])
            t_iter = now
            timer.end_iteration()
            if step == tr.warmup_iters - 1:  # the next iteration, from its fetch on, is timed
                timed_window_begin()
            if opened["interrupted"].is_set():
                raise KeyboardInterrupt
            bar.update(1)
            if step % 10 == 0 and loss_v is not None:
                bar.set_postfix(loss=f"{loss_v:.3f}")
        bar.close()
        timed_window_end()
        wall = time.perf_counter() - t_epoch
        its = timer.iterations
        if len(its) != planned:
            raise RuntimeError(f"epoch {epoch}: loader gave {len(its)} batches, expected {planned}")
        window_items = its[tr.warmup_iters:]
        measured = epoch_window(window_items, batch_counts[tr.warmup_iters:], shapes[tr.warmup_iters:])
        epoch_s = measured["per_iteration"]["wall"] * per_epoch if timed else wall
        ep = {"epoch": epoch, "iterations": len(its), "time_s": wall, "epoch_s": epoch_s,
              "extrapolated": timed and planned < per_epoch,
              "cold_estimate_s": mean_times(its)["wall"] * per_epoch if timed else wall,
              "loss": float(np.mean(losses)) if losses else None, "losses": losses,
              "train_acc": correct / seen if seen else None, **measured}
        if evaluating:
            te = time.perf_counter()
            ep["val_acc"], ep["val_nodes"] = evaluate(
                model, dataset, eval_features, split="val", fanouts=fanouts, batch_size=cfg.sampler.batch_size,
                seed=tr.seed, max_nodes=tr.eval_nodes, device=device, rank=rank, world_size=world_size,
                tick=eval_tick)
            eval_s += time.perf_counter() - te
        epochs.append(ep)
        measured_items.append(window_items)

    test_acc = test_nodes = None
    if evaluating:
        te = time.perf_counter()
        test_acc, test_nodes = evaluate(model, dataset, eval_features, split="test", fanouts=fanouts,
                                        batch_size=cfg.sampler.batch_size, seed=tr.seed,
                                        max_nodes=tr.eval_nodes, device=device, rank=rank, world_size=world_size,
                                        tick=eval_tick)
        eval_s += time.perf_counter() - te

    # ---- the record ---------------------------------------------------------------------------
    source_stats = numeric_stats(source.stats())
    h2d += source_stats.get("h2d_bytes", 0)  # a source on the device uploads its storage rows itself
    from lsm_gnn.cache.budget import for_devices

    metrics = training_metrics(
        epochs, measured_items, rank=rank, timed=timed, warmup_iters=tr.warmup_iters,
        timed_window={"full_epoch": not timed or planned == per_epoch, "timed_iters": tr.timed_iters,
                       "iterations_per_epoch": per_epoch, "iterations_run_per_epoch": planned},
        accelerator={"emulated": accel.record() if accel is not None else None, "device": cfg.train.device,
                     "overshoot_s": accel.overshoot_s if accel is not None else None},
        host_to_device_bytes=h2d,
        source={"kind": source.source_name, "window": window, "stats": source_stats,
                "storage_path": _storage_info(source), "window_clamp": window_clamp},
        memory=for_devices(source.memory(), world_size),  # what the source holds, per device
        preprocessing_s=preprocessing_s, eval_s=eval_s)
    metrics["accuracy"] = {"val": epochs[-1].get("val_acc"), "test": test_acc, "trained": accel is None,
                           "val_curve": [ep.get("val_acc") for ep in epochs],
                           "train_curve": [ep["train_acc"] for ep in epochs],
                           "eval_nodes": {"val": epochs[-1].get("val_nodes"), "test": test_nodes}}
    metrics["pipeline"] = {"sample_ahead": cfg.sampler.prefetch_batches, "overlap_fetch": tr.overlap_fetch,
                           "torch_threads": torch.get_num_threads()}
    metrics["dataset"] = dataset_block(dataset)
    record["metrics"] = metrics
    record["epochs"] = epochs

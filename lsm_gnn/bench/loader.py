"""`lsm-gnn bench loader`: the DGL and PyG loaders' time per iteration outside the train step,
against lsm-gnn's own FeatureLoader on the same source and the same batches, in the same run.

Every loader gets a fresh feature source from the one factory (the same config: by default the
cache over O_DIRECT reads) and lsm-gnn's sampler with the same keys, so all of them fetch the same
batches and the cache makes the same decisions; what differs is the loader's own work (DGL: the
blocks converted to DGL blocks; PyG: the hop edges, the Data object, the rows read through the
FeatureStore's get_tensor). Measured per iteration: the time the training thread spends inside
`next(loader)` (waiting for the batch plus the loader's work in that thread), with a fixed train
step between batches (`--step-ms` of matrix products on the batch's features: the same work for
every loader), and with none (`--step-ms 0`: the loader's whole cost per iteration, nothing
hidden). Repeated `--repeat` times in alternating order; the ratio is per repeat (loader / own),
reported as the median with its min-max spread. Informational: DGL's own NeighborSampler in the
DGL loader (other batches, so not a like-for-like ratio).
"""

from __future__ import annotations

import json
import os
import time

import click
import numpy as np


def _step(ms: float):
    """A train step of about `ms` milliseconds on the batch's features (matrix products)."""
    import torch

    if ms <= 0:
        return lambda x: None
    w = torch.randn(64, 64)

    def calib(n):
        a = torch.randn(256, 64)
        t = time.perf_counter()
        for _ in range(n):
            a = torch.tanh(a @ w)
        return time.perf_counter() - t

    per = calib(200) / 200
    reps = max(1, int(ms / 1e3 / per))

    def step(x):
        a = x[:256, :64].float() if x.shape[1] >= 64 else torch.randn(256, 64)
        for _ in range(reps):
            a = torch.tanh(a @ w)
        return a

    return step


def _timed(batches, warmup: int, iters: int, step, features_of) -> float:
    """Mean seconds per iteration spent in next(batches), with `step` between batches, over the
    `iters` iterations after `warmup` (the pipeline's start: the window sampled ahead)."""
    it = iter(batches)
    inside = 0.0
    n = 0
    try:
        for k in range(warmup + iters):
            t0 = time.perf_counter()
            try:
                b = next(it)
            except StopIteration:
                break
            if k >= warmup:
                inside += time.perf_counter() - t0
                n += 1
            step(features_of(b))
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()
    return inside / max(n, 1)


def measure(cfg, dataset, *, iters: int, repeat: int, step_ms: float, warmup: int = 5,
            native_dgl: bool = True) -> dict:
    import torch

    from lsm_gnn.sources.factory import make_feature_source
    from lsm_gnn.integrations.dgl import DGLDataLoader
    from lsm_gnn.sampling import NeighborSampler
    from lsm_gnn.train.loader import FeatureLoader, loader_horizon

    fan, bs, seed = list(cfg.sampler.fanouts), cfg.sampler.batch_size, cfg.train.seed
    W = loader_horizon(cfg.cache)
    common = dict(sample_ahead=cfg.sampler.prefetch_batches, overlap_fetch=cfg.train.overlap_fetch)
    step = _step(step_ms)

    def own(src, e):
        return FeatureLoader(NeighborSampler(dataset, fan, bs, seed=seed), src, window=W, max_iters=warmup + iters,
                             **common).epoch(e), lambda b: b.features

    def dgl_loader(src, e):
        ld = DGLDataLoader(dataset, None, NeighborSampler(dataset, fan, bs), src, cfg=cfg, max_iters=warmup + iters)
        ld.set_epoch(e)
        return ld, lambda b: b[3]

    def dgl_native(src, e):
        import dgl

        ld = DGLDataLoader(dataset, None, dgl.dataloading.NeighborSampler(fan), src, cfg=cfg, max_iters=warmup + iters)
        ld.set_epoch(e)
        return ld, lambda b: b[3]

    loaders = {"own": own, "dgl": dgl_loader}
    try:
        from lsm_gnn.integrations.pyg import LsmFeatureStore, LsmSampler, PyGLoader

        def pyg_loader(src, e):
            ld = PyGLoader(LsmFeatureStore(src, dataset), LsmSampler(dataset, fan), cfg=cfg, max_iters=warmup + iters)
            ld.set_epoch(e)
            return ld, lambda b: b.x

        loaders["pyg"] = pyg_loader
    except ImportError:  # torch_geometric not installed
        pass
    if native_dgl:
        loaders["dgl_native_sampler"] = dgl_native
    per: dict = {k: [] for k in loaders}
    names = list(loaders)
    for r in range(-1, repeat):   # round -1: every loader once, not counted (JIT compiles, page cache)
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            with make_feature_source(cfg, dataset) as src:
                batches, feats = loaders[name](src, 0)
                t = _timed(batches, warmup, iters, step, feats)
            if r >= 0:
                per[name].append(t)
    out = {"iters": iters, "warmup": warmup, "repeat": repeat, "step_ms": step_ms, "window": W, "batch_size": bs,
           "fanouts": fan,
           "torch_threads": torch.get_num_threads(), "per_iteration_s": per, "vs_own": {}}
    for name in names:
        if name == "own":
            continue
        ratios = [a / b for a, b in zip(per[name], per["own"])]
        out["vs_own"][name] = {"median": float(np.median(ratios)), "min": float(min(ratios)),
                               "max": float(max(ratios)), "ratios": ratios}
    return out


@click.command("loader")
@click.argument("dataset", default="data/synthetic-tiny")
@click.option("--reader", default="direct", show_default=True, help="Storage reader under the cache.")
@click.option("--cache-fraction", type=float, default=0.10, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--fanouts", default="10,15", show_default=True)
@click.option("--iters", type=int, default=30, show_default=True, help="Iterations per loader and repeat.")
@click.option("--warmup", type=int, default=5, show_default=True, help="Iterations before the timed ones.")
@click.option("--repeat", type=int, default=5, show_default=True)
@click.option("--step-ms", "steps", default="0,20", show_default=True,
              help="Train-step lengths to measure at, in ms (0: no step, the loader's whole cost).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch threads (default: torch's).")
@click.option("--no-native-dgl", is_flag=True, help="Skip DGL's own NeighborSampler run.")
@click.option("--json", "as_json", is_flag=True)
def bench_loader(dataset, reader, cache_fraction, batch_size, fanouts, iters, warmup, repeat, steps, threads,
                 no_native_dgl, as_json):
    """The DGL/PyG loaders' time per iteration outside the train step vs lsm-gnn's FeatureLoader."""
    import torch

    from lsm_gnn.config import load_config
    from lsm_gnn.datasets.format import Dataset

    os.environ.setdefault("DGLBACKEND", "pytorch")
    if threads:
        torch.set_num_threads(threads)
    ds = Dataset(dataset)
    cfg = load_config(None, {"dataset.path": os.fspath(ds.root), "storage.reader": reader,
                             "cache.capacity_fraction": cache_fraction, "sampler.batch_size": batch_size,
                             "sampler.fanouts": [int(f) for f in fanouts.split(",")]})
    results = [measure(cfg, ds, iters=iters, repeat=repeat, step_ms=float(s), warmup=warmup,
                       native_dgl=not no_native_dgl)
               for s in steps.split(",")]
    if as_json:
        click.echo(json.dumps({"dataset": os.fspath(ds.root), "reader": reader, "results": results}, indent=1))
        return
    for res in results:
        own = res["per_iteration_s"]["own"]
        click.echo(f"step {res['step_ms']:g} ms, batch {res['batch_size']}, window {res['window']}, "
                   f"{res['iters']} iterations (after {res['warmup']}) x {res['repeat']} repeats; "
                   "time per iteration outside the step:")
        click.echo(f"  {'own (FeatureLoader)':28s} {1e3 * np.median(own):8.2f} ms (median)")
        for name, v in res["vs_own"].items():
            t = 1e3 * np.median(res["per_iteration_s"][name])
            click.echo(f"  {name:28s} {t:8.2f} ms   x{v['median']:.3f} of own (min {v['min']:.3f}, max {v['max']:.3f})")

"""`lsm-gnn bench multidevice`: shared cache vs isolated caches vs one device, on one trace.

One request trace (G devices, the training sampler and seed) is replayed three ways, with the
same memory: every device gets the same total budget (cache lines + victim buffer + landing
buffer, lsm_gnn.cache.budget):
  shared     G ranks, each owner caches only its rows (LSM-GNN), real exchange over gloo/NCCL;
  isolated   G ranks, each caches what it requests and reads any row (multi-GPU GIDS);
  one device one cache with G x the budget, split by the same rule, serving every device's requests.
Each is bounded by Belady MIN on the same trace at the same total memory (`bounds`).
It prints storage rows per epoch, bytes exchanged per iteration and the replay time, with ratios
to the isolated caches measured in the same run. `--json` prints one object with stable names;
the headline is `shared_vs_isolated_storage_rows` (shared storage rows / isolated storage rows).
No model is trained: this is the data path only (epoch time with training: `lsm-gnn train`).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import click
import numpy as np

from lsm_gnn.utils.outpaths import output_option
from lsm_gnn.utils.seeds import SEED_MAX


def one_device_replay(cfg, dataset, trace, budget) -> dict:
    """Every device's requests served by one cache with memory `budget` (in this process)."""
    from lsm_gnn.sources.cached import CachedFeatureSource
    from lsm_gnn.storage.open import open_from_config

    lay = dataset.features()
    cache = CachedFeatureSource(open_from_config(lay, cfg.storage, time_scale=cfg.emulation.time_scale), lay.num_rows, lay.dim, lay.dtype, cfg.cache,
                                dataset.static_scores(), num_owners=1, owner=0, budget=budget, owns_store=True)
    merged = [np.concatenate(b) for b in trace.batches]
    W = cfg.cache.horizon  # K for horizon
    per_epoch = trace.meta.get("batches_per_epoch") or [len(merged)]
    epochs, b0, per_iteration = [], 0, []
    try:
        for n in per_epoch:
            t0, s0 = time.perf_counter(), cache.counters.storage_rows
            for b in range(b0, b0 + n):
                cache.advance(merged[b + 1: min(b + 1 + W, b0 + n)] if W else [])
                before = cache.counters.storage_rows
                cache.fetch(merged[b])
                per_iteration.append(cache.counters.storage_rows - before)
            epochs.append({"seconds": time.perf_counter() - t0, "storage_rows": cache.counters.storage_rows - s0})
            b0 += n
    finally:
        cache.close()
    return {"rows": cache.counters.as_dict(), "epochs": epochs, "storage_rows_per_iteration": per_iteration}


def run_comparison(dataset_path: str, *, devices: int = 2, cache_fraction: float = 0.1, policy: str = "hybrid",
                   window: int = 8, batch_size: int = 1024, fanouts=(10, 15), batches: int | None = None,
                   epochs: int = 1, reader: str = "direct", seed: int = 0, verify: bool = False,
                   timeout_s: float = 60.0, warmup: int = 0, victim_depth: int | None = None,
                   victim: bool = True, trace_path: str | None = None, owners_dir: str | None = None,
                   progress: bool = False) -> dict:
    from lsm_gnn.config import parse_config
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.cache.budget import memory_budget
    from lsm_gnn.ownership import local_rows
    from lsm_gnn.ranks.launch import run_multi_device
    from lsm_gnn.sim.generate import generate_trace

    dataset = Dataset(dataset_path)
    base = {"dataset": {"path": str(dataset_path), "owners_dir": owners_dir}, "storage": {"reader": reader},
            "cache": {"capacity_fraction": cache_fraction, "policy": policy, "window": window,
                      "victim_buffer": {"enabled": victim, "depth": victim_depth}},
            "sampler": {"fanouts": list(fanouts), "batch_size": batch_size},
            "train": {"seed": seed, "threads": 1},
            "distributed": {"devices": devices, "timeout_s": timeout_s}}
    if trace_path is not None:
        from lsm_gnn.sim.trace import Trace

        trace = Trace.load(trace_path)
        if trace.num_devices != devices:
            from lsm_gnn.utils.errors import DataError

            raise DataError(trace_path, "trace devices", expected=devices, found=trace.num_devices)
        trace.meta.setdefault("batches_per_epoch", [trace.num_batches])
        if batches:  # keep the first `batches` iterations of the trace's first epoch
            n = min(batches, trace.meta["batches_per_epoch"][0])
            trace.batches, trace.meta["batches_per_epoch"] = trace.batches[:n], [n]
        epochs = len(trace.meta["batches_per_epoch"])
    else:
        trace = generate_trace(dataset, fanouts=fanouts, batch_size=batch_size, seed=seed, epochs=epochs,
                               devices=devices, max_batches=batches, progress=progress)
    per_epoch = trace.meta["batches_per_epoch"][0]
    out: dict = {"dataset": str(dataset_path), "devices": devices, "cache_fraction": cache_fraction,
                 "policy": policy, "window": window, "batch_size": batch_size, "fanouts": list(fanouts),
                 "epochs": epochs, "batches_per_epoch": per_epoch, "reader": reader,
                 "victim_buffer": victim, "victim_depth": victim_depth or "host share of the budget",
                 "requests_per_epoch": trace.total_requests() // epochs}
    with tempfile.TemporaryDirectory(prefix="lsm-gnn-bench-md-") as tmp:
        tpath = Path(tmp) / "trace.npz"
        trace.save(tpath)
        systems = {}
        for mode in ("shared", "isolated"):
            cfg = parse_config({**base, "distributed": {**base["distributed"], "mode": mode}})
            rec = run_multi_device(cfg, worker="trace", progress=progress,
                                   worker_args={"trace": str(tpath), "verify": verify, "epoch_batches": per_epoch})
            md = rec["metrics"]["multidevice"]
            systems[mode] = {"storage_rows_per_epoch": md["storage_rows_per_epoch"],
                             "storage_rows": rec["metrics"]["rows"]["storage_rows"],
                             "rows": rec["metrics"]["rows"],
                             "exchange_bytes_per_iteration": md["exchange_bytes_per_iteration"],
                             "exchange_seconds_per_iteration": md["exchange_seconds_per_iteration"],
                             "epoch_seconds": md["epoch_seconds"], "storage_bytes": rec["metrics"]["traffic"]["storage_bytes"],
                             "storage_rows_per_iteration": md["storage_rows_per_iteration"]}
        cfg = parse_config(base)
        lay = dataset.features()
        per_device = memory_budget(cfg.cache, lay.num_rows, lay.row_bytes,
                                   owned_rows=local_rows(lay.num_rows, devices))
        one_budget = memory_budget(cfg.cache, lay.num_rows, lay.row_bytes, scale=devices)
        one = one_device_replay(cfg, dataset, trace, one_budget)
        systems["one_device"] = {"storage_rows_per_epoch": [e["storage_rows"] for e in one["epochs"]],
                                 "storage_rows": one["rows"]["storage_rows"], "rows": one["rows"],
                                 "exchange_bytes_per_iteration": 0.0, "exchange_seconds_per_iteration": 0.0,
                                 "epoch_seconds": [e["seconds"] for e in one["epochs"]],
                                 "storage_rows_per_iteration": one["storage_rows_per_iteration"]}
    out["capacity_rows_per_device"] = per_device.cache_rows
    out["memory"] = {"per_device": per_device.record(), "one_device": one_budget.record(),
                     "total_rows_per_device": per_device.total_rows,
                     "victim_rows_per_device": per_device.host_rows}
    for name, budget in (("shared", per_device), ("isolated", per_device), ("one_device", one_budget)):
        systems[name]["memory"] = budget.record()
    out["systems"] = systems
    out["bounds"] = _bounds(trace, per_device.total_rows)
    iso = max(1, systems["isolated"]["storage_rows"])
    out["shared_vs_isolated_storage_rows"] = systems["shared"]["storage_rows"] / iso
    out["one_device_vs_isolated_storage_rows"] = systems["one_device"]["storage_rows"] / iso
    out["shared_vs_one_device_storage_rows"] = systems["shared"]["storage_rows"] / max(1, systems["one_device"]["storage_rows"])
    # after a warm-up the caches are full: the ratio without the cold-start misses both pay
    steady = {k: sum(v["storage_rows_per_iteration"][warmup:]) for k, v in systems.items()}
    out["warmup_iterations"] = warmup
    out["steady_storage_rows"] = steady
    out["shared_vs_isolated_storage_rows_steady"] = steady["shared"] / max(1, steady["isolated"]) \
        if warmup < len(systems["shared"]["storage_rows_per_iteration"]) else None
    b = out["bounds"]
    out["shared_vs_min_storage_rows"] = systems["shared"]["storage_rows"] / max(1, b["shared_min_rows"])
    out["isolated_vs_min_storage_rows"] = systems["isolated"]["storage_rows"] / max(1, b["isolated_min_rows"])
    out["one_device_vs_min_storage_rows"] = systems["one_device"]["storage_rows"] / max(1, b["global_min_rows"])
    out["shared_exchange_bytes_per_iteration"] = systems["shared"]["exchange_bytes_per_iteration"]
    out["distinct_rows_per_iteration"] = float(np.mean([len(np.unique(np.concatenate(b))) for b in trace.batches]))
    out["cross_device_duplicate_fraction"] = _cross_duplicates(trace)
    return out


def _bounds(trace, total_rows: int) -> dict:
    """Belady MIN on this trace at each device's total budget: per owner stream (the floor of the
    shared cache), per device stream (of isolated caches) and over every device's interleaved
    requests at G x the budget (the floor of any use of the same memory, one device included)."""
    from lsm_gnn.sim.simulate import BoundsCalculator

    shared, isolated = BoundsCalculator(trace, "shared"), BoundsCalculator(trace, "isolated")
    return {"total_rows_per_device": total_rows, "shared_min_rows": shared.min_rows(total_rows),
            "isolated_min_rows": isolated.min_rows(total_rows),
            "global_min_rows": shared.min_total_rows(total_rows), "compulsory_rows": shared.compulsory()}


def _cross_duplicates(trace) -> float:
    """Share of per-device requests in an iteration that another device also made (read once when shared)."""
    dup = total = 0
    for b in trace.batches:
        uniq = [np.unique(x) for x in b]
        allu = np.concatenate(uniq)
        total += len(allu)
        dup += len(allu) - len(np.unique(allu))
    return dup / max(1, total)


@click.command("multidevice")
@click.argument("dataset", type=click.Path(exists=True, file_okay=False))
@click.option("--devices", default=2, show_default=True, type=click.IntRange(2, 64))
@click.option("--cache-fraction", default=0.1, show_default=True, type=float, help="total feature memory per device (cache + victim buffer), fraction of feature bytes")
@click.option("--policy", default="hybrid", show_default=True)
@click.option("--window", default=8, show_default=True, type=int)
@click.option("--batch-size", default=1024, show_default=True, type=click.IntRange(min=1))
@click.option("--fanouts", default="10,15", show_default=True)
@click.option("--batches", default=None, type=int, help="iterations per epoch (default: the whole epoch)")
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--reader", default="direct", show_default=True)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, SEED_MAX))
@click.option("--trace", "trace_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="replay this recorded trace (lsm-gnn simulate --save-trace) instead of sampling one")
@click.option("--warmup", default=0, show_default=True, type=int,
              help="also report the ratio over the iterations after this many (caches warm)")
@click.option("--victim-depth", type=int, default=None, help="victim-buffer lines per queue (default: the host share of the budget)")
@click.option("--victim/--no-victim", default=True, show_default=True, help="victim buffer + PVP")
@click.option("--verify/--no-verify", default=False, help="check every received row against features.bin")
@click.option("--owners-dir", type=click.Path(file_okay=False), default=None,
              help="folder of the per-owner feature files (owners-G/ under it; default: the dataset's folder)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--output", type=click.Path(dir_okay=False), default=None, callback=output_option(),
              help="also write the JSON here")
def bench_multidevice(dataset, devices, cache_fraction, policy, window, batch_size, fanouts, batches, epochs,
                      reader, seed, trace_path, warmup, victim_depth, victim, verify, owners_dir, as_json, output):
    """Shared cache vs isolated caches vs one device (same total memory) on one trace."""
    from lsm_gnn.utils.output import emit

    res = run_comparison(dataset, devices=devices, cache_fraction=cache_fraction, policy=policy, window=window,
                         batch_size=batch_size, fanouts=[int(x) for x in fanouts.split(",")], batches=batches,
                         epochs=epochs, reader=reader, seed=seed, verify=verify, trace_path=trace_path, warmup=warmup,
                         victim_depth=victim_depth, victim=victim, owners_dir=owners_dir,
                         progress=not as_json)
    if emit(res, output, as_json, default=float):
        return
    s = res["systems"]
    m = res["memory"]
    click.echo(f"{res['dataset']}: {devices} devices, memory {cache_fraction:.0%} of features per device "
               f"({m['total_rows_per_device']} rows: cache {res['capacity_rows_per_device']} + victim buffer "
               f"{m['victim_rows_per_device']}), policy {policy}, W={window}, {res['batches_per_epoch']} iterations/epoch")
    click.echo(f"{'system':<12}{'storage rows/epoch':>22}{'exchange B/iter':>18}{'replay s/epoch':>16}")
    for name in ("shared", "isolated", "one_device"):
        x = s[name]
        click.echo(f"{name:<12}{np.mean(x['storage_rows_per_epoch']):>22,.0f}"
                   f"{x['exchange_bytes_per_iteration']:>18,.0f}{np.mean(x['epoch_seconds']):>16.2f}")
    click.echo(f"shared / isolated storage rows:   {res['shared_vs_isolated_storage_rows']:.3f}  (target <= 0.6)")
    if res["shared_vs_isolated_storage_rows_steady"] is not None and warmup:
        click.echo(f"shared / isolated after {warmup} warm-up iterations: "
                   f"{res['shared_vs_isolated_storage_rows_steady']:.3f}")
    click.echo(f"one device / isolated storage rows: {res['one_device_vs_isolated_storage_rows']:.3f}")
    click.echo(f"storage rows / MIN at the same memory: shared {res['shared_vs_min_storage_rows']:.3f}, "
               f"isolated {res['isolated_vs_min_storage_rows']:.3f}, one device {res['one_device_vs_min_storage_rows']:.3f}")
    click.echo(f"cross-device duplicate requests per iteration: {res['cross_device_duplicate_fraction']:.1%}")


def two_ranks_one_gpu(dataset: str, warmup: int = 10, timed: int = 20, cache_fraction: float = 0.1,
                      device: str = "cuda") -> dict:
    """A step of `lsm-gnn check gpu`: 2 ranks sharing one cache, training on the one GPU. NCCL refuses
    two ranks on one GPU ("Duplicate GPU detected"), so the ranks use gloo: both train on cuda:0 and
    exchange rows through host memory. (device="cpu": the same run without a GPU, for its test.)"""
    from lsm_gnn.config import load_config
    from lsm_gnn.ranks.launch import run_multi_device
    from lsm_gnn.bench.train import auto_reader

    reader, notes = auto_reader(dataset)
    over = {"dataset.path": str(dataset), "distributed.devices": 2, "distributed.mode": "shared",
            "distributed.backend": "gloo", "distributed.timeout_s": 120.0, "train.device": device,
            "train.epochs": 1, "train.warmup_iters": warmup, "train.timed_iters": timed,
            "train.eval": False, "storage.reader": reader, "cache.enabled": True,
            "cache.capacity_fraction": cache_fraction}
    rec = run_multi_device(load_config(None, over), progress=False)
    m = rec.get("metrics", {})
    md = m.get("multidevice", {})
    out = {"ran": "2 ranks (torch.multiprocessing spawn), shared cache (owner v % 2), backend gloo, both ranks' "
                  "models on cuda:0, rows exchanged through host memory; NCCL refuses two ranks on one GPU",
           "status": rec.get("status"), "config": over, "notes": notes,
           "backend": md.get("backend"), "devices": md.get("devices"), "wall_s": md.get("wall_s"),
           "epoch_steady_s": m.get("time", {}).get("epoch_steady_s"), "hit_rate": m.get("hit_rate"),
           "exchange_bytes_per_iteration": md.get("exchange_bytes_per_iteration"),
           "exchange_seconds_per_iteration": md.get("exchange_seconds_per_iteration"),
           "rows": m.get("rows"), "traffic": m.get("traffic")}
    if rec.get("status") != "complete":
        out["error"] = f"run record status {rec.get('status')!r}: {rec.get('failure')}"
    print(f"[multidevice] steady epoch {out['epoch_steady_s']} s, hit rate {out['hit_rate']}", flush=True)
    return out

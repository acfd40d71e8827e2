"""`lsm-gnn bench compare`: LSM-GNN (2 devices) against Dist-DGL (2 x 2), mmap and direct loaders.

Every system runs the same model and sampler on the same timing window (the same warm-up and timed
iterations per epoch, epoch time extrapolated from it as lsm-gnn's loop does); the ratios are
steady-epoch times over LSM-GNN's: `distdgl_vs_lsm_epoch`, `mmap_vs_lsm_epoch`,
`direct_vs_lsm_epoch` (above 1: LSM-GNN is faster). Each system's feature memory is reported
beside it (`memory`): LSM-GNN's budget per device (cache.capacity_fraction, victim buffer included),
the mmap page cache capped at the same total, the direct loader none, Dist-DGL every row in its
servers' RAM.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

COMPARED = ("lsm", "distdgl", "mmap", "direct")


def compare(cfg, *, devices: int = 2, machines: int = 2, trainers: int = 2, systems=COMPARED,
            records_dir: str | None = None, progress: bool = False) -> dict:
    from baselines.harness import run_system

    out = {"devices": devices, "machines": machines, "trainers_per_machine": trainers,
           "warmup_iters": cfg.train.warmup_iters, "timed_iters": cfg.train.timed_iters, "systems": {}}
    for s in systems:
        path = str(Path(records_dir) / f"{s}.json") if records_dir else None
        rec = run_system(s, cfg, devices=devices, machines=machines, trainers=trainers, record_path=path,
                         progress=progress)
        t = rec["metrics"]["time"]
        out["systems"][s] = {"epoch_steady_s": t.get("epoch_steady_s"), "epoch_cold_s": t.get("epoch_cold_s"),
                             "first_epoch_s": t.get("first_epoch_s"), "preprocessing_s": t.get("preprocessing_s"),
                             "per_iteration": t.get("per_iteration"),
                             "storage_bytes": rec["metrics"]["traffic"].get("storage_bytes"),
                             "network_bytes": rec["metrics"]["traffic"].get("network_bytes"),
                             "memory": rec["metrics"].get("memory")}
    lsm = out["systems"].get("lsm", {}).get("epoch_steady_s")
    for s in ("distdgl", "mmap", "direct"):
        v = out["systems"].get(s, {}).get("epoch_steady_s")
        out[f"{s}_vs_lsm_epoch"] = (v / lsm) if (v and lsm) else None
    return out


@click.command("compare")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--dataset", default=None, help="Dataset directory.")
@click.option("--devices", type=int, default=2, show_default=True)
@click.option("--machines", type=int, default=2, show_default=True)
@click.option("--trainers", type=int, default=2, show_default=True)
@click.option("--warmup", type=int, default=5, show_default=True, help="Warm-up iterations per epoch.")
@click.option("--timed", type=int, default=10, show_default=True, help="Timed iterations per epoch.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE")
@click.option("--records", "records_dir", default=None, help="Also write each system's run record here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_compare(config_path, dataset, devices, machines, trainers, warmup, timed, overrides, records_dir, as_json):
    """Steady-epoch time of Dist-DGL, mmap and direct over LSM-GNN's, measured in one run."""
    from lsm_gnn.config import load_config

    sets = [f"train.warmup_iters={warmup}", f"train.timed_iters={timed}", "train.epochs=2", *overrides]
    if dataset:
        sets.append(f"dataset.path={dataset}")
    res = compare(load_config(config_path, sets), devices=devices, machines=machines, trainers=trainers,
                  records_dir=records_dir)
    if as_json:
        click.echo(json.dumps(res))
        return
    click.echo(f"same window on every system: {warmup} warm-up + {timed} timed iterations per epoch, "
               "epoch time extrapolated")
    for s, v in res["systems"].items():
        mem = v.get("memory") or {}
        click.echo(f"  {s:8s} steady epoch {v['epoch_steady_s']:.3f} s  first epoch (incl. preprocessing) "
                   f"{v['first_epoch_s']:.3f} s  feature memory {mem.get('all_devices_bytes', 0) / 2**20:,.0f} MiB "
                   f"({mem.get('all_devices_fraction', 0):.0%} of the features, all devices)")
    for k in ("distdgl_vs_lsm_epoch", "mmap_vs_lsm_epoch", "direct_vs_lsm_epoch"):
        v = res[k]
        click.echo(f"{k}: {'n/a' if v is None else f'{v:.2f}x'}")

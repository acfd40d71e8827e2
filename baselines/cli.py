"""`lsm-gnn run --system {lsm,isolated,mmap,direct,memory,distdgl}`: any compared system, one record."""

from __future__ import annotations

import json

import click

from baselines.harness import SYSTEMS


@click.command("run")
@click.option("--system", type=click.Choice(SYSTEMS), required=True, help="Which system to run.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="YAML run config (flags and --set override it).")
@click.option("--dataset", default=None, help="Dataset directory (dataset.path).")
@click.option("--devices", type=int, default=1, show_default=True, help="Devices (lsm, isolated, plain loaders, memory).")
@click.option("--machines", type=int, default=2, show_default=True, help="Dist-DGL: emulated machines.")
@click.option("--trainers", type=int, default=2, show_default=True, help="Dist-DGL: trainers per machine.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Dotted config override, repeatable.")
@click.option("--record", "record_path", default=None, help="Where to write the run record (JSON).")
@click.option("--progress/--no-progress", default=True)
def run(system, config_path, dataset, devices, machines, trainers, overrides, record_path, progress):
    """Run one system in the shared harness and write its run record."""
    from baselines.harness import run_system
    from lsm_gnn.config import load_config

    sets = list(overrides)
    if dataset:
        sets.append(f"dataset.path={dataset}")
    cfg = load_config(config_path, sets)
    path = record_path or cfg.output.record
    rec = run_system(system, cfg, devices=devices, machines=machines, trainers=trainers, record_path=path,
                     progress=progress)
    t = rec["metrics"]["time"]
    summary = {"system": system, "status": rec["status"], "epoch_cold_s": t.get("epoch_cold_s"),
               "epoch_steady_s": t.get("epoch_steady_s"), "preprocessing_s": t.get("preprocessing_s"),
               "storage_bytes": rec["metrics"].get("traffic", {}).get("storage_bytes"),
               "val_acc": rec["metrics"].get("accuracy", {}).get("val"), "record": path}
    click.echo(json.dumps(summary))

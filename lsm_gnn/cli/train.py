"""`lsm-gnn train --config FILE`: train one configuration and write its run record.

Flags override the file: dotted `--set key=value` (any config key) and shortcuts for the common
ones. `--devices N > 1` launches N ranks through lsm_gnn.ranks.launch. The record goes to
`--record PATH`, else `output.record` of the config, else results/runs/<UTC time>-<system>.json.
Ctrl-C stops the run without writing a record (exit status 130).
"""

from __future__ import annotations

import datetime
import json
from importlib import resources
from pathlib import Path

import click

BUILTIN = ("lsm", "memory")


def builtin_config(name: str) -> Path:
    return Path(str(resources.files("lsm_gnn").joinpath("configs", f"{name}.yaml")))


def resolve_config_path(value: str | None) -> str | None:
    """A path, or the name of a packaged config (lsm, memory)."""
    if value is None:
        return None
    if not Path(value).exists() and value in BUILTIN:
        return str(builtin_config(value))
    return value


def build_config(config, sets=(), *, dataset=None, epochs=None, policy=None, cache_fraction=None, reader=None,
                 devices=None, record=None, model=None, seed=None, batch_size=None, fanouts=None,
                 window=None, warmup=None, timed=None, device=None, no_cache=False, threads=None):
    from lsm_gnn.config import load_config

    over: dict = {}
    flags = {"dataset.path": dataset, "train.epochs": epochs, "cache.policy": policy,
             "cache.capacity_fraction": cache_fraction, "storage.reader": reader,
             "distributed.devices": devices, "output.record": record, "model.name": model,
             "train.seed": seed, "sampler.batch_size": batch_size, "cache.window": window,
             "train.warmup_iters": warmup, "train.timed_iters": timed, "train.device": device,
             "train.threads": threads}
    for k, v in flags.items():
        if v is not None:
            over[k] = v
    if fanouts:
        over["sampler.fanouts"] = [int(f) for f in str(fanouts).split(",")]
    if cache_fraction is not None:
        over["cache.capacity_bytes"] = None
    if no_cache:
        over["cache.enabled"] = False
    items = list(sets) + [f"{k}={json.dumps(v)}" for k, v in over.items()]
    return load_config(resolve_config_path(config), items)


def default_record_path(system: str) -> Path:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("results/runs") / f"{stamp}-{system}.json"


@click.command()
@click.option("--config", "config", help="YAML config file, or a packaged one: lsm | memory.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override any config key (repeatable).")
@click.option("--dataset", help="Dataset directory (dataset.path).")
@click.option("--epochs", type=int)
@click.option("--model", help="sage | gcn | gat | rgcn | rsage | rgat")
@click.option("--policy", help="Cache eviction policy (cache.policy).")
@click.option("--cache-fraction", type=float,
              help="Feature memory per device (cache + victim buffer + landing buffer), fraction of the feature bytes.")
@click.option("--no-cache", is_flag=True, help="cache.enabled=false (with --reader memory: the in-memory ideal).")
@click.option("--reader", help="direct | buffered | mmap | memory")
@click.option("--window", type=int, help="Lookahead window W (cache.window).")
@click.option("--batch-size", type=int)
@click.option("--fanouts", help="Comma-separated, input layer first, e.g. 10,15.")
@click.option("--warmup", type=int, help="Warm-up iterations before the timed window.")
@click.option("--timed", type=int, help="Time only this many iterations per epoch (after the warm-up).")
@click.option("--seed", type=int)
@click.option("--device", type=click.Choice(["cpu", "cuda"]))
@click.option("--threads", type=int, help="torch intra-op threads.")
@click.option("--devices", type=int, help="Number of devices (ranks); > 1 uses the shared cache.")
@click.option("--record", help="Where to write the run record (JSON).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--json", "as_json", is_flag=True, help="Print the record's metrics as JSON.")
def train(config, sets, dataset, epochs, model, policy, cache_fraction, no_cache, reader, window, batch_size,
          fanouts, warmup, timed, seed, device, threads, devices, record, quiet, as_json):
    """Train a GNN with features from storage through the LSM-GNN cache (or the in-memory ideal)."""
    from lsm_gnn.records import system_name

    cfg = build_config(config, sets, dataset=dataset, epochs=epochs, policy=policy, cache_fraction=cache_fraction,
                       reader=reader, devices=devices, record=record, model=model, seed=seed,
                       batch_size=batch_size, fanouts=fanouts, window=window, warmup=warmup, timed=timed,
                       device=device, no_cache=no_cache, threads=threads)
    path = Path(cfg.output.record) if cfg.output.record else default_record_path(system_name(cfg))
    if cfg.distributed.devices > 1:
        from lsm_gnn.ranks.launch import run_multi_device

        rec = run_multi_device(cfg, record_path=path)
    else:
        from lsm_gnn.train.loop import run_training

        rec = run_training(cfg, progress=not quiet, record_path=path)
    _summary(rec, path, as_json)


def _fmt(v, unit="s"):
    return "-" if v is None else f"{v:.3f} {unit}"


def _summary(rec: dict, path: Path, as_json: bool):
    from lsm_gnn.metrics import timed_window

    m = rec["metrics"]
    if as_json:
        click.echo(json.dumps({"record": str(path), "status": rec["status"], "metrics": m}, indent=2, default=str))
        return
    t, a = m.get("time", {}), m.get("accuracy", {})
    click.echo(f"system {rec['system']}: status {rec['status']}, record {path}")
    clamp = (m.get("source") or {}).get("window_clamp")
    if clamp:
        click.echo(f"  note: cache.window {clamp['requested']} is longer than the {clamp['iterations_per_epoch']} "
                   f"iterations of an epoch; the run used {clamp['used']} (metrics.source.window_clamp)")
    click.echo(f"  epoch time cold {_fmt(t.get('epoch_cold_s'))}, steady {_fmt(t.get('epoch_steady_s'))}"
               f" ({'whole epochs' if timed_window(t).get('full_epoch') else 'extrapolated from a timed window'})")
    emu = m.get("emulation") or {}
    if (emu.get("time_scale") or 1.0) != 1.0:  # a dilated run: its times divided back by S, labelled
        click.echo(f"  {emu['label']}: epoch cold {_fmt(emu.get('epoch_cold_s'))}, steady "
                   f"{_fmt(emu.get('epoch_steady_s'))}" + ("" if emu.get("valid", True) else
                                                           f"; INVALID: {'; '.join(emu['invalid_causes'])}"))
    per = t.get("per_iteration", {})
    if per:
        click.echo("  per iteration (busy): " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in per.items() if v))
    if t.get("hidden_fetch_fraction") is not None:
        click.echo(f"  fetch hidden behind compute: {100 * t['hidden_fetch_fraction']:.0f}%")
    rows = m.get("rows") or {}
    if rows.get("requests"):
        from lsm_gnn.metrics import HIT_KEYS

        parts = [(k, rows.get(k, 0)) for k in HIT_KEYS + ("storage_rows",)]
        click.echo(f"  rows: {rows['requests']} requested; "
                   + ", ".join(f"{k} {100 * v / rows['requests']:.1f}%" for k, v in parts))
    tr = m.get("traffic", {})
    if tr.get("storage_bytes"):
        click.echo(f"  storage read: {tr['storage_bytes'] / 2**20:.1f} MiB in {tr.get('storage_io_ops', 0)} ops")
    acc = {k: ("-" if a.get(k) is None else f"{a[k]:.3f}") for k in ("val", "test")}
    click.echo(f"  accuracy: val {acc['val']}, test {acc['test']}")

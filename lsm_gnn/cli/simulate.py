"""`lsm-gnn simulate`: replay a request trace through cache configurations and compare each with
the bounds (compulsory misses, Belady MIN, optimal static) on the same trace."""

from __future__ import annotations

import json
import math
import sys

import click

from lsm_gnn.choices import ENGINES
from lsm_gnn.config import POLICIES, CacheConfig
from lsm_gnn.utils.seeds import SEED_MAX

_CACHE = CacheConfig()  # the defaults the help texts name (written once, in lsm_gnn.config)


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, found {text!r}") from None


@click.command()
@click.argument("dataset", type=click.Path(exists=True, file_okay=False))
@click.option("--trace", "trace_path", type=click.Path(exists=True, dir_okay=False),
              help="Replay this trace (.npz from --save-trace) instead of sampling one.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Run config (YAML) whose sampler, seed and cache settings are the defaults.")
@click.option("--fanouts", default=None, help="Sampler fan-outs, e.g. 10,15 (default: config's).")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Seeds per mini-batch (default: config's).")
@click.option("--seed", type=click.IntRange(0, SEED_MAX), default=None,
              help="Sampler seed, as train.seed (default: config's).")
@click.option("--epochs", type=click.IntRange(min=1), default=1, show_default=True, help="Epochs to sample.")
@click.option("--devices", type=click.IntRange(min=1), default=None, help="Devices G (default 1, or the trace's).")
@click.option("--mode", type=click.Choice(["shared", "isolated"]), default="shared", show_default=True,
              help="shared: owner v % G caches v for all devices; isolated: each device caches its own.")
@click.option("--max-batches", type=click.IntRange(min=1), default=None,
              help="Cut each epoch to its first N iterations.")
@click.option("--split", type=click.Choice(["train", "val", "test"]), default="train", show_default=True)
@click.option("--policy", "policies", multiple=True, metavar="NAME",
              help=f"Eviction policy (repeatable; default all): one of {', '.join(POLICIES)}; 'all' (those and the "
                   "installed ones of the entry-point group lsm_gnn.policies); or one of your own, "
                   "package.module:Class or path/to/file.py:Class (docs/cache.md).")
@click.option("--cache-fraction", "fractions", multiple=True, type=click.FloatRange(0, 1, min_open=True),
              help="Total memory per device (cache + victim buffer + landing buffer) as a fraction of all "
                   f"rows (repeatable; default config's, {_CACHE.capacity_fraction}).")
@click.option("--window", "windows", multiple=True, type=click.IntRange(0, 1024),
              help=f"Lookahead window W (repeatable; default config's, {_CACHE.window}).")
@click.option("--lookahead", "lookaheads", multiple=True, type=click.IntRange(1, 65536),
              help="K, future batches a long-lookahead policy (horizon) reads (repeatable: a K sweep; default "
                   f"config's, {_CACHE.lookahead}). Other policies read W.")
@click.option("--victim-depth", default="config", show_default=True,
              help="Victim-buffer lines per queue: an integer (taken out of the same budget) or 'config' (the "
                   "run config's cache.victim_buffer: by default its host_fraction of the budget).")
@click.option("--host-fraction", type=click.FloatRange(0, 1, max_open=True), default=None,
              help="Share of the budget for the victim buffer + landing buffer (default config's; unset: the "
                   "policy's share, lsm_gnn.cache.budget).")
@click.option("--victim/--no-victim", "victim", default=None, help=f"Victim buffer + PVP on/off (default config's, "
              f"{'on' if _CACHE.victim_buffer.enabled else 'off'}).")
@click.option("--ways", type=click.IntRange(1, 1024), default=None,
              help=f"Set associativity (default config's, {_CACHE.ways}).")
@click.option("--engine", type=click.Choice(ENGINES), default=_CACHE.engine, show_default=True)
@click.option("--save-trace", type=click.Path(dir_okay=False), help="Write the trace (.npz) for later replays.")
@click.option("--trace-only", is_flag=True, help="Only sample (and --save-trace) the trace; replay nothing.")
@click.option("--out", "out_csv", type=click.Path(dir_okay=False), help="Write one CSV row per configuration.")
@click.option("--record", "record_path", type=click.Path(dir_okay=False), help="Write a run record (JSON).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: when stderr is a TTY).")
def simulate(dataset, trace_path, config_path, fanouts, batch_size, seed, epochs, devices, mode, max_batches,
             split, policies, fractions, windows, lookaheads, victim_depth, host_fraction, victim, ways, engine,
             save_trace, trace_only, out_csv, record_path, as_json, progress):
    """Replay the request trace of DATASET's training epochs through cache configurations.

    Prints, per policy x memory budget x window: requests, distinct, hits, victim hits, storage
    rows and storage rows as a ratio to MIN at the same total memory (the floor), MIN at the cache
    lines alone, the optimal static cache and the compulsory misses.
    """
    import numpy as np

    from lsm_gnn.config import load_config
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.sim.simulate import simulate as run_simulation
    from lsm_gnn.sim.trace import Trace
    from lsm_gnn.utils.errors import InputError

    if progress is None:
        progress = sys.stderr.isatty() and not as_json
    from lsm_gnn.utils.outpaths import check_output

    for out_path, what in ((save_trace, "trace"), (out_csv, "CSV")):  # before any work (the record: below)
        if out_path:
            check_output(out_path, "file", what)
    if record_path:  # checked and locked before the simulation, held until the command ends
        from lsm_gnn.records import claim_record

        click.get_current_context().with_resource(claim_record(record_path))
    run_cfg = load_config(config_path)
    ds = Dataset(dataset)
    num_rows = ds.features().num_rows

    if trace_path:
        trace = Trace.load(trace_path)
        if devices is not None and devices != trace.num_devices:
            raise InputError(f"--devices {devices} but the trace {trace_path} has {trace.num_devices} devices")
        if trace.num_rows != num_rows:
            raise InputError(f"trace {trace_path} has {trace.num_rows} rows, dataset {dataset} has {num_rows}")
    else:
        from lsm_gnn.sim.generate import generate_trace

        trace = generate_trace(
            ds, fanouts=_int_list(fanouts) if fanouts else run_cfg.sampler.fanouts,
            batch_size=run_cfg.sampler.batch_size if batch_size is None else batch_size,
            seed=run_cfg.train.seed if seed is None else seed, epochs=epochs,
            devices=run_cfg.distributed.devices if devices is None else devices, max_batches=max_batches,
            shuffle=run_cfg.sampler.shuffle, split=split, progress=progress)
    if save_trace:
        trace.save(save_trace)
    if trace_only:
        click.echo(f"trace: {trace.num_devices} device(s), {trace.num_batches} iterations, "
                   f"{trace.total_requests():,} row requests" + (f" -> {save_trace}" if save_trace else ""))
        return

    base = run_cfg.cache.model_copy(update={"engine": engine})
    if ways is not None:
        base = base.model_copy(update={"ways": ways})
    if victim is not None:
        base = base.model_copy(update={"victim_buffer": base.victim_buffer.model_copy(update={"enabled": victim})})
    if host_fraction is not None:
        if not 0 <= host_fraction < 1:
            raise InputError(f"--host-fraction must lie in [0, 1), found {host_fraction}")
        base = base.model_copy(update={"victim_buffer": base.victim_buffer.model_copy(
            update={"host_fraction": host_fraction})})
    chosen = _chosen_policies(policies)
    from lsm_gnn.cache.policies import get_policy

    if any(k < 1 for k in lookaheads):
        raise InputError(f"--lookahead must be >= 1, found {min(lookaheads)}")
    if not fractions and base.capacity_fraction is None:  # never a fraction of our own in its place
        raise InputError(f"{config_path}: cache.capacity_bytes is set and simulate sweeps fractions of the rows: "
                         "give --cache-fraction")
    configs = []
    for frac in fractions or [base.capacity_fraction]:
        if not 0 < frac <= 1:
            raise InputError(f"--cache-fraction must lie in (0, 1], found {frac}")
        for w in windows or [base.window]:
            for pol in chosen:
                # K matters to a long-lookahead policy only; the headline row is the first K
                for k in (lookaheads or [base.lookahead]) if get_policy(pol).long_lookahead else [base.lookahead]:
                    configs.append(_cache_config(base, pol, frac, w, victim_depth, num_rows).model_copy(
                        update={"lookahead": k}))

    row_bytes = ds.features().row_bytes
    df = run_simulation(trace, configs, static_scores=np.asarray(ds.static_scores()), mode=mode,
                        row_bytes=row_bytes, engine=engine, progress=progress)
    summary = _summary(df, trace, dataset, mode)

    if out_csv:
        from lsm_gnn.utils.atomic import write_text

        write_text(out_csv, df.to_csv(index=False))
    if record_path:
        _write_record(record_path, summary, run_cfg, trace)
    if as_json:
        click.echo(json.dumps(summary, default=_json_default))
    else:
        _print_tables(df, trace, mode)


def _chosen_policies(policies) -> list[str]:
    """The --policy values as run, in order: 'all' the configurable registered policies and the
    installed ones (entry-point group lsm_gnn.policies); any other value resolved by the registry
    (a name, package.module:Class or path/to/file.py:Class: imported and registered here). A
    policy named twice (say by its file and through 'all') runs once, under the first name."""
    from lsm_gnn.cache.policies import configurable_names, installed_policies, policy_class
    from lsm_gnn.utils.errors import InputError

    names = []
    for p in dict.fromkeys(policies or ["all"]):
        if p == "all":
            installed_policies()
            names += configurable_names()
        else:
            names.append(p)
    chosen, seen = [], set()
    for name in names:
        cls = policy_class(name)
        if not cls.configurable:
            raise InputError(f"--policy {name!r}: not a policy a run may name; expected one of "
                             f"{', '.join(configurable_names())}")
        if cls not in seen:
            seen.add(cls)
            chosen.append(name)
    return chosen


def _cache_config(base, policy: str, fraction: float, window: int, victim_depth: str, num_rows: int):
    """One point of the sweep (`fraction`: the total budget per device)."""
    from lsm_gnn.utils.errors import InputError

    if victim_depth == "config":
        depth = base.victim_buffer.depth
    else:
        try:
            depth = int(victim_depth)
        except ValueError:
            raise InputError(f"--victim-depth must be 'config' or an integer, found {victim_depth!r}") from None
        if depth < 1:
            raise InputError(f"--victim-depth must be >= 1, found {depth}")
    vb = base.victim_buffer.model_copy(update={"depth": depth})
    return base.model_copy(update={"policy": policy, "capacity_fraction": fraction, "capacity_bytes": None,
                                   "window": window, "victim_buffer": vb})


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _json_default(o):
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return _clean(float(o))
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _summary(df, trace, dataset, mode) -> dict:
    from lsm_gnn.sim.simulate import bounds_table, headline

    head = headline(df)
    results = [{k: _clean(v.item() if hasattr(v, "item") else v) for k, v in r.items()}
               for r in df.to_dict(orient="records")]
    out = {"dataset": str(dataset), "mode": mode,
           "trace": {"devices": trace.num_devices, "batches": trace.num_batches, "num_rows": trace.num_rows,
                     "requests": trace.total_requests(), "meta": trace.meta},
           "headline": {"cache_fraction": float(head["cache_fraction"].iloc[0]) if len(head) else None,
                        "window": int(head["window"].iloc[0]) if len(head) else None},
           "bounds": [{k: _clean(v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                      for r in bounds_table(df).to_dict(orient="records")] if len(df) else [],
           "results": results}
    for key in ("storage_rows_vs_min", "storage_rows_vs_min_cache", "storage_rows_vs_opt_static",
                "storage_rows_vs_compulsory"):
        out[key] = {r["policy"]: _clean(float(r[key])) for _, r in head.iterrows()}
    # The regime (docs/workflow.md): cache lines of one cache over the distinct rows it serves per
    # iteration (one cache per device in both modes; `distinct` counts each batch's rows once).
    for r in results:
        per_iter = r["distinct"] / (r["batches"] * r["devices"]) if r.get("batches") and r.get("distinct") else None
        r["distinct_rows_per_iteration"] = per_iter
        r["cache_rows_per_iteration_rows"] = r["capacity_rows"] / per_iter if per_iter else None
    out["cache_rows_per_iteration_rows"] = {
        r["policy"]: r["cache_rows_per_iteration_rows"] for r in results
        if out["headline"]["cache_fraction"] is not None and r["cache_fraction"] == out["headline"]["cache_fraction"]
        and r["window"] == out["headline"]["window"]}
    return out


def _write_record(path, summary, run_cfg, trace):
    from lsm_gnn.config import config_to_dict
    from lsm_gnn.records import new_record, write_record

    rec = new_record("simulate", "simulator", {"run_config": config_to_dict(run_cfg), "mode": summary["mode"],
                                               "dataset": summary["dataset"], "trace": trace.meta})
    rec["metrics"] = {"simulate": {k: summary[k] for k in ("trace", "headline", "bounds", "results")},
                      **{k: v for k, v in summary.items() if k.startswith("storage_rows_vs_")}}
    write_record(path, rec)


def _print_tables(df, trace, mode):
    from lsm_gnn.sim.simulate import bounds_table

    meta = trace.meta
    click.echo(f"trace: {trace.num_devices} device(s), {trace.num_batches} iterations "
               f"(batches/epoch {meta.get('batches_per_epoch', '?')} of {meta.get('full_epoch_batches', '?')}), "
               f"{trace.total_requests():,} row requests; mode {mode}")
    if df.empty:
        click.echo("no configurations")
        return
    view = df[["policy", "cache_fraction", "capacity_rows", "victim_capacity", "window", "lookahead", "requests",
               "distinct", "hits", "victim_hits", "storage_rows", "storage_rows_vs_min", "storage_rows_vs_min_cache",
               "storage_rows_vs_opt_static", "storage_rows_vs_compulsory"]].copy()
    view.columns = ["policy", "memory", "cache rows", "victim rows", "W", "ahead", "requests", "distinct", "hits",
                    "victim hits", "storage rows", "/MIN", "/MIN cache only", "/opt static", "/compulsory"]
    view["memory"] = (view["memory"] * 100).map(lambda x: f"{x:g}%")
    click.echo(view.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    click.echo("\n/MIN: storage rows over Belady MIN at the same total memory per device (cache + victim "
               "buffer + landing buffer), a floor no policy can beat. ahead: future batches the policy read "
               "(K for horizon, W for the others).")
    click.echo("bounds (storage rows, summed over the caches that serve the trace):")
    bt = bounds_table(df)
    bt["cache_fraction"] = (bt["cache_fraction"] * 100).map(lambda x: f"{x:g}%")
    click.echo(bt.to_string(index=False))

"""`lsm-gnn bench device`: the emulated storage device against its own model, queue depth 1 to 1024.

For each queue depth Q (powers of 2) one SSD of the profile is emulated over the dataset's feature
file (lsm_gnn.storage.emulated: real rows from the page cache, each batch handed back when the
device model completes its last read) and batches of distinct random rows are read through it with
Q reads in flight. The achieved rate (pages read / the time from each batch's submission to the
device until it came back, times the time scale; `achieved_iops_wall` adds the host's work before
submitting: the ids' sort and the read plan) is compared with the model's own formula, `SSDModel.throughput(Q)` = min(Q / latency, IOPS,
bandwidth / 4 KiB): target within 3 % at every depth. The lateness (how long after the model's
deadline each batch came back) is reported beside it: a depth that misses the target because the
copy from the page cache is slower than the model shows it there (raise --time-scale).
Checksums are off here (they are the consumer's work after the read, not the device's).
"""

from __future__ import annotations

import sys
import time

import click
import numpy as np

from lsm_gnn.utils.outpaths import output_option
from lsm_gnn.utils.output import emit
from lsm_gnn.utils.seeds import SEED_MAX

TARGET = 0.03
"""Achieved IOPS within 3 % of the model's formula at every queue depth."""
DEPTHS = tuple(2 ** k for k in range(11))  # 1 .. 1024


def sweep(dataset, profile: str = "paper", depths=DEPTHS, *, time_scale: float = 1.0, min_reads: int = 4096,
          reads_per_depth: int = 64, batches: int = 2, seed: int = 0, progress: bool = False) -> dict:
    """Run the sweep; one entry per depth with the model's rate, the achieved rate, their ratio and
    the lateness (lsm_gnn.storage.emulated.emulation_summary)."""
    from tqdm import tqdm

    from lsm_gnn.config import StorageConfig
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.storage.device_model import PAGE, load_device_profile
    from lsm_gnn.storage.emulated import open_emulated

    ds = dataset if isinstance(dataset, Dataset) else Dataset(dataset)
    lay = ds.features()
    prof = load_device_profile(profile)
    one = prof.model_copy(update={"ssds_per_device": 1, "shared": False})  # one SSD: the formula's
    rng = np.random.default_rng(seed)
    rows_per_page = max(1, PAGE // lay.row_stride) if lay.row_stride < PAGE else 1
    points = []
    for q in tqdm(depths, desc="bench device", disable=not progress or not sys.stderr.isatty()):
        n = min(lay.num_rows // rows_per_page, max(min_reads, reads_per_depth * q))
        n -= n % q if n > q else 0  # whole rounds of Q reads
        cfg = StorageConfig(device="emulated", reader="buffered", queue_depth=q, verify_checksums=False)
        with open_emulated(lay, cfg, time_scale=time_scale, profile=one, verify_checksums=False) as store:
            out = store.empty_rows(n)
            warm = np.sort(rng.choice(lay.num_rows // rows_per_page, min(n, 256), replace=False)) * rows_per_page
            store.read_rows(warm)  # compiled loops and the thread pool ready before the timed batches
            store.reset_stats()
            walls, pages = [], []
            for _ in range(batches):
                ids = np.sort(rng.choice(lay.num_rows // rows_per_page, n, replace=False)) * rows_per_page
                before = store.reads_paced
                t0 = time.perf_counter()
                store.read_rows(ids, out=out)
                walls.append(time.perf_counter() - t0)
                pages.append(store.reads_paced - before)
            emu = store.emulation_stats()
        model = one.ssd.throughput(q)
        # from each batch's submission to the device until it was handed back (the model's time
        # plus the lateness); the host's own work before submitting (ids, read plan) is not the device's
        achieved = sum(pages) / (emu["storage_s"] + emu["lateness_s"]) * time_scale
        points.append({"queue_depth": q, "reads": int(sum(pages)), "model_iops": model,
                       "regime": one.ssd.regime(q), "achieved_iops": achieved, "ratio": achieved / model,
                       "achieved_iops_wall": sum(pages) / sum(walls) * time_scale,
                       "met": abs(achieved / model - 1) <= TARGET,
                       "lateness_s": emu["lateness_s"], "lateness_fraction": emu["lateness_fraction"],
                       "lateness_p99_s": emu["lateness_p99_s"], "copy_late_batches": emu["copy_late_batches"],
                       "storage_s": emu["storage_s"]})
    return {"benchmark": "device", "dataset": str(ds.root), "profile": prof.name, "ssd": one.ssd.model_dump(),
            "time_scale": time_scale, "batches_per_depth": batches, "target": TARGET, "points": points,
            "worst_ratio": min((p["ratio"] for p in points), default=None),
            "met": all(p["met"] for p in points)}


@click.command("device")
@click.argument("dataset", default="data/synthetic-tiny")
@click.option("--profile", default="paper", show_default=True, help="Storage device profile (vm, paper, optane, "
                                                                     "or a YAML file); one of its SSDs is swept.")
@click.option("--depths", default=",".join(map(str, DEPTHS)), show_default=True, help="Queue depths.")
@click.option("--time-scale", type=float, default=1.0, show_default=True,
              help="emulation.time_scale: the SSD S times slower (its rates / S); rates reported x S.")
@click.option("--batches", type=click.IntRange(1, 100), default=2, show_default=True, help="Batches per depth.")
@click.option("--seed", type=click.IntRange(0, SEED_MAX), default=0, show_default=True)
@click.option("--output", default=None, callback=output_option(),
              help="Also write the JSON object to this file (atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_device(dataset, profile, depths, time_scale, batches, seed, output, as_json):
    """The emulated storage device's achieved IOPS against its model's formula, QD 1-1024 (target 3 %)."""
    try:
        qs = [int(x) for x in depths.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated queue depths, found {depths!r}",
                                 param_hint="--depths") from None
    if not qs or min(qs) < 1:
        raise click.BadParameter(f"queue depths must be at least 1, found {depths!r}", param_hint="--depths")
    res = sweep(dataset, profile, qs, time_scale=time_scale, batches=batches, seed=seed, progress=not as_json)
    if emit(res, output, as_json):
        return
    click.echo(f"emulated {res['profile']} SSD ({res['ssd']['iops']:,.0f} IOPS, {res['ssd']['latency_s'] * 1e6:.1f} us "
               f"at QD1) over {res['dataset']}, time scale {time_scale:g}, {batches} batch(es) per depth")
    click.echo(f"{'QD':>6s}{'reads':>9s}{'model IOPS':>13s}{'achieved':>13s}{'ratio':>8s}  regime     "
               f"{'late % of storage':>18s}{'p99 late us':>13s}")
    for p in res["points"]:
        click.echo(f"{p['queue_depth']:>6d}{p['reads']:>9d}{p['model_iops']:>13,.0f}{p['achieved_iops']:>13,.0f}"
                   f"{p['ratio']:>8.3f}  {p['regime']:10s}{100 * p['lateness_fraction']:>18.2f}"
                   f"{p['lateness_p99_s'] * 1e6:>13.0f}{'' if p['met'] else '  !'}")
    click.echo(f"target: achieved within {100 * TARGET:g} % of the model at every depth: "
               f"{'met' if res['met'] else 'NOT met'} (worst ratio {res['worst_ratio']:.3f})")

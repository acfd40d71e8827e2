"""`lsm-gnn bench inplace`: a block reader's batches of distinct rows in increasing order (the cache's
storage reads: a batch's misses, sorted) read straight into the caller's buffer, against the same
reads through the staging buffer and a gather (`BlockStore.sparse_in_place` off), in the same run,
on the same ids, on the same open store.

Per reader and batch size, `--repeats` interleaved rounds (the order alternates round by round), each
about `--seconds` of batches into a page-aligned buffer after a warm-up batch, the page cache dropped
first; the figure is rows/s in place over rows/s through staging, the median of the rounds' ratios
with its spread. Rows must be whole blocks (4 KiB rows of float32 x 1024) for the in-place path to
apply; other datasets are refused with that reason.
"""

from __future__ import annotations

import time

import click

from lsm_gnn.bench.replicate import spread_of
from lsm_gnn.bench.storage import measure, parse_ints
from lsm_gnn.utils.outpaths import output_option
from lsm_gnn.utils.output import emit

DEFAULT_BATCHES = "1024,6000"
"""Distinct rows a batch: about what a batch-128 / batch-1024 iteration of synthetic-small misses."""
READERS = ("direct", "buffered")


def measure_point(store, batch: int, seconds: float, repeats: int, seed: int, drop) -> dict:
    rates = {"in_place": [], "staging": []}
    cpu = {"in_place": [], "staging": []}
    for r in range(repeats):
        order = ("in_place", "staging") if r % 2 == 0 else ("staging", "in_place")
        for which in order:
            store.sparse_in_place = which == "in_place"
            before = store.in_place_batches
            c0 = time.process_time()   # every thread's: the reads and the gather run on the reader's
            m = measure(store, "distinct", min(batch, store.num_rows), seconds, seed + r, drop)
            cpu[which].append((time.process_time() - c0) / max(m["rows"], 1) * 1e6)
            went = store.in_place_batches - before
            if (which == "in_place") != (went > 0):
                raise click.ClickException(f"{store.reader_name}: the {which} path did not run "
                                           f"({went} in-place batches)")
            rates[which].append(m["rows_per_s"])
    store.sparse_in_place = True
    ratios = [a / b for a, b in zip(rates["in_place"], rates["staging"]) if b > 0]
    cpu_ratios = [b / a for a, b in zip(cpu["in_place"], cpu["staging"]) if a > 0]
    return {"reader": store.reader_name, "batch_size": batch, "repeats": repeats,
            "rows_per_s_in_place": spread_of(rates["in_place"]), "rows_per_s_staging": spread_of(rates["staging"]),
            "ratio": spread_of(ratios),
            # CPU time a row (warm-up and page-cache drops included on both sides): staging / in place
            "cpu_us_per_row_in_place": spread_of(cpu["in_place"]), "cpu_us_per_row_staging": spread_of(cpu["staging"]),
            "cpu_ratio": spread_of(cpu_ratios)}


@click.command("inplace")
@click.argument("dataset", type=click.Path(exists=True, file_okay=False))
@click.option("--batch-sizes", default=DEFAULT_BATCHES, show_default=True,
              help="Distinct rows per batch (comma-separated).")
@click.option("--readers", default=",".join(READERS), show_default=True, help="Block readers to measure.")
@click.option("--seconds", default=1.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Measuring time of each side of a round.")
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(min=1),
              help="Interleaved rounds; the figure is the median of their ratios, with its spread.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the batches (round r: seed + r).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--output", type=click.Path(dir_okay=False), default=None, callback=output_option(),
              help="Also write the JSON object here.")
def bench_inplace(dataset, batch_sizes, readers, seconds, repeats, seed, as_json, output):
    """Distinct sorted rows read straight into the caller's buffer against the staging buffer."""
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.storage.open import open_feature_store
    from lsm_gnn.storage.pagecache import drop_file_cache

    lay = Dataset(dataset).features()
    names = [r.strip() for r in readers.split(",") if r.strip()]
    bad = [r for r in names if r not in READERS]
    if bad:
        raise click.BadParameter(f"{', '.join(bad)}: expected block readers among {', '.join(READERS)}",
                                 param_hint="--readers")
    points = []
    for name in names:
        with open_feature_store(lay, name) as store:
            if store.row_stride != store.row_bytes or store.row_bytes % store.block:
                raise click.ClickException(
                    f"{lay.path}: rows of {store.row_bytes} B (stride {store.row_stride}) are not whole "
                    f"{store.block} B blocks, so no batch of them is read in place; expected e.g. float32 x 1024")
            for b in parse_ints(batch_sizes, "--batch-sizes"):
                points.append(measure_point(store, b, seconds, repeats, seed, lambda: drop_file_cache(lay.path)))
    obj = {"bench": "inplace", "dataset": str(dataset), "row_bytes": lay.row_bytes, "baseline": "staging",
           "seed": seed, "points": points}
    if emit(obj, output, as_json):
        return
    click.echo(f"{'reader':>9} {'batch':>6} {'in place rows/s':>16} {'staging rows/s':>15} {'ratio':>7} {'spread':>7}"
               f" {'CPU us/row in place':>20} {'staging':>8} {'staging/in place':>17} {'spread':>7}")
    for p in points:
        click.echo(f"{p['reader']:>9} {p['batch_size']:>6} {p['rows_per_s_in_place']['median']:>16,.0f} "
                   f"{p['rows_per_s_staging']['median']:>15,.0f} {p['ratio']['median']:>6.2f}x "
                   f"{100 * p['ratio']['spread']:>6.1f}% {p['cpu_us_per_row_in_place']['median']:>20.2f} "
                   f"{p['cpu_us_per_row_staging']['median']:>8.2f} {p['cpu_ratio']['median']:>16.2f}x "
                   f"{100 * p['cpu_ratio']['spread']:>6.1f}%")

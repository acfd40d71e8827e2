"""`lsm-gnn bench checksums`: the row checksums' compiled, GIL-free path against the one `xxhash`
call per row from Python that it replaced, both measured in the same run on the same rows.

Three figures per point (rows per iteration x row bytes), each the median over `--repeats`
interleaved rounds (the order alternates round by round) with its spread:

- `hash_ratio`: `row_checksums_per_call` (the former path) over `row_checksums` (the kernel);
- `check_ratio`: the per-iteration cost of the verification the CPU engine's host path runs on
  every storage read (`FeatureStore.read_rows` -> `checksums.check_rows`: hash the rows read,
  compare each with its row's stored checksum) before over after; `check_ms` is that cost per
  iteration. The default 21,200 rows of 4 KiB are about the 86.8 MB an iteration that LSM-GNN read
  from storage at batch 1024 on the H200 host (reports/gpu/README.md);
- `main_thread_wait_ms`: while a second thread verifies again and again (`--gil-seconds`), how
  late the main thread (a trainer's thread) wakes from half-millisecond sleeps, the median of a
  round (`before`, `after`), beside the same with nothing else running (`alone`): a verifying thread
  that holds the GIL keeps it waiting up to the interpreter's 5 ms switch interval.
"""

from __future__ import annotations

import statistics
import threading
import time

import click
import numpy as np

from lsm_gnn.bench.replicate import spread_of
from lsm_gnn.bench.storage import parse_ints
from lsm_gnn.datasets import checksums
from lsm_gnn.utils.output import emit

DEFAULT_ROWS = "1024,21200"
DEFAULT_ROW_BYTES = "4096,512"


def _old_check(rows: np.ndarray, ids: np.ndarray, sums: np.ndarray, row_bytes: int) -> int:
    """The host path's verification before the kernel: one `xxhash` call per row, then the
    stored checksums gathered and compared in numpy (what check_rows did); the bad rows' count."""
    got = checksums.row_checksums_per_call(rows, row_bytes)
    return int(np.count_nonzero(got != sums[ids]))


def _new_check(rows: np.ndarray, ids: np.ndarray, sums: np.ndarray, row_bytes: int) -> int:
    checksums.check_rows("bench", rows, ids, sums, row_bytes)
    return 0


def _timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


NAP_S = 0.0005  # the main thread's sleep: it wants the GIL back every half millisecond


def _main_thread_waits(check, args, seconds: float) -> list[float]:
    """How late (s) the main thread wakes from NAP_S sleeps while a second thread runs
    `check(*args)` again and again for at least `seconds` (with `check` None: nothing else runs).
    A thread that holds the GIL keeps the sleeper waiting until it lets go: up to the interpreter's
    switch interval (5 ms) for a Python loop; a compiled nogil call keeps it waiting not at all."""
    stop = threading.Event()

    def worker():
        try:
            t0 = time.perf_counter()
            while check is not None and time.perf_counter() - t0 < seconds:
                check(*args)
        finally:
            stop.set()

    late = []
    th = threading.Thread(target=worker)
    th.start()
    t_end = time.perf_counter() + seconds
    while not stop.is_set() or (check is None and time.perf_counter() < t_end):
        t = time.perf_counter()
        time.sleep(NAP_S)
        late.append(time.perf_counter() - t - NAP_S)
    th.join()
    return late


def measure_point(num_rows: int, row_bytes: int, repeats: int, seed: int, gil_seconds: float) -> dict:
    """Both paths on `num_rows` random rows of `row_bytes` read in a random order from a file of
    2 * num_rows rows (verified against the file's checksums, as a read is)."""
    rng = np.random.default_rng([seed, num_rows, row_bytes])
    file_rows = rng.integers(0, 256, (2 * num_rows, row_bytes), dtype=np.uint8)
    sums = checksums.row_checksums(file_rows, row_bytes)
    ids = rng.choice(2 * num_rows, num_rows, replace=False).astype(np.int64)
    rows = file_rows[ids]
    if not np.array_equal(checksums.row_checksums_per_call(rows, row_bytes), sums[ids]):
        raise AssertionError("the kernel and the xxhash package disagree: nothing measured")
    _new_check(rows, ids, sums, row_bytes)  # compiled (or loaded from numba's cache) before timing
    check_args = (rows, ids, sums, row_bytes)
    t = {k: [] for k in ("hash_old", "hash_new", "check_old", "check_new")}
    waits = {"alone": [], "old": [], "new": []}
    for r in range(repeats):
        units = [("hash_old", checksums.row_checksums_per_call, (rows, row_bytes)),
                 ("hash_new", checksums.row_checksums, (rows, row_bytes)),
                 ("check_old", _old_check, check_args), ("check_new", _new_check, check_args)]
        for name, fn, args in (units if r % 2 == 0 else units[::-1]):
            t[name].append(_timed(fn, *args))
        if gil_seconds:
            runs = (("alone", None), ("old", _old_check), ("new", _new_check))
            for which, fn in runs[:: 1 if r % 2 == 0 else -1]:
                waits[which].append(1e3 * statistics.median(_main_thread_waits(fn, check_args, gil_seconds)))
    out = {"rows": num_rows, "row_bytes": row_bytes, "repeats": repeats}
    for name, vals in t.items():
        out[f"{name}_ms"] = spread_of([v * 1e3 for v in vals])
    out["hash_ratio"] = spread_of(_ratios(t["hash_old"], t["hash_new"]))
    out["check_ratio"] = spread_of(_ratios(t["check_old"], t["check_new"]))
    out["check_ms"] = {"before": out["check_old_ms"]["median"], "after": out["check_new_ms"]["median"]}
    out["hash_gb_per_s"] = num_rows * row_bytes / statistics.median(t["hash_new"]) / 1e9
    if gil_seconds:
        out["main_thread_wait_ms"] = {"alone": spread_of(waits["alone"]), "before": spread_of(waits["old"]),
                                      "after": spread_of(waits["new"])}
    return out


def _ratios(num: list[float], den: list[float]) -> list[float]:
    return [a / b for a, b in zip(num, den) if b > 0]


@click.command("checksums")
@click.option("--rows", default=DEFAULT_ROWS, show_default=True,
              help="Rows verified per iteration (comma-separated); 21,200 of 4 KiB: what the H200 run read an iteration.")
@click.option("--row-bytes", default=DEFAULT_ROW_BYTES, show_default=True, help="Row sizes in bytes (comma-separated).")
@click.option("--repeats", default=7, show_default=True, type=click.IntRange(min=1),
              help="Interleaved rounds; every figure is their median, with its spread.")
@click.option("--gil-seconds", default=0.2, show_default=True, type=click.FloatRange(min=0),
              help="Seconds a second thread verifies while the main thread's wake-ups are timed (0: skip).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the rows and the read order.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--output", type=click.Path(dir_okay=False), default=None, help="Also write the JSON object here.")
def bench_checksums(rows, row_bytes, repeats, gil_seconds, seed, as_json, output):
    """Row checksums: the compiled GIL-free kernel against one xxhash call per row from Python."""
    points = [measure_point(n, b, repeats, seed, gil_seconds)
              for b in parse_ints(row_bytes, "--row-bytes") for n in parse_ints(rows, "--rows")]
    obj = {"bench": "checksums", "algorithm": checksums.ALGORITHM, "baseline": "row_checksums_per_call",
           "seed": seed, "points": points}
    if emit(obj, output, as_json):
        return
    click.echo(f"{'rows':>7} {'bytes':>6} {'hash old/new':>13} {'check ms before':>16} {'after':>7} "
               f"{'ratio':>6} {'spread':>7} {'wait ms before':>15} {'after':>6}")
    for p in points:
        g = p.get("main_thread_wait_ms") or {}
        gb = (g.get("before") or {}).get("median")
        ga = (g.get("after") or {}).get("median")
        click.echo(f"{p['rows']:>7} {p['row_bytes']:>6} {p['hash_ratio']['median']:>12.2f}x "
                   f"{p['check_ms']['before']:>16.2f} {p['check_ms']['after']:>7.2f} {p['check_ratio']['median']:>5.2f}x "
                   f"{p['check_ratio']['spread']:>7.2f} {'-' if gb is None else f'{gb:.2f}':>15} "
                   f"{'-' if ga is None else f'{ga:.2f}':>6}")

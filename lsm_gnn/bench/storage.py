"""`lsm-gnn bench storage DATASET`: random and sequential row-read throughput of every reader,
next to the raw device limit that fio measures over the same file in the same run.

fio runs random 4 KiB O_DIRECT reads at queue depth 32 and sequential 1 MiB reads at queue depth
`--seq-depth` (16); the block readers' sequential points run with that many reads in flight
(threads, or the AIO queue depth) and 1 MiB reads, so both sides have the same reads in flight. Output buffers come from `store.empty_rows`
(page-aligned, like fio's), which lets the direct reader read consecutive rows straight into them.
The ratios compare the direct reader with fio: `random_iops_vs_fio` (4 KiB blocks per second
over fio's IOPS; the lowest over random batches of 4096 rows or more) and `seq_bw_vs_fio`
(storage bytes per second over fio's bandwidth; the lowest over sequential batches of 4096 rows
or more). Every storage reader starts each measurement with
the file's pages dropped from the page cache.

`--repeats N` runs N rounds of every reader x pattern x batch point and fio's random and
sequential jobs (the two ratios' limits), round r with the seed `run_seed(seed, r)`
(lsm_gnn.utils.seeds) and the order rotated (round r starts at unit r mod U, as `bench compare`
interleaves; a unit is one reader's store, or one fio job). Every headline figure (a point's
rates, fio's, the two ratios) is the median over the rounds; each point and fio job also carries
its per-round values and their spread (`bench compare`'s `spread_of`), and each ratio its
per-round ratios (each round's points against the same round's fio). fio's QD1 latency jobs, the
capped-mmap fault cost and the checksum cost run once (`measured_once`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import time

import click
import numpy as np

from lsm_gnn.bench.replicate import SPREAD_LIMIT, rotated_order, spread_of
from lsm_gnn.storage.faults import capped_fault_seconds
from lsm_gnn.utils.outpaths import output_option
from lsm_gnn.utils.output import emit
from lsm_gnn.utils.seeds import SEED_MAX, run_seed

TARGETS = {"random_iops_vs_fio": 0.80, "seq_bw_vs_fio": 0.90}
RATIO_MIN_BATCH = 4096
FIO_RANDOM = {"rw": "randread", "bs": "4k", "iodepth": 32}
FIO_SEQ = {"rw": "read", "bs": "1M", "iodepth": 16}  # bs = the block readers' default max_io_bytes
# synchronous 4 KiB reads, one in flight per job: the latency a page fault waits for, alone and
# beside a second faulting process; and the same through the page cache (fio's mmap engine)
FIO_LATENCY = {
    "qd1": {"rw": "randread", "bs": "4k", "iodepth": 1, "ioengine": "psync"},
    "qd1_jobs2": {"rw": "randread", "bs": "4k", "iodepth": 1, "ioengine": "psync", "numjobs": 2},
    "mmap_qd1": {"rw": "randread", "bs": "4k", "iodepth": 1, "ioengine": "mmap", "direct": 0},
}
BLOCK_READERS = ("direct", "buffered")
CHECKSUM_COST_TARGET = 0.05  # row checksums verified on read: at most 5 % of the random-read rate
RATES = ("rows_per_s", "gb_per_s", "storage_gb_per_s", "iops", "block_iops")  # a point's spreads
FIO_RATES = ("iops", "bw_bytes_per_s", "lat_s")
MEASURED_ONCE = ("fio.qd1", "fio.qd1_jobs2", "fio.mmap_qd1", "capped_mmap", "checksums")


def run_fio(fio: str, path: str, size: int, seconds: float, job: dict) -> dict:
    """One fio job over `path` (read-only; O_DIRECT unless the job says `direct: 0`); returns iops,
    bandwidth and mean latency (all `numjobs` together), or why not. Without an `ioengine` in the
    job, the first of io_uring, libaio and psync that works."""
    exe = shutil.which(fio)
    if exe is None:
        return {"available": False, "reason": f"fio not found ({fio!r}); install Debian's fio package "
                "(apt-get install fio) to measure the raw device limit"}
    last = ""
    for engine in ([job["ioengine"]] if "ioengine" in job else ["io_uring", "libaio", "psync"]):
        cmd = [exe, "--name=lsm-gnn", f"--filename={path}", "--readonly", f"--direct={job.get('direct', 1)}",
               f"--rw={job['rw']}", f"--bs={job['bs']}", f"--iodepth={job['iodepth']}", f"--ioengine={engine}",
               f"--numjobs={job.get('numjobs', 1)}", "--group_reporting", f"--size={size}",
               f"--runtime={max(seconds, 0.5):.1f}s", "--time_based", "--randrepeat=0", "--norandommap",
               "--output-format=json"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            try:
                read = json.loads(proc.stdout[proc.stdout.index("{"):])["jobs"][0]["read"]
            except (ValueError, KeyError, IndexError) as e:
                last = f"unreadable fio output: {e}"
                continue
            return {"available": True, **job, "engine": engine, "iops": float(read["iops"]),
                    "bw_bytes_per_s": float(read["bw_bytes"]), "lat_s": float(read["lat_ns"]["mean"]) * 1e-9,
                    "command": " ".join(cmd)}
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["fio failed"]
        last = last[0]
    return {"available": False, "reason": f"fio failed: {last}"}


PROBE_DEPTH = 32  # fio's random job's queue depth (FIO_RANDOM)


def native_random_iops(path: str, seconds: float = 2.0, depth: int = PROBE_DEPTH, block: int = 4096,
                       seed: int = 0, chunk: int = 8192) -> dict:
    """fio's random job without fio: random `block`-byte O_DIRECT reads of `path` at block-aligned
    offsets, `depth` in flight through Linux native AIO (lsm_gnn.storage.aio, the compiled
    submit/reap loop the direct reader uses, GIL released), for about `seconds`; nothing is copied
    out of the landing buffer. Returns iops (completed reads per second), or why not."""
    import mmap
    import os

    from lsm_gnn.storage.aio import AioContext, aio_reads, aio_status

    ok, why = aio_status()
    if not ok:
        return {"available": False, "reason": f"native AIO: {why}"}
    if not hasattr(os, "O_DIRECT"):
        return {"available": False, "reason": "no O_DIRECT on this platform"}
    blocks = os.path.getsize(path) // block
    if blocks < 1:
        return {"available": False, "reason": f"{path}: smaller than one {block}-byte block"}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:
        return {"available": False, "reason": f"{path}: O_DIRECT open failed: {e.strerror}"}
    rng = np.random.default_rng(seed)
    slots = 2 * depth  # reads land in a ring of slots (their bytes are not used)
    landing = mmap.mmap(-1, slots * block)  # page-aligned, as O_DIRECT needs
    buf = np.frombuffer(landing, np.uint8)
    boffs = (np.arange(chunk, dtype=np.int64) % slots) * block
    lens = np.full(chunk, block, np.int64)
    seg = np.zeros(chunk + 1, np.int64)  # no rows to copy out of any read
    none = np.zeros(0, np.int64)
    out = np.zeros((1, block), np.uint8)
    ctx = AioContext(depth)
    done = failed = 0
    errors: set = set()
    try:
        t0 = time.perf_counter()
        while done + failed == 0 or time.perf_counter() - t0 < seconds:
            offs = rng.integers(0, blocks, chunk, dtype=np.int64) * block
            got = np.zeros(chunk, np.int64)
            if aio_reads(ctx.ctx, fd, buf, offs, boffs, lens, depth, got, none, none, seg, block, out) < 0:
                return {"available": False, "reason": "native AIO: io_submit or io_getevents failed"}
            done += int((got == block).sum())
            failed += int((got != block).sum())
            errors.update(int(g) for g in np.unique(got[(got != block) & (got < 0)])[:4])
            if done == 0:  # a whole chunk failed: the disk refuses these reads, not worth the seconds
                break
        elapsed = time.perf_counter() - t0
    finally:
        ctx.close()
        os.close(fd)
        del buf
        landing.close()
    if done == 0:
        why = ", ".join(os.strerror(-e) for e in sorted(errors)) or "short reads"
        return {"available": False, "reason": f"{path}: every one of {failed} reads failed ({why})"}
    return {"available": True, "engine": "native libaio (lsm_gnn.storage.aio)", "rw": "randread", "bs": block,
            "iodepth": depth, "iops": done / elapsed, "reads": done, "failed_reads": failed, "seconds": elapsed}


def probe_disk(dataset: str, seconds: float = 3.0, depth: int = PROBE_DEPTH, fio: str = "fio") -> dict:
    """The raw random 4 KiB read rate of the dataset's feature file (a step of `lsm-gnn check gpu`,
    right after LSM-GNN read the same file): fio's random job where fio is installed, and the same
    job through native AIO always (the GPU machine may have no fio); its pages dropped from the page
    cache first. `iops`: the higher of the two (the disk's limit as the strongest probe found it)."""
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.storage.pagecache import drop_file_cache

    lay = Dataset(dataset).features()
    drop_file_cache(lay.path)
    by = {"fio": run_fio(fio, str(lay.path), lay.file_bytes, seconds, dict(FIO_RANDOM, iodepth=depth))}
    drop_file_cache(lay.path)
    by["native"] = native_random_iops(str(lay.path), seconds, depth)
    ok = {k: v for k, v in by.items() if v.get("available")}
    best = max(ok, key=lambda k: ok[k]["iops"]) if ok else None
    out = {"file": str(lay.path), "file_bytes": lay.file_bytes, "block_bytes": 4096, "iodepth": depth,
           "iops": ok[best]["iops"] if best else None, "probe": best, "by_probe": by}
    if best is None:
        out["error"] = "no probe ran: " + "; ".join(f"{k}: {v.get('reason')}" for k, v in by.items())
    else:
        print(f"[disk_probe] {lay.path}: {out['iops']:,.0f} random 4 KiB reads/s at depth {depth} ({best})",
              flush=True)
    return out


def _batches(pattern: str, batch: int, num_rows: int, rng: np.random.Generator):
    if pattern == "random":  # uniform ids with repeats, as a sampler's input nodes have
        while True:
            yield rng.integers(0, num_rows, batch, dtype=np.int64)
    if pattern == "distinct":  # distinct ids in increasing order, as the cache's storage reads are
        while True:
            yield np.sort(rng.choice(num_rows, batch, replace=False)).astype(np.int64)
    start = 0
    while True:  # fully sequential: consecutive rows, wrapping at the end of the file
        if start + batch > num_rows:
            start = 0
        yield np.arange(start, min(start + batch, num_rows), dtype=np.int64)
        start += batch


def measure(store, pattern: str, batch: int, seconds: float, seed: int, drop) -> dict:
    """Read batches for about `seconds` (at least 2 batches) after a warm-up batch; report rates."""
    gen = _batches(pattern, batch, store.num_rows, np.random.default_rng(seed))
    warm = next(gen)
    if store.reader_name == "mmap":  # nothing to warm but its pages, which stay mapped (fadvise does not
        warm = warm[:8]              # drop mapped pages) into the timed batches: 8 rows, not a batch
    store.read_rows(warm)  # warm-up: compiled code, threads, staging buffer
    if drop is not None:
        drop()
    before = store.counters.snapshot()
    in_place0 = getattr(store, "in_place_batches", 0)
    t0, k = time.perf_counter(), 0
    out = None
    while k < 2 or time.perf_counter() - t0 < seconds:
        ids = next(gen)
        if out is None or out.shape[0] != len(ids):
            out = store.empty_rows(len(ids))  # page-aligned, so the direct reader can read into it
        store.read_rows(ids, out=out)
        k += 1
    c = store.counters
    secs = c.seconds - before.seconds
    rows = c.rows_requested - before.rows_requested
    nbytes = c.bytes_read - before.bytes_read
    ops = c.io_ops - before.io_ops
    useful = c.useful_bytes - before.useful_bytes
    block = store.path_info.get("block_size", 4096)
    return {"reader": store.reader_name, "backend": store.path_info.get("backend"), "pattern": pattern,
            "batch_size": batch, "batches": k, "rows": rows, "seconds": secs,
            "rows_per_s": rows / secs, "gb_per_s": rows * store.row_bytes / secs / 1e9,
            "storage_gb_per_s": nbytes / secs / 1e9, "iops": ops / secs, "block_iops": nbytes / block / secs,
            "io_ops": ops, "bytes_read": nbytes, "read_amplification": nbytes / useful if useful else 0.0,
            # batches the direct/buffered reader read straight into `out` (no staging copy)
            "in_place_batches": getattr(store, "in_place_batches", 0) - in_place0, "path_info": store.path_info}


def ratios(results: list[dict], fio_random: dict, fio_seq: dict, num_rows: int | None = None) -> dict:
    """Direct reader vs fio over batches of 4096 rows or more (or the whole file, if smaller)."""
    min_batch = min(RATIO_MIN_BATCH, num_rows or RATIO_MIN_BATCH)

    def lowest(pattern, value, limit):
        pts = [r for r in results if r["reader"] == "direct" and r["pattern"] == pattern
               and r["batch_size"] >= min_batch]
        if not pts or not limit:
            return None
        return min(value(r) for r in pts) / limit

    rnd = lowest("random", lambda r: r["block_iops"], fio_random.get("iops") if fio_random["available"] else None)
    seq = lowest("sequential", lambda r: r["storage_gb_per_s"] * 1e9,
                 fio_seq.get("bw_bytes_per_s") if fio_seq["available"] else None)
    return {"random_iops_vs_fio": rnd, "seq_bw_vs_fio": seq}


def _median(values):
    import statistics

    return statistics.median(values)


def median_point(runs: list[dict]) -> dict:
    """One point over its rounds: every number the median of the rounds' (so `rows_per_s` is the
    median of the rounds' rates, not rows over seconds), the rest from the first round; with
    `per_round` (the rates, batches and seconds of each round) and `spread` (`spread_of` per rate)."""
    first = runs[0]
    out = {k: (_median([r[k] for r in runs]) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
           for k, v in first.items()}
    out["per_round"] = {k: [r[k] for r in runs] for k in (*RATES, "batches", "seconds")}
    out["spread"] = {k: spread_of([r[k] for r in runs]) for k in RATES}
    return out


def median_fio(runs: list[dict]) -> dict:
    """One fio job over its rounds: iops, bandwidth and latency the medians, with `per_round` and
    `spread`; as the first round's when that one did not run."""
    ok = [r for r in runs if r.get("available")]
    if not ok:
        return dict(runs[0])
    out = {**ok[0], **{k: _median([r[k] for r in ok]) for k in FIO_RATES}, "runs": len(ok)}
    out["per_round"] = {k: [r[k] for r in ok] for k in FIO_RATES}
    out["spread"] = {k: spread_of(out["per_round"][k]) for k in FIO_RATES}
    return out


def round_ratios(rounds: list[list[dict]], fio_random: list[dict], fio_seq: list[dict],
                 num_rows: int | None = None) -> dict:
    """Each ratio per round (the round's direct points against the same round's fio jobs), with
    their median, min, max and spread (`spread_of`); `median` is the headline ratio."""
    per = [ratios(res, fr, fs, num_rows) for res, fr, fs in zip(rounds, fio_random, fio_seq)]
    return {k: {"per_round": [p[k] for p in per], **spread_of([p[k] for p in per])} for k in TARGETS}


def checksum_cost(lay, sizes: list[int], seconds: float, seed: int, repeats: int, threads: int, drop) -> dict:
    """What verifying every row against its checksum costs the direct reader's random reads: the
    rate with verification over the rate without, `repeats` pairs per batch size in this run,
    interleaved (the order alternates) on the same ids; over the IOPS ratio's batch sizes.
    `cost` = 1 - the lowest ratio of medians."""
    from lsm_gnn.storage.open import open_feature_store

    if lay.checksums is None:
        return {"available": False, "reason": "the dataset has no row checksums "
                "(`lsm-gnn dataset verify --write-checksums` adds them)"}
    min_batch = min(RATIO_MIN_BATCH, lay.num_rows)
    pts = [s for s in sizes if s >= min_batch] or sizes[-1:]
    points = []
    opts = dict(threads=threads, queue_depth=threads)
    with open_feature_store(lay, "direct", verify_checksums=True, **opts) as on, \
            open_feature_store(lay, "direct", verify_checksums=False, **opts) as off:
        for size in pts:
            rates = {"verified": [], "unverified": []}
            for i in range(repeats):
                pair = [("verified", on), ("unverified", off)]
                for key, store in (pair if i % 2 == 0 else pair[::-1]):
                    rates[key].append(measure(store, "random", min(size, lay.num_rows), seconds, seed + i,
                                              drop)["rows_per_s"])
            ratio = float(np.median(rates["verified"]) / np.median(rates["unverified"]))
            points.append({"batch_size": size, "rows_per_s_verified": rates["verified"],
                           "rows_per_s_unverified": rates["unverified"], "ratio": ratio})
    return {"available": True, "repeats": repeats, "points": points,
            "cost": max(0.0, 1 - min(p["ratio"] for p in points)), "target": CHECKSUM_COST_TARGET}


def fault_costs(latency: dict, capped: dict | None = None) -> dict:
    """What a synchronous page fault costs on this device, from fio's QD1 jobs (lsm-gnn project's
    `storage.latency_s` and `cpu.fault_cpu_s`): the read's latency alone, the wait one more
    faulting process adds, and the page cache's own work per fault (mmap engine minus O_DIRECT);
    and, measured the mmap loader's way (lsm_gnn.storage.faults), its whole cost per fault with
    `capped_processes` processes faulting at once (`storage.fault_s`)."""
    ok = {k: v for k, v in latency.items() if v.get("available")}
    one = ok.get("qd1", {}).get("lat_s")
    two = ok.get("qd1_jobs2", {}).get("lat_s")
    mm = ok.get("mmap_qd1", {}).get("lat_s")
    return {"latency_s": one,
            "second_process_wait_s": None if one is None or two is None else two - one,
            "page_cache_s": None if one is None or mm is None else max(0.0, mm - one),
            "capped_mmap_s": (capped or {}).get("fault_s"),
            "capped_processes": (capped or {}).get("processes")}


def parse_ints(text: str, what: str) -> list[int]:
    """Positive integers from a comma-separated option (`what` names it); the bench verbs' one parser."""
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"{what} must be comma-separated integers, found {text!r}") from None
    if not vals or min(vals) < 1:
        raise click.BadParameter(f"{what} must be positive integers, found {text!r}")
    return vals


@click.command("storage")
@click.argument("dataset", type=click.Path(exists=True, file_okay=False))
@click.option("--batch-sizes", default="256,1024,4096,16384", show_default=True,
              help="Rows per random batch (comma-separated).")
@click.option("--seq-batch-sizes", default="4096,16384", show_default=True,
              help="Rows per sequential batch (comma-separated; empty: none).")
@click.option("--seconds", default=2.0, show_default=True, type=float,
              help="Measuring time per reader, pattern and batch size.")
@click.option("--readers", default="direct,buffered,mmap,memory", show_default=True,
              help="Readers to measure; direct:aio / direct:threads / direct:io_uring pick a backend.")
@click.option("--threads", default=128, show_default=True, type=click.IntRange(min=1),
              help="Reads in flight for random batches (AIO queue depth, or reader threads).")
@click.option("--seq-depth", default=FIO_SEQ["iodepth"], show_default=True, type=click.IntRange(min=1),
              help="Reads in flight for sequential batches: the block readers' depth and fio's "
                   "sequential queue depth alike.")
@click.option("--fio", "fio_path", default="fio", show_default=True, help="The fio executable.")
@click.option("--fio-seconds", default=5.0, show_default=True, type=float, help="Seconds per fio job.")
@click.option("--fault-processes", default=2, show_default=True, type=click.IntRange(min=0),
              help="Processes that fault at once in the capped-mmap fault measurement (the devices of a "
                   "run); 0 leaves it out.")
@click.option("--fault-batch", default=4096, show_default=True, type=click.IntRange(min=1),
              help="Distinct rows per gather in the capped-mmap fault measurement.")
@click.option("--checksum-repeats", default=3, show_default=True, type=click.IntRange(min=0),
              help="Interleaved pairs (row checksums verified / not) of the direct reader's random batches of "
                   f"{RATIO_MIN_BATCH} rows or more, for the checksums' cost; 0 skips it.")
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(min=1),
              help="Rounds of every point and of fio's random and sequential jobs, each with a new seed and "
                   "the order rotated; the figures are the medians, with each one's spread over the rounds.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, SEED_MAX),
              help="Base seed; round r draws its random batches with run_seed(seed, r).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option("--output", type=click.Path(dir_okay=False), default=None, callback=output_option(),
              help="Also write the JSON object here.")
@click.option("--progress/--no-progress", default=True, help="Progress bar (only on a terminal).")
def bench_storage(dataset, batch_sizes, seq_batch_sizes, seconds, readers, threads, seq_depth, fio_path,
                  fio_seconds, fault_processes, fault_batch, checksum_repeats, repeats, seed, as_json, output, progress):
    """Random and sequential row-read throughput of every reader vs fio's raw device limit."""
    from tqdm import tqdm

    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.storage.open import READERS, open_feature_store
    from lsm_gnn.storage.pagecache import drop_file_cache

    sizes = parse_ints(batch_sizes, "--batch-sizes")
    seq_sizes = parse_ints(seq_batch_sizes, "--seq-batch-sizes") if seq_batch_sizes.strip() else []
    specs = []
    for spec in (s.strip() for s in readers.split(",") if s.strip()):
        name, _, backend = spec.partition(":")
        if name not in READERS or name == "gpu":
            raise click.BadParameter(f"unknown reader {name!r} (choose from direct, buffered, mmap, memory)")
        if (name, backend or None) not in specs:  # each reader once: one point per round
            specs.append((name, backend or None))
    lay = Dataset(dataset).features()
    path = str(lay.path)

    def drop():
        drop_file_cache(path)

    groups = [("random", sizes, threads), ("sequential", seq_sizes, seq_depth)]
    units = []  # (name, reader, backend, patterns, store options): one store each, or a fio job
    for name, backend in specs:
        if backend and name not in BLOCK_READERS:
            raise click.BadParameter(f"reader {name!r} has no backend choice")
        label = name + (f":{backend}" if backend else "")
        if name in BLOCK_READERS:  # one store per pattern: sequential batches run at fio's sequential depth
            units += [(f"{label} {pattern}", name, backend, (pattern,),
                       dict(threads=depth, queue_depth=depth, backend=backend or "auto"))
                      for pattern, ss, depth in groups if ss]
        else:
            units.append((label, name, backend, ("random", "sequential"), {}))
    units += [("fio random", None, None, (), {}), ("fio sequential", None, None, (), {})]
    by_name = {u[0]: u for u in units}
    # the points in the order of the output: readers as given, random then sequential, by batch size
    points = [(i, p, s) for i, _ in enumerate(specs) for p, ss in (("random", sizes), ("sequential", seq_sizes))
              for s in ss]
    order = rotated_order([u[0] for u in units], repeats)
    seeds = [run_seed(seed, r) for r in range(repeats)]
    rounds, fio_rounds = [], {"fio random": [], "fio sequential": []}
    bar = tqdm(total=repeats * (len(points) + 2) + len(FIO_LATENCY),
               desc="bench storage", disable=not progress or as_json or not sys.stderr.isatty())
    unit_seconds = []
    with contextlib.ExitStack() as keep:
        # the in-RAM ideal reads the whole file to load (4 GB: seconds): once, kept over the rounds
        loaded = {spec: keep.enter_context(open_feature_store(lay, spec[0])) for spec in specs if spec[0] == "memory"}
        for r, names in enumerate(order):
            got, took = {}, {}
            for unit in names:
                _, name, backend, patterns, opts = by_name[unit]
                t0 = time.perf_counter()
                if name is None:  # fio: the device's limit in this round
                    drop()
                    job = FIO_RANDOM if unit == "fio random" else dict(FIO_SEQ, iodepth=seq_depth)
                    fio_rounds[unit].append(run_fio(fio_path, path, lay.file_bytes, fio_seconds, job))
                    took[unit] = time.perf_counter() - t0
                    bar.update()
                    continue
                i = specs.index((name, backend))
                with (contextlib.nullcontext(loaded[(name, backend)]) if (name, backend) in loaded
                      else open_feature_store(lay, name, drop_page_cache=True, **opts)) as store:
                    for pattern, ss, _ in groups:
                        if pattern not in patterns:
                            continue
                        for size in ss:
                            got[(i, pattern, size)] = measure(store, pattern, min(size, lay.num_rows), seconds,
                                                              seeds[r], None if name == "memory" else drop)
                            bar.update()
                took[unit] = time.perf_counter() - t0
            rounds.append([got[k] for k in points])
            unit_seconds.append(took)
    results = [median_point([rnd[j] for rnd in rounds]) for j in range(len(points))]
    fio_random, fio_seq = median_fio(fio_rounds["fio random"]), median_fio(fio_rounds["fio sequential"])
    sums = (checksum_cost(lay, sizes, seconds, seed, checksum_repeats, threads, drop) if checksum_repeats
            else {"available": False, "reason": "--checksum-repeats 0"})
    latency = {}
    for name, job in FIO_LATENCY.items():
        drop()  # the mmap job reads through the page cache: start it empty
        latency[name] = run_fio(fio_path, path, lay.file_bytes, fio_seconds, job) if fio_random["available"] \
            else dict(fio_random)
        bar.update()
    capped = None
    if fault_processes:
        # the mmap loader's own fault, several ranks at once, under its page-cache cap (lsm_gnn.storage.memcap)
        drop()
        capped = capped_fault_seconds(dataset, processes=fault_processes, batch=fault_batch, seed=seed)
        drop()
    bar.close()
    per_round = round_ratios(rounds, fio_rounds["fio random"], fio_rounds["fio sequential"], lay.num_rows)
    r = {k: v["median"] for k, v in per_round.items()}
    meets = {k: (None if v is None else v >= TARGETS[k]) for k, v in r.items()}
    obj = {"benchmark": "storage", "dataset": str(dataset), "file": path, "num_rows": lay.num_rows,
           "row_bytes": lay.row_bytes, "row_stride": lay.row_stride, "file_bytes": lay.file_bytes,
           "seconds_per_point": seconds, "repeats": repeats, "order": order, "spread_limit": SPREAD_LIMIT,
           "seeds": {"base": seed, "by_round": seeds, "rule": "numpy SeedSequence([base, round])"},
           "measured_once": list(MEASURED_ONCE), "unit_seconds": unit_seconds,
           "fio": {"random": fio_random, "sequential": fio_seq, **latency},
           "fault": fault_costs(latency, capped), "capped_mmap": capped, "checksums": sums, "results": results, **r,
           "ratio_rounds": per_round, "targets": TARGETS, "meets_targets": meets}
    if emit(obj, output, as_json):
        return
    _print_table(obj)


def _print_table(obj: dict) -> None:
    echo = click.echo
    echo(f"storage benchmark: {obj['file']} ({obj['num_rows']} rows of {obj['row_bytes']} B, "
         f"stride {obj['row_stride']} B, {obj['file_bytes'] / 1e9:.2f} GB); medians of {obj.get('repeats', 1)} "
         "round(s)")
    echo(f"{'reader':<10}{'backend':<12}{'pattern':<12}{'batch':>7}{'rows/s':>12}{'GB/s':>8}"
         f"{'storage GB/s':>14}{'IOPS':>10}{'4K IOPS':>10}{'ampl':>6}")
    for r in obj["results"]:
        echo(f"{r['reader']:<10}{str(r['backend']):<12}{r['pattern']:<12}{r['batch_size']:>7}"
             f"{r['rows_per_s']:>12.0f}{r['gb_per_s']:>8.3f}{r['storage_gb_per_s']:>14.3f}{r['iops']:>10.0f}"
             f"{r['block_iops']:>10.0f}{r['read_amplification']:>6.2f}")
    cs = obj.get("checksums") or {}
    if cs.get("available"):
        pts = ", ".join(f"batch {p['batch_size']}: {p['ratio']:.3f}" for p in cs["points"])
        verdict = "meets" if cs["cost"] <= cs["target"] else "ABOVE"
        echo(f"row checksums verified on read: random rate verified / unverified ({cs['repeats']} interleaved "
             f"pairs, medians) {pts}; cost {cs['cost']:.1%} ({verdict} the {cs['target']:.0%} target)")
    else:
        echo(f"row checksums: cost not measured ({cs.get('reason')})")
    fr, fs = obj["fio"]["random"], obj["fio"]["sequential"]
    if not fr["available"]:
        echo(f"raw device limit: NOT MEASURED: {fr['reason']}; no ratios")
        return
    echo(f"fio ({fr['engine']}): random 4 KiB QD{fr['iodepth']}: {fr['iops']:.0f} IOPS; "
         + (f"sequential 1 MiB QD{fs['iodepth']}: {fs['bw_bytes_per_s'] / 1e9:.3f} GB/s"
            if fs["available"] else f"sequential: not measured ({fs['reason']})"))
    fc = obj.get("fault") or {}
    if fc.get("latency_s") is not None:
        extra = "" if fc.get("second_process_wait_s") is None else \
            f", +{fc['second_process_wait_s'] * 1e6:.1f} us beside a second process"
        cache = "" if fc.get("page_cache_s") is None else f"; page cache +{fc['page_cache_s'] * 1e6:.1f} us per fault"
        echo(f"fio 4 KiB QD1 (psync): {fc['latency_s'] * 1e6:.1f} us per read{extra}{cache}")
    if fc.get("capped_mmap_s") is not None:
        echo(f"mmap loader under its page-cache cap, {fc['capped_processes']} processes at once: "
             f"{fc['capped_mmap_s'] * 1e6:.1f} us per fault")
    for key, label in (("random_iops_vs_fio", "direct random 4K IOPS / fio (batches >= 4096)"),
                       ("seq_bw_vs_fio", f"direct sequential bandwidth / fio (batches >= 4096, both "
                                         f"QD{fs.get('iodepth')})")):
        v = obj[key]
        if v is None:
            echo(f"{label}: n/a (no direct batches of {RATIO_MIN_BATCH} rows or more, or no fio figure)")
        else:
            verdict = "meets" if v >= TARGETS[key] else "BELOW"
            rr = (obj.get("ratio_rounds") or {}).get(key) or {}
            over = "" if (rr.get("runs") or 0) < 2 else \
                f" median of {rr['runs']} rounds [{rr['min']:.2f}, {rr['max']:.2f}], spread {rr['spread']:.1%}"
            echo(f"{label}: {v:.2f}{over} ({verdict} the {TARGETS[key]:.0%} target)")

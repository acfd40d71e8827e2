"""A CPU speed index: how fast this machine runs CPU work now, against when a profile's CPU
constants were measured.

Why: on a VM shared with other work the same command runs at different speeds from one half hour
to the next. Repeat runs of the workflow's baseline matrix on the 2-core VM agreed within 6 % inside
one run, but the in-memory ideal took 105 s per steady epoch at 23:25 and 138 s at 23:00, and every
system was 7-21 % slower at 23:50 than the profile's constants predict. A profile that states the
index measured with its constants (`cpu.index_s`) can be scaled to the speed the runs had:
`lsm-gnn run` measures the index around every run (baselines.harness), and
`lsm-gnn project --calibrate-cpu` multiplies every CPU time of a CPU-only profile by the median of
the records' indexes / the profile's (and divides its CPU rates by it), or by the index now when a
record carries none. Device figures (SSD, links of a GPU machine) are not touched; the storage
benchmark of the same run measures those.

The workload is a small version of what the CPU stages do, on one thread: a dense two-layer
forward and backward pass (torch, 1 thread) and a gather of random 4 KiB rows (numpy). It takes
about half a second; the index is the median of its repetitions.
"""

from __future__ import annotations

import time

import numpy as np

REPS = 9


def cpu_index_seconds(reps: int = REPS, seed: int = 0) -> float:
    """Median seconds of one repetition of the index workload (see the module)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(2048, 1024, generator=g)
        w1 = torch.randn(1024, 256, generator=g, requires_grad=True)
        w2 = torch.randn(256, 19, generator=g, requires_grad=True)
        rng = np.random.default_rng(seed)
        table = rng.random((16384, 1024), dtype=np.float32)  # 64 MiB of 4 KiB rows
        times = []
        for _ in range(reps):
            ids = rng.integers(0, len(table), 4096)
            t0 = time.perf_counter()
            loss = (torch.relu(x @ w1) @ w2).logsumexp(1).mean()
            loss.backward()
            w1.grad = w2.grad = None
            rows = table[ids]
            times.append(time.perf_counter() - t0)
            del rows
        return float(np.median(times))
    finally:
        torch.set_num_threads(threads)


# profile keys that are CPU seconds (scale with the index) and CPU rates (scale inversely)
CPU_TIMES = ("compute.step.fixed_s", "compute.step.row_s", "compute.step.edge_s", "cpu.cache_row_s", "cpu.io_cpu_s", "cpu.fault_cpu_s",
             "cpu.kvstore_row_s")
CPU_RATES = ("compute.sample_rows_per_s", "cpu.rpc_sample_rows_per_s", "links.exchange.bandwidth",
             "links.host_memory.bandwidth", "links.nic.bandwidth")


def speed_sets(profile, at_s: float, skip=()) -> tuple[list[str], float]:
    """`KEY=VALUE` overrides that put a CPU-only profile's CPU figures at the speed `at_s` of
    the index, and the factor (`at_s` / the profile's index). `skip`: keys set otherwise (measured
    in the same run), left alone."""
    ref = profile.cpu.index_s
    if ref is None or not profile.cpu_only:
        return [], 1.0
    factor = at_s / ref
    data = profile.model_dump()
    out = []
    for key in CPU_TIMES + CPU_RATES:
        if key in skip:
            continue
        node = data
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            continue
        value = node * factor if key in CPU_TIMES else node / factor
        out.append(f"{key}={value!r}")
    return out, factor


GATHER_TABLE_BYTES = 256 << 20  # well beyond the caches, as the feature table is (at least 4 batches)
GATHER_BATCH_ROWS = 6200        # the workflow's batch (128, fan-outs 10,15): about 6,200 input rows


def host_memory_bandwidth(seconds: float = 1.0, seed: int = 0, batch_rows: int = GATHER_BATCH_ROWS,
                          row_bytes: int = 4096) -> dict:
    """One core's gather of random rows into a batch, the way the in-memory store does it
    (lsm_gnn.storage.memory: np.take of sorted ids into a preallocated batch): bytes per second, the
    median over repetitions for about `seconds`. The projection's `links.host_memory` (gather, hit
    copies, reorder, victim copies and shared-memory rows on a CPU profile). The batch's size
    matters: on the VM (2026-12-05, other benchmarks running) 6,200 rows of 4 KiB went at
    2.5-3.6 GB/s and 8,192 at 2.0-2.4 GB/s, so the validation measures at its records' rows per
    iteration. The profile's 1.67 GB/s came from the loop's gather on 2026-12-01; the workflow's
    ideal gathered at 4.2 GB/s on 2026-12-05 00:28."""
    import time

    rng = np.random.default_rng(seed)
    batch_rows = max(1, int(batch_rows))
    dim = max(1, int(row_bytes) // 4)
    rows = max(4 * batch_rows, GATHER_TABLE_BYTES // (4 * dim))
    table = np.full((rows, dim), 1.0, dtype=np.float32)
    out = np.empty((batch_rows, dim), dtype=np.float32)
    row = dim * table.itemsize
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 3:
        ids = np.sort(rng.integers(0, rows, batch_rows))
        t0 = time.perf_counter()
        np.take(table, ids, axis=0, out=out)
        times.append(time.perf_counter() - t0)
    t = float(np.median(times))
    return {"bandwidth": batch_rows * row / t, "reps": len(times), "seconds_per_batch": t,
            "batch_rows": batch_rows, "row_bytes": row, "table_rows": rows, "seed": seed}


def machine_sets(profile, seconds: float = 1.0, seed: int = 0, index_s: float | None = None,
                 batch_rows: int = GATHER_BATCH_ROWS, row_bytes: int = 4096) -> dict:
    """The CPU profile's machine constants measured here, now (a second or two, seeded): the host
    memory gather (`links.host_memory.bandwidth`), and the CPU speed index (`cpu_index_seconds`) that
    puts the per-row CPU constants (cache, KVStore, sampling, the step: CPU_TIMES, CPU_RATES) at this
    machine's speed now. Returns {"sets": [KEY=VALUE], "measured": {key: {"value", "replaced", "how"}},
    "index_s": the index}. Not a CPU profile: nothing (its figures are another machine's)."""
    if not profile.cpu_only:
        return {"sets": [], "measured": {}, "index_s": None}
    hm = host_memory_bandwidth(seconds, seed, batch_rows, row_bytes)
    key = "links.host_memory.bandwidth"
    measured = {key: {"value": hm["bandwidth"], "replaced": profile.links.host_memory.bandwidth,
                      "how": f"np.take of {hm['batch_rows']} random {hm['row_bytes']} B rows of a "
                             f"{hm['table_rows'] * hm['row_bytes'] / 2**20:.0f} MiB table, median of {hm['reps']} "
                             f"(seed {seed})"}}
    at = index_s if index_s is not None else cpu_index_seconds(seed=seed)
    speed, factor = speed_sets(profile, at, skip={key})
    for item in speed:
        k, _, v = item.partition("=")
        node = profile.model_dump()
        for part in k.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        measured[k] = {"value": float(v), "replaced": node,
                       "how": f"the profile's figure x the CPU speed index now {1e3 * at:.2f} ms / the profile's "
                              f"{1e3 * profile.cpu.index_s:.2f} ms (x{factor:.3f})"}
    return {"sets": [*speed, f"{key}={hm['bandwidth']!r}"], "measured": measured, "index_s": at}

"""`lsm-gnn bench cache`: replay speed of the CPU cache engine per policy.

For each policy the CPU engine replays the trace (best of --repeat, CPU time of the replaying
thread, i.e. per core) and the pure-Python reference replays a prefix of it in the same run; the
ratio between the two is the speedup. The headline figure, `requests_per_s_per_core`, is the
hybrid policy with the victim buffer and PVP on (the configuration of the paper).

The default trace is generated: every batch is a set of distinct ids (like a sampler's input
nodes) drawn with Zipf(skew) popularity over a random permutation of the rows, and the PageRank
bytes are the popularity percentiles. `--trace` replays a recorded trace (lsm_gnn.sim.trace).
"""

from __future__ import annotations

import json
import time

import click
import numpy as np

# the mapped-memory helpers the data plane uses too (registration, device address)
from lsm_gnn.utils.mapped import HOST_REGISTER_MAPPED, HOST_REGISTER_PORTABLE, mapped_device_pointer  # noqa: F401

from lsm_gnn.cache.policies import configurable_names
from lsm_gnn.metrics import distinct_hit_rate
from lsm_gnn.utils.seeds import SEED_MAX

# every policy of the registry, the paper's first (the headline)
POLICY_NAMES = ("hybrid",) + tuple(n for n in configurable_names() if n != "hybrid")


def synthetic_trace(num_rows: int, num_batches: int, batch_size: int, skew: float = 0.9,
                    seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """(batches, PageRank bytes): distinct ids per batch, popular rows requested more often."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, num_rows + 1, dtype=np.float64) ** skew
    cdf = np.cumsum(popularity)
    cdf /= cdf[-1]
    perm = rng.permutation(num_rows)  # rank r is node perm[r]
    static = np.empty(num_rows, np.uint8)
    static[perm] = (255 - (255 * np.arange(num_rows) // max(num_rows - 1, 1))).astype(np.uint8)
    batches = []
    for _ in range(num_batches):
        ids = np.unique(perm[np.searchsorted(cdf, rng.random(int(batch_size * 1.5)))])[:batch_size]
        batches.append(rng.permutation(ids).astype(np.int64))
    return batches, static


def measure(batches, cfg, num_rows, static, budget, repeat=3, engine="cpu") -> tuple[float, object]:
    """(requests per CPU-second of this thread, ReplayResult) over `batches`."""
    from lsm_gnn.cache.replay import replay

    requests = sum(len(b) for b in batches)
    best, result = float("inf"), None
    for _ in range(max(repeat, 1)):
        t0 = time.thread_time()
        result = replay(batches, cfg, num_rows, static, budget=budget, engine=engine)
        best = min(best, time.thread_time() - t0)
    return requests / max(best, 1e-9), result


@click.command("cache")
@click.option("--trace", "trace_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Replay a recorded trace (.npz) instead of a generated one.")
@click.option("--device", default=0, show_default=True, help="Device of the trace whose requests are replayed.")
@click.option("--static", "static_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="PageRank bytes (.npy, uint8 per row) for --trace; default: all equal.")
@click.option("--rows", default=1_000_000, show_default=True, help="Rows of the generated trace.")
@click.option("--batches", default=60, show_default=True, help="Batches of the generated trace.")
@click.option("--batch-size", default=50_000, show_default=True, type=click.IntRange(min=1),
              help="Distinct ids per generated batch.")
@click.option("--skew", default=0.9, show_default=True, help="Zipf exponent of the generated popularity.")
@click.option("--capacity-fraction", default=0.1, show_default=True,
              help="Total memory budget (cache lines + victim buffer + landing buffer) / rows.")
@click.option("--ways", default=32, show_default=True)
@click.option("--window", default=8, show_default=True)
@click.option("--depth", default=None, type=int,
              help="Victim-buffer lines per queue (default: the host share of the budget, cache.victim_buffer).")
@click.option("--policy", "policies", multiple=True, type=click.Choice(POLICY_NAMES),
              help="Policies to measure (repeatable; default all).")
@click.option("--reference-requests", default=30_000, show_default=True,
              help="Requests of the trace's prefix replayed by the pure-Python reference.")
@click.option("--repeat", default=3, show_default=True)
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, SEED_MAX))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
def bench_cache(trace_path, device, static_path, rows, batches, batch_size, skew, capacity_fraction, ways, window, depth,
                policies, reference_requests, repeat, seed, as_json):
    """Requests/s/core of the CPU cache engine per policy, vs the pure-Python reference."""
    from lsm_gnn.config import CacheConfig

    if trace_path:
        from lsm_gnn.sim.trace import Trace

        tr = Trace.load(trace_path)
        trace = [np.asarray(b, np.int64) for b in tr.device(device)]
        num_rows = tr.num_rows
        if static_path:
            from lsm_gnn.utils.bounds import npy_header

            npy_header(static_path)  # the stated shape within the file and memory, before numpy allocates
        static = np.load(static_path, allow_pickle=False) if static_path else np.full(num_rows, 128, np.uint8)
        source = {"trace": str(trace_path), "device": device}
    else:
        trace, static = synthetic_trace(rows, batches, batch_size, skew, seed)
        num_rows = rows
        source = {"generated": True, "rows": rows, "batches": batches, "batch_size": batch_size,
                  "skew": skew, "seed": seed}
    from lsm_gnn.cache.budget import memory_budget

    requests = sum(len(b) for b in trace)
    prefix, n = [], 0
    for b in trace:
        if n >= reference_requests:
            break
        prefix.append(b)
        n += len(b)
    results, budgets = {}, {}
    for name in policies or POLICY_NAMES:
        cfg = CacheConfig(policy=name, ways=ways, window=window, capacity_fraction=capacity_fraction,
                          victim_buffer={"depth": depth})
        budget = budgets[name] = memory_budget(cfg, num_rows, 1)
        measure(trace[:2], cfg, num_rows, static, budget, repeat=1)  # compile outside the timing
        rate, res = measure(trace, cfg, num_rows, static, budget, repeat=repeat)
        ref_rate, _ = measure(prefix, cfg, num_rows, static, budget, repeat=1, engine="reference")
        tot = res.totals
        results[name] = {
            "policy_run": res.policy,
            "requests_per_s_per_core": rate,
            "reference_requests_per_s": ref_rate,
            "speedup_vs_reference": rate / ref_rate,
            "distinct_hit_rate": distinct_hit_rate(tot),
            "victim_hits": tot["victim_hits"],
            "storage_rows": tot["storage_rows"],
            "evictions": tot["evictions"],
            "spills": tot["spills"],
        }
    # the headline policy's figures and budget (each policy has its own: horizon has no host tier)
    head = "hybrid" if "hybrid" in results else next(iter(results))
    headline, budget = results[head]["requests_per_s_per_core"], budgets[head]
    out = {"bench": "cache", "requests_per_s_per_core": headline, "baseline": "reference engine (pure Python)",
           "requests": requests, "capacity_rows": budget.cache_rows,
           "memory_rows": {"cache": budget.cache_rows, "victim": budget.host_rows, "total": budget.total_rows,
                           "fraction_of_features": budget.total_rows / num_rows},
           "config": {"ways": ways, "window": window, "victim_depth": budget.victim_depth, "pvp": budget.pvp},
           "source": source, "policies": results}
    if as_json:
        click.echo(json.dumps(out))
        return
    click.echo(f"{requests:,} requests, {num_rows:,} rows, budget {budget.total_rows:,} rows "
               f"({budget.total_rows / num_rows:.1%}): cache {budget.cache_rows:,} lines + victim buffer "
               f"{budget.host_rows:,} rows, W={window}, ways={ways}")
    click.echo(f"{'policy':<12} {'Mreq/s/core':>12} {'reference':>11} {'speedup':>9} {'hit/dist':>8} {'victim hits':>11}")
    for name, r in results.items():
        click.echo(f"{name:<12} {r['requests_per_s_per_core'] / 1e6:>12.2f} {r['reference_requests_per_s'] / 1e6:>11.4f} "
                   f"{r['speedup_vs_reference']:>8.0f}x {r['distinct_hit_rate']:>8.3f} {r['victim_hits']:>11,}")
    click.echo(f"requests_per_s_per_core (hybrid + PVP): {headline / 1e6:.2f} M")


# ---- on a GPU (steps of `lsm-gnn check gpu`) ---------------------------------------------------
# the paper's policy with and without its victim buffer, two baselines, and horizon (its long
# lookahead ring: K = cache.lookahead's default, no host tier)
ENGINE_CASES = (("hybrid", True), ("hybrid", False), ("lru", False), ("sieve", False), ("horizon", False))


def _engine_case(cp, policy: str, pvp: bool, trace, static, warm_up) -> dict:
    """One policy case: the CPU engine, then the GPU engine, replaying the same trace (10 % capacity)
    after a warm-up replay of `warm_up` (a small trace, its number of rows) on each (numba's and
    NVRTC's compilation, CuPy's scan and sort kernels); their per-batch counts must be equal."""
    from lsm_gnn.cache.budget import budget_for_cache_rows
    from lsm_gnn.cache.engine import COUNT_NAMES
    from lsm_gnn.cache.engines import make_engine
    from lsm_gnn.cache.replay import flatten_batches
    from lsm_gnn.config import CacheConfig

    flat, offsets = flatten_batches(trace)
    small_flat, small_off = flatten_batches(warm_up[0])
    num_rows, warm, nb = len(static), warm_up[1], len(trace)
    # the config's settings, with the paper scripts' absolute victim-buffer depth
    cfg = CacheConfig(policy=policy, victim_buffer={"enabled": pvp, "depth": 32768})
    budget = budget_for_cache_rows(cfg, num_rows // 10, num_rows)
    small_budget = budget_for_cache_rows(cfg, warm // 10, warm)
    for kind in ("cpu", "gpu"):
        make_engine(cfg, small_budget, warm, static[:warm], kind=kind).replay(small_flat, small_off)
    t0 = time.perf_counter()
    out_c = make_engine(cfg, budget, num_rows, static, kind="cpu").replay(flat, offsets)
    t_cpu = time.perf_counter() - t0
    gpu = make_engine(cfg, budget, num_rows, static, kind="gpu")
    gpu.graph = True   # the step captured once as a CUDA graph and replayed (falls back to launches)
    flat_dev = cp.asarray(flat)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    out_g = gpu.replay(flat_dev, offsets)
    cp.cuda.Device().synchronize()
    t_gpu = time.perf_counter() - t0
    same = bool(np.array_equal(out_c, out_g))
    tot = dict(zip(COUNT_NAMES, out_c.sum(axis=0).tolist()))
    c = {"policy": gpu.policy_name, "pvp": pvp, "cpu_requests_per_s": len(flat) / t_cpu,
         "gpu_requests_per_s": len(flat) / t_gpu, "gpu_vs_cpu_requests_ratio": t_cpu / t_gpu,
         "gpu_ms_per_batch": 1e3 * t_gpu / nb, "cpu_ms_per_batch": 1e3 * t_cpu / nb,
         "requests_per_batch": len(flat) / nb, "distinct_hit_rate": distinct_hit_rate(tot), "counts_equal": same}
    # the engine's own count of host reads inside its steps (0 unless a sync crept in; a graph
    # capture fails on one) and the share of steps replayed as a captured graph
    sync = gpu.sync_stats()
    c.update(engine_host_syncs_per_step=sync["host_syncs_per_step"],
             engine_host_waits_per_step=sync["host_waits_per_step"],
             engine_graph_step_fraction=sync["graph_steps"] / max(sync["steps"], 1), engine_graph_error=sync["graph_error"])
    if not same:
        bad = int(np.flatnonzero((out_c != out_g).any(axis=1))[0])
        c.update(first_differing_batch=bad, cpu_counts=dict(zip(COUNT_NAMES, out_c[bad].tolist())),
                 gpu_counts=dict(zip(COUNT_NAMES, out_g[bad].tolist())))
    return c


def _warm_trace(num_rows: int) -> tuple[list[np.ndarray], int]:
    """A small trace (and its number of rows) to warm both engines up with."""
    warm = min(5000, num_rows)
    return synthetic_trace(warm, 3, warm // 10, seed=1)[0], warm


def gpu_engine_vs_cpu(num_rows: int = 4_000_000, batches: int = 40, batch: int = 200_000,
                      cases=ENGINE_CASES) -> dict:
    """GpuCacheEngine vs CpuCacheEngine (numba, one core) replaying the same generated trace (10 %
    capacity); their per-batch counts must be equal. Headline: hybrid + PVP (LSM-GNN's)."""
    import cupy as cp

    trace, static = synthetic_trace(num_rows, batches, batch)
    warm = _warm_trace(num_rows)
    rows = []
    for policy, pvp in cases:
        c = _engine_case(cp, policy, pvp, trace, static, warm)
        rows.append(c)
        print(f"[engine] {c['policy']:<10} cpu {c['cpu_requests_per_s'] / 1e6:8.2f} M req/s  gpu "
              f"{c['gpu_requests_per_s'] / 1e6:8.2f} M req/s  ratio {c['gpu_vs_cpu_requests_ratio']:6.1f}x  "
              f"counts {'equal' if c['counts_equal'] else 'DIFFER'}", flush=True)
    head = rows[0]
    out = {"gpu_requests_per_s": head["gpu_requests_per_s"], "cpu_requests_per_s": head["cpu_requests_per_s"],
           "gpu_vs_cpu_requests_ratio": head["gpu_vs_cpu_requests_ratio"], "headline_case": head["policy"],
           "engine_host_syncs_per_step": max(c["engine_host_syncs_per_step"] for c in rows),
           "engine_graph_step_fraction": min(c["engine_graph_step_fraction"] for c in rows),
           "min_gpu_vs_cpu_requests_ratio": min(c["gpu_vs_cpu_requests_ratio"] for c in rows),
           "counts_equal": all(c["counts_equal"] for c in rows),
           "trace": {"rows": num_rows, "batches": batches, "batch": batch,
                     "requests": int(sum(len(b) for b in trace)),
                     "generated": "synthetic_trace (distinct ids per batch, Zipf 0.9)",
                     "capacity_lines": num_rows // 10, "ways": 32, "window": 8, "victim_depth": 32768},
           "cases": rows}
    if not out["counts_equal"]:
        out["error"] = "GPU and CPU engines' per-batch counts differ: " + ", ".join(
            c["policy"] for c in rows if not c["counts_equal"])
    return out


def gpu_engine_sweep(batch_sizes=(25_000, 100_000, 400_000), rows_per_request: int = 20, batches: int = 10,
                     policy: str = "hybrid", pvp: bool = True) -> dict:
    """The headline case (hybrid + PVP) at several batch sizes, `rows_per_request` x the batch rows,
    10 % capacity: where the GPU engine's time per batch stops being fixed (launches: one graph replay
    a step, no host read inside it) and grows with the requests, its ratio over the CPU engine rises."""
    import cupy as cp

    points = []
    for b in batch_sizes:
        trace, static = synthetic_trace(rows_per_request * int(b), batches, int(b))
        c = _engine_case(cp, policy, pvp, trace, static, _warm_trace(len(static)))
        points.append({"batch": int(b), "rows": len(static), **c})
        print(f"[engine_sweep] batch {b:>9,}: gpu {c['gpu_ms_per_batch']:8.3f} ms  cpu {c['cpu_ms_per_batch']:9.3f} ms"
              f"  ratio {c['gpu_vs_cpu_requests_ratio']:6.1f}x  counts {'equal' if c['counts_equal'] else 'DIFFER'}",
              flush=True)
    out = {"policy": policy, "pvp": pvp, "batches": batches, "points": points,
           "gpu_ms_per_batch": [p["gpu_ms_per_batch"] for p in points],
           "ratios": [p["gpu_vs_cpu_requests_ratio"] for p in points],
           "counts_equal": all(p["counts_equal"] for p in points)}
    if not out["counts_equal"]:
        out["error"] = "GPU and CPU engines' per-batch counts differ at batch " + ", ".join(
            str(p["batch"]) for p in points if not p["counts_equal"])
    return out


def cuda_ms(fn, reps: int, warmup: int = 3) -> float:
    """Median milliseconds of fn() over `reps` runs timed with CUDA events, after a warm-up."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def gather_vs_copy(rows: int = 200_000, table: int = 800_000, row_bytes: int = 4096, reps: int = 10) -> dict:
    """The cached source's hit path (device_pool.gather_rows, random rows of a table) vs one
    contiguous device-to-device copy of the same bytes, on the same device, in this run."""
    import torch

    from lsm_gnn.cache.device_pool import gather_rows, word_dtype

    dev = torch.device("cuda")
    word = word_dtype(row_bytes)   # the row pool's view of a row
    words = row_bytes // torch.empty(0, dtype=word).element_size()
    src = torch.randint(-2**31, 2**31 - 1, (table, words), dtype=torch.int64, device=dev).to(word)
    index = torch.randperm(table, device=dev)[:rows].contiguous()
    dst = torch.empty((rows, words), dtype=word, device=dev)
    copy_dst = torch.empty_like(dst)
    copy_ms = cuda_ms(lambda: copy_dst.copy_(src[:rows]), reps)
    select_ms = cuda_ms(lambda: torch.index_select(src, 0, index, out=dst), reps)
    dst.zero_()
    gather_rows(src, index, dst)
    torch.cuda.synchronize()
    correct = bool(torch.equal(dst, src.index_select(0, index)))
    gather_ms = cuda_ms(lambda: gather_rows(src, index, dst), reps)
    gb = rows * row_bytes / 1e9
    out = {"rows": rows, "row_bytes": row_bytes, "table_rows": table, "bytes": rows * row_bytes, "word_dtype": str(word),
           "index": "random rows of the table (a permutation's prefix: no repeats)",
           "timing": f"CUDA events, median of {reps} runs after 3 warm-up runs",
           "bandwidth_convention": "payload bytes (rows x row bytes) per second",
           "copy_ms": copy_ms, "copy_gb_per_s": gb / (copy_ms / 1e3),
           "torch_index_select_ms": select_ms, "torch_index_select_gb_per_s": gb / (select_ms / 1e3),
           "gather_ms": gather_ms, "gather_gb_per_s": gb / (gather_ms / 1e3),
           "gpu_gather_vs_copy_bw": copy_ms / gather_ms, "gather_correct": correct}
    print(f"[gather] copy {out['copy_gb_per_s']:.0f} GB/s, gather_rows {out['gather_gb_per_s']:.0f} GB/s "
          f"-> ratio {out['gpu_gather_vs_copy_bw']:.2f}", flush=True)
    if not correct:
        out["error"] = "gather_rows returned rows different from src[index]"
    return out


# ---- misses served zero-copy: a warp per row reading mapped pinned host memory ------------------
# Each lane moves 16-byte words (uint4): a 4 KiB row is 256 of them, 8 per lane, so a warp keeps
# 512 bytes of PCIe reads in flight per instruction; rows are independent, so the whole grid's
# reads overlap (a PCIe read takes about 1-2 us: only many in flight reach the link's rate).
ZERO_COPY_GATHER_SRC = r"""
extern "C" __global__ void zero_copy_gather(unsigned long long src_addr, const long long* idx, uint4* dst,
                                            long long rows, long long row_words) {
    const uint4* src = (const uint4*)src_addr;   // mapped pinned host memory, read over PCIe
    long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    long long warps = ((long long)gridDim.x * blockDim.x) / 32;
    long long lane = threadIdx.x % 32;
    for (long long r = warp; r < rows; r += warps) {
        const uint4* s = src + idx[r] * row_words;
        uint4* d = dst + r * row_words;
        for (long long w = lane; w < row_words; w += 32) d[w] = s[w];
    }
}
"""
MEMCPY_HOST_TO_DEVICE = 1                             # cudaMemcpyHostToDevice
ZERO_COPY_BLOCK = 256                                 # 8 warps a block, a row per warp


def zero_copy_grid(rows: int, block: int = ZERO_COPY_BLOCK) -> int:
    """Blocks for a warp per row (the kernel strides over rows, so fewer would still be correct)."""
    return max(1, -(-int(rows) * 32 // block))


def _event_ms(cp):
    """A timer of one call on the current stream with CUDA events, in milliseconds."""
    def timed(fn) -> float:
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return float(cp.cuda.get_elapsed_time(start, end))
    return timed


def zero_copy_gather_vs_memcpy(rows: int = 21_000, table_rows: int = 150_000, row_bytes: int = 4096,
                               reps: int = 10, warmup: int = 3, seed: int = 0, cp=None, timer=None) -> dict:
    """`rows` random rows of a `table_rows` x `row_bytes` host table registered as mapped pinned
    memory, gathered by a warp-per-row kernel reading host memory over PCIe straight into a device
    buffer, against one cudaMemcpy of the same bytes from the same pinned table (a DMA of contiguous
    rows, the link's rate). Both timed with CUDA events, the median of `reps` after `warmup`.
    `zero_copy_gather_vs_memcpy` = memcpy's time / the gather's (1.0: the gather moves random rows
    as fast as the DMA moves contiguous ones). The defaults: a batch's misses at the check's dataset
    (21k rows of 4 KiB out of 150k). `cp`/`timer`: CuPy and the timer (for the CPU stand-in)."""
    if cp is None:
        import cupy as cp
    timer = timer or _event_ms(cp)
    if row_bytes % 16:
        raise ValueError(f"row_bytes: expected a multiple of 16 (the kernel moves 16-byte words), got {row_bytes}")
    if not 0 < rows <= table_rows:
        raise ValueError(f"rows: expected 1..table_rows ({table_rows}), got {rows}")
    import mmap

    rng = np.random.default_rng(seed)
    words = row_bytes // 8
    # page-aligned (anonymous mmap), so every row starts 16-byte aligned for the kernel's uint4 loads
    # and the registration pins whole pages; every word distinct, so a wrong row shows
    table = np.frombuffer(mmap.mmap(-1, table_rows * row_bytes), np.uint64).reshape(table_rows, words)
    table[:] = np.arange(table_rows * words, dtype=np.uint64).reshape(table_rows, words) * np.uint64(0x9E3779B97F4A7C15)
    index = np.sort(rng.choice(table_rows, rows, replace=False)).astype(np.int64)
    index = rng.permutation(index)                     # random order, no repeats (a batch's misses)
    nbytes = rows * row_bytes
    host_ptr = table.ctypes.data
    cp.cuda.runtime.hostRegister(host_ptr, table.nbytes, HOST_REGISTER_PORTABLE | HOST_REGISTER_MAPPED)
    try:
        src_addr = mapped_device_pointer(cp, host_ptr)
        kernel = cp.RawModule(code=ZERO_COPY_GATHER_SRC).get_function("zero_copy_gather")
        idx = cp.asarray(index)
        dst = cp.zeros(rows * words, dtype=np.uint64)
        copy_dst = cp.zeros(rows * words, dtype=np.uint64)
        grid = zero_copy_grid(rows)
        args = (np.uint64(src_addr), idx, dst, np.int64(rows), np.int64(row_bytes // 16))

        def gather():
            kernel((grid,), (ZERO_COPY_BLOCK,), args)

        def memcpy():
            cp.cuda.runtime.memcpy(copy_dst.data.ptr, host_ptr, nbytes, MEMCPY_HOST_TO_DEVICE)

        gather()
        got = cp.asnumpy(dst).reshape(rows, words)
        correct = bool(np.array_equal(got, table[index]))
        memcpy()
        copied = bool(np.array_equal(cp.asnumpy(copy_dst).reshape(rows, words), table[:rows]))
        for _ in range(warmup):
            gather()
            memcpy()
        gather_ms = float(np.median([timer(gather) for _ in range(reps)]))
        memcpy_ms = float(np.median([timer(memcpy) for _ in range(reps)]))
    finally:
        cp.cuda.runtime.hostUnregister(host_ptr)
    gb = nbytes / 1e9
    out = {"rows": rows, "row_bytes": row_bytes, "table_rows": table_rows, "bytes": nbytes,
           "host_memory": "a NumPy table registered with cudaHostRegister (portable, mapped)",
           "index": "random rows of the table, no repeats, in random order",
           "kernel": f"zero_copy_gather: a warp per row, 16-byte loads, {ZERO_COPY_BLOCK} threads a block, grid {grid}",
           "baseline": "cudaMemcpy host to device of the same bytes (the table's first rows) from the same pinned table",
           "timing": f"CUDA events, median of {reps} after {warmup} warm-up runs",
           "gather_ms": gather_ms, "gather_gb_per_s": gb / (gather_ms / 1e3),
           "memcpy_ms": memcpy_ms, "memcpy_gb_per_s": gb / (memcpy_ms / 1e3),
           "zero_copy_gather_vs_memcpy": memcpy_ms / gather_ms, "gather_correct": correct, "memcpy_correct": copied}
    print(f"[zero_copy_gather] {rows:,} rows: gather {out['gather_gb_per_s']:.1f} GB/s, memcpy "
          f"{out['memcpy_gb_per_s']:.1f} GB/s -> {out['zero_copy_gather_vs_memcpy']:.2f}", flush=True)
    if not (correct and copied):
        out["error"] = "zero_copy_gather returned rows different from table[index]" if not correct else \
            "the pinned memcpy's bytes differ from the table's"
    return out

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

from lsm_gnn.cache.policies import configurable_names

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
@click.option("--batch-size", default=50_000, show_default=True, help="Distinct ids per generated batch.")
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
@click.option("--seed", default=0, show_default=True)
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
        static = np.load(static_path) if static_path else np.full(num_rows, 128, np.uint8)
        source = {"trace": str(trace_path), "device": device}
        num_owners, owner = 1, 0
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
    results = {}
    for name in policies or POLICY_NAMES:
        cfg = CacheConfig(policy=name, ways=ways, window=window, capacity_fraction=capacity_fraction,
                          victim_buffer={"depth": depth})
        budget = memory_budget(cfg, num_rows, 1)
        measure(trace[:2], cfg, num_rows, static, budget, repeat=1)  # compile outside the timing
        rate, res = measure(trace, cfg, num_rows, static, budget, repeat=repeat)
        ref_rate, _ = measure(prefix, cfg, num_rows, static, budget, repeat=1, engine="reference")
        tot = res.totals
        results[name] = {
            "policy_run": res.policy,
            "requests_per_s_per_core": rate,
            "reference_requests_per_s": ref_rate,
            "speedup_vs_reference": rate / ref_rate,
            "hit_rate": tot["hits"] / max(tot["distinct"], 1),
            "victim_hit_rate": tot["victim_hits"] / max(tot["distinct"], 1),
            "storage_rows": tot["storage_rows"],
            "evictions": tot["evictions"],
            "spills": tot["spills"],
        }
    headline = results.get("hybrid", next(iter(results.values())))["requests_per_s_per_core"]
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
    click.echo(f"{'policy':<12} {'Mreq/s/core':>12} {'reference':>11} {'speedup':>9} {'hit':>7} {'victim':>7}")
    for name, r in results.items():
        click.echo(f"{name:<12} {r['requests_per_s_per_core'] / 1e6:>12.2f} {r['reference_requests_per_s'] / 1e6:>11.4f} "
                   f"{r['speedup_vs_reference']:>8.0f}x {r['hit_rate']:>7.3f} {r['victim_hit_rate']:>7.3f}")
    click.echo(f"requests_per_s_per_core (hybrid + PVP): {headline / 1e6:.2f} M")

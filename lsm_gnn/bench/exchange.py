"""The exchange link's bandwidth between G ranks on this machine: the shared cache's row exchange
as it runs (`Exchange.send_rows` then the reorder into the requester's order), timed for each row
transport (lsm_gnn.multidevice.exchange: `collective`, the gloo all_to_all; `shm`, the owners'
shared-memory outboxes), the transports' repetitions interleaved in one set of ranks so that both
see the same machine.

`exchange_bandwidth(cfg, bytes_per_rank)`: bytes one rank sends to its peers per second, the
median over `reps` timed exchanges after a warm-up (the unit of `metrics.multidevice.
exchange_bytes_per_iteration` / G), for the transport the run's config settles on, with every
transport's figure beside it. The emulated-accelerator benchmark divides LSM-GNN's exchange bytes
by it for the epoch's floor, measured in the same run as the systems it bounds.
"""

from __future__ import annotations

import statistics
import time

import click

from lsm_gnn.config import RunConfig, config_to_dict, parse_config

WORKER = "lsm_gnn.bench.exchange:exchange_worker"
ROW_BYTES = 4096  # IGB's 1024 fp32 features


def exchange_worker(cfg: RunConfig, rank: int, world_size: int, heartbeat, args: dict) -> dict:
    import numpy as np
    import torch.distributed as dist

    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn.ownership import reorder_blocks

    G = world_size
    per_peer = max(1, int(args["bytes_per_rank"]) // ((G - 1) * ROW_BYTES))
    counts = np.full(G, per_peer, dtype=np.int64)
    rows = np.ones((G * per_peer, ROW_BYTES // 4), dtype=np.float32)
    positions = np.random.default_rng(rank).permutation(G * per_peer).astype(np.int64)
    out = np.empty_like(rows)
    exchanges = {t: Exchange(rank, G, transport=t) for t in args["transports"]}
    times = {t: [] for t in exchanges}
    cpu = {t: [] for t in exchanges}
    try:
        for i in range(int(args["warmup"]) + int(args["reps"])):
            order = list(exchanges) if i % 2 == 0 else list(reversed(list(exchanges)))
            for t in order:
                dist.barrier()
                t0, c0 = time.perf_counter(), time.process_time()
                reorder_blocks(exchanges[t].send_rows(rows, counts, counts).blocks, positions, out)
                if i >= int(args["warmup"]):
                    times[t].append(time.perf_counter() - t0)
                    cpu[t].append(time.process_time() - c0)
            heartbeat.beat()
        settled = {t: ex.transport for t, ex in exchanges.items()}
    finally:
        for ex in exchanges.values():
            ex.close()
    return {"seconds": times, "cpu_seconds": cpu, "peer_bytes": int(per_peer * (G - 1) * ROW_BYTES),
            "settled": settled}


def exchange_bandwidth(cfg: RunConfig, bytes_per_rank: float, *, devices: int = 2, reps: int = 20,
                       warmup: int = 3) -> dict:
    """{bytes_per_s, seconds (median), spread, transport, peer_bytes, reps, by_transport}: one rank's
    bytes to its peers per second, for the transport `cfg.distributed.row_transport` settles on."""
    from lsm_gnn.ranks.spawn import run_ranks
    from lsm_gnn.utils.errors import DistributedError

    d = config_to_dict(cfg)
    d["distributed"]["devices"] = devices
    d["distributed"]["backend"] = "gloo"
    transports = ["collective", "shm"]
    results, failure, _ = run_ranks(parse_config(d, "<linkbench>"), WORKER,
                                    {"bytes_per_rank": max(1.0, bytes_per_rank), "reps": reps, "warmup": warmup,
                                     "transports": transports})
    if failure is not None:
        raise DistributedError(failure.get("rank"), f"exchange bandwidth: {failure.get('message')}")
    peer = results[0]["peer_bytes"]
    by = {}
    for t in transports:
        if results[0]["settled"][t] != t:  # shm unavailable here: the collective ran instead
            by[t] = None
            continue
        # an exchange ends when its slowest rank has its rows
        per_rep = [max(r["seconds"][t][i] for r in results) for i in range(reps)]
        med = statistics.median(per_rep)
        # CPU time (every thread of a rank, gloo's included), summed over the ranks: what the
        # exchange takes from the cores, the cost that matters where ranks share them
        cpu = statistics.median([sum(r["cpu_seconds"][t][i] for r in results) for i in range(reps)])
        by[t] = {"bytes_per_s": peer / med if med > 0 else None, "seconds": med, "cpu_seconds": cpu,
                 "spread": (max(per_rep) - min(per_rep)) / med if med > 0 else None}
    wanted = cfg.distributed.row_transport
    used = "collective" if wanted == "collective" or by.get("shm") is None else "shm"
    return {**by[used], "transport": used, "peer_bytes": peer, "reps": reps, "devices": devices,
            "by_transport": by}


@click.command("exchange")
@click.option("--devices", type=click.IntRange(2, 64), default=2, show_default=True)
@click.option("--megabytes", type=click.FloatRange(min=0.001), default=12.85, show_default=True,
              help="bytes one rank sends its peers per exchange, in MB (12.85: LSM-GNN's per-rank "
                   "exchange per iteration on synthetic-small at batch 128, 2 devices)")
@click.option("--reps", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
def bench_exchange(devices, megabytes, reps, warmup, as_json):
    """The shared cache's row exchange per transport (shared memory vs the gloo collective),
    interleaved in one set of ranks; the ratio of their times."""
    import json

    res = exchange_bandwidth(parse_config({}), megabytes * 1e6, devices=devices, reps=reps, warmup=warmup)
    by = res["by_transport"]
    if by.get("shm") and by.get("collective"):
        res["shm_vs_collective_time"] = by["shm"]["seconds"] / by["collective"]["seconds"]
        res["shm_vs_collective_cpu"] = by["shm"]["cpu_seconds"] / max(by["collective"]["cpu_seconds"], 1e-9)
    if as_json:
        click.echo(json.dumps(res, indent=1))
        return
    click.echo(f"row exchange, {devices} ranks, {res['peer_bytes'] / 1e6:.2f} MB per rank to its peers, "
               f"median of {reps} (after {warmup} warm-up), transports interleaved")
    for t, v in by.items():
        if v is None:
            click.echo(f"  {t:<10} not available here")
        else:
            click.echo(f"  {t:<10} {v['seconds'] * 1e3:8.2f} ms  {v['bytes_per_s'] / 1e9:6.2f} GB/s per rank  "
                       f"CPU {v['cpu_seconds'] * 1e3:8.2f} ms (all ranks)  spread {100 * v['spread']:.0f} %")
    if "shm_vs_collective_time" in res:
        click.echo(f"  shm / collective: time {res['shm_vs_collective_time']:.3f}, "
                   f"CPU {res['shm_vs_collective_cpu']:.3f}")

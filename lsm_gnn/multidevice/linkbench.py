"""The exchange link's bandwidth between G ranks on this machine: one flat `all_to_all_single`
of a given size, timed as the shared cache's exchange runs it (gloo between processes on the CPU
engine, every rank sending at once).

`exchange_bandwidth(cfg, bytes_per_rank)`: bytes one rank sends to its peers per second, the
median over `reps` timed exchanges after a warm-up (the unit of `metrics.multidevice.
exchange_bytes_per_iteration` / G). The emulated-accelerator benchmark divides LSM-GNN's exchange
bytes by it for the epoch's floor, measured in the same run as the systems it bounds.
"""

from __future__ import annotations

import statistics
import time

from lsm_gnn.config import RunConfig, config_to_dict, parse_config

WORKER = "lsm_gnn.multidevice.linkbench:exchange_worker"


def exchange_worker(cfg: RunConfig, rank: int, world_size: int, heartbeat, args: dict) -> dict:
    import torch
    import torch.distributed as dist

    n = max(world_size, int(args["bytes_per_rank"]) * world_size // ((world_size - 1) * 4))
    n -= n % world_size
    send, recv = torch.ones(n, dtype=torch.float32), torch.empty(n, dtype=torch.float32)
    times = []
    for i in range(int(args["warmup"]) + int(args["reps"])):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_to_all_single(recv, send)
        if i >= int(args["warmup"]):
            times.append(time.perf_counter() - t0)
        heartbeat.beat()
    return {"seconds": times, "peer_bytes": (n - n // world_size) * 4}


def exchange_bandwidth(cfg: RunConfig, bytes_per_rank: float, *, devices: int = 2, reps: int = 20,
                       warmup: int = 3) -> dict:
    """{bytes_per_s, seconds (median), peer_bytes, reps}: one rank's bytes to its peers per second."""
    from lsm_gnn.multidevice.spawn import run_ranks
    from lsm_gnn.utils.errors import DistributedError

    d = config_to_dict(cfg)
    d["distributed"]["devices"] = devices
    d["distributed"]["backend"] = "gloo"
    results, failure, _ = run_ranks(parse_config(d, "<linkbench>"), WORKER,
                                    {"bytes_per_rank": max(1.0, bytes_per_rank), "reps": reps, "warmup": warmup})
    if failure is not None:
        raise DistributedError(failure.get("rank"), f"exchange bandwidth: {failure.get('message')}")
    # an exchange ends when its slowest rank has its rows
    per_rep = [max(r["seconds"][i] for r in results) for i in range(reps)]
    med = statistics.median(per_rep)
    peer = results[0]["peer_bytes"]
    return {"bytes_per_s": peer / med if med > 0 else None, "seconds": med, "peer_bytes": peer, "reps": reps,
            "devices": devices, "spread": (max(per_rep) - min(per_rep)) / med if med > 0 else None}

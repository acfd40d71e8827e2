"""One run record from the ranks' results (or a failed record naming the failed rank).

Rows and traffic are summed over ranks, epoch times are the slowest rank's (the ranks step
together), exchange figures come from the shared sources' stats, and the memory block is the one
the ranks' feature sources state (`FeatureSource.memory()`), counted over the G devices.
"""

from __future__ import annotations

import json

import numpy as np

from lsm_gnn.config import RunConfig, config_to_dict
from lsm_gnn.multidevice.group import resolve_backend

ROW_KEYS = ("requests", "distinct", "local_hits", "peer_hits", "victim_hits", "storage_rows")


def system(cfg: RunConfig) -> str:
    return "isolated" if cfg.distributed.mode == "isolated" else "lsm"


def failed_record(cfg: RunConfig, failure: dict, worker: str) -> dict:
    from lsm_gnn.records import new_record

    rec = new_record("train" if worker == "train" else "bench", system(cfg), config_to_dict(cfg))
    rec["status"] = "failed"
    rec["failure"] = {"rank": failure["rank"], "message": failure["message"], "ranks": failure.get("ranks", [])}
    return rec


def merge_records(cfg: RunConfig, results: list[dict], worker: str, wall_s: float) -> dict:
    """One record for the run: rows and traffic summed over ranks, epoch times the slowest rank's."""
    from lsm_gnn.cache.budget import for_devices
    from lsm_gnn.records import new_record

    G = len(results)
    base = results[0].get("record")
    if base is not None:
        rec = json.loads(json.dumps(base))  # rank 0's record carries config, accuracy and epoch times
        rec["system"] = system(cfg)
        rec["config"] = config_to_dict(cfg)
    else:
        rec = new_record("bench", system(cfg), config_to_dict(cfg))
    metrics = rec.setdefault("metrics", {})
    # training: each rank's record counts the timed window; trace replay: the source's counters
    rank_rows = [(r.get("record") or {}).get("metrics", {}).get("rows") or r["source"]["rows"] for r in results]
    rows = {k: sum(int(x.get(k, 0)) for x in rank_rows) for k in ROW_KEYS}
    stats = [r["source"]["stats"] for r in results]
    iters = max(1, max(int(s.get("exchange_calls", 0)) for s in stats))
    ex_bytes = sum(int(s.get("exchange_bytes", 0)) for s in stats)
    ex_seconds = max(float(s.get("exchange_id_seconds", 0)) + float(s.get("exchange_row_seconds", 0)) for s in stats)
    metrics["rows"] = {**metrics.get("rows", {}), **rows,
                       "peer_rows": sum(int(s.get("peer_rows", 0)) for s in stats),
                       # rows two devices asked of one owner in the same iteration, served once:
                       # distinct = local_hits + peer_hits + victim_hits + storage_rows + coalesced
                       "coalesced": sum(int(s.get("coalesced_requests", 0)) for s in stats)}
    if "hit_rate" in metrics:  # rank 0's own rates: recompute over all devices
        from lsm_gnn.train.loop import _hit_rates

        metrics["hit_rate"] = _hit_rates(rows)
    traffic = metrics.setdefault("traffic", {})
    traffic["device_exchange_bytes"] = ex_bytes
    if base is not None:
        rank_traffic = [r["record"]["metrics"].get("traffic", {}) for r in results]
        traffic["storage_bytes"] = sum(int(x.get("storage_bytes", 0)) for x in rank_traffic)
        traffic["storage_io_ops"] = sum(int(x.get("storage_io_ops", 0)) for x in rank_traffic)
        traffic["host_to_device_bytes"] = sum(int(x.get("host_to_device_bytes", 0)) for x in rank_traffic)
        # the ranks step together: an epoch takes as long as its slowest rank
        rank_time = [r["record"]["metrics"].get("time", {}) for r in results]
        for key in ("epoch_cold_s", "epoch_steady_s"):
            vals = [t.get(key) for t in rank_time]
            metrics.setdefault("time", {})[key] = max(vals) if all(v is not None for v in vals) else None
        metrics["ranks"] = {str(i): r["record"]["metrics"].get("ranks", {}).get(str(i), {})
                            for i, r in enumerate(results)}
        accs = [rk.get("accelerator") for rk in metrics["ranks"].values()]
        if all(accs):  # every device's accelerator: AU over all of them, samples/s summed
            from lsm_gnn.records import merge_accelerators, throughput

            metrics["accelerator"] = merge_accelerators(accs)
            metrics["throughput"] = throughput(metrics["accelerator"], per_worker=accs)
        # each epoch's timed-window counts over all devices, as metrics.rows and traffic are (a
        # steady epoch can miss more than the cold one's window: lsm_gnn.project reads these)
        rank_epochs = [r["record"].get("epochs") or [] for r in results]
        for i, ep in enumerate(rec.get("epochs") or []):
            for key in ("rows", "io"):
                if key in ep and all(len(e) > i and key in e[i] for e in rank_epochs):
                    ep[key] = {k: sum(int(e[i][key].get(k, 0)) for e in rank_epochs) for k in ep[key]}
    else:
        io = [r["source"].get("io") or {} for r in results]
        traffic["storage_bytes"] = sum(int(x.get("bytes_read", 0)) for x in io)
        traffic["storage_io_ops"] = sum(int(x.get("io_ops", 0)) for x in io)
    per_rank_epochs = [r.get("epochs") or (r.get("record") or {}).get("epochs") or [] for r in results]
    n_epochs = min(len(e) for e in per_rank_epochs)
    epochs = []
    for i in range(n_epochs):
        row = {"epoch": i}
        secs = [e[i].get("seconds", e[i].get("epoch_s")) for e in per_rank_epochs]
        if all(s is not None for s in secs):
            row["seconds"] = max(secs)
        srows = [e[i].get("storage_rows", (e[i].get("rows") or {}).get("storage_rows")) for e in per_rank_epochs]
        if all(x is not None for x in srows):
            row["storage_rows"] = sum(int(x) for x in srows)
        epochs.append(row)
    if base is None:
        rec["epochs"] = epochs
    time_m = metrics.setdefault("time", {})
    if epochs and "seconds" in epochs[0] and base is None:
        time_m["epoch_cold_s"] = epochs[0]["seconds"]
        time_m["epoch_steady_s"] = float(np.mean([e["seconds"] for e in epochs[1:]])) if len(epochs) > 1 else None
    # every device holds what rank 0's source states (the ranks are built alike)
    metrics["memory"] = for_devices(results[0]["source"]["memory"], G)
    metrics["multidevice"] = {
        "devices": G, "mode": cfg.distributed.mode, "backend": resolve_backend(cfg), "worker": worker,
        "row_transport": results[0]["source"].get("row_transport"),
        "wall_s": wall_s, "iterations": iters,
        "exchange_bytes_per_iteration": ex_bytes / iters,
        "exchange_seconds_per_iteration": ex_seconds / iters,
        "storage_rows_per_epoch": [e.get("storage_rows") for e in epochs],
        "storage_rows_per_iteration": [int(sum(x)) for x in zip(*(r["storage_rows_per_iteration"] for r in results))]
        if all("storage_rows_per_iteration" in r for r in results) else None,
        "epoch_seconds": [e.get("seconds") for e in epochs],
        "per_rank": [{"rank": r, "rows": res["source"]["rows"], "stats": res["source"]["stats"]}
                     for r, res in enumerate(results)],
    }
    return rec

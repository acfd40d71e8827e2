"""One run record from the ranks' results: the launcher's merge (lsm_gnn.ranks.launch and the
integrations' torchrun entry call it). It takes plain values, not the run config: what the record
states of the run (`RunHead`: the system's name, the config block, the exchange mode, the process
group's backend) is computed once by the launcher (lsm_gnn.ranks.launch.run_head).

Rows and traffic are summed over ranks, epoch times are the slowest rank's (the ranks step
together), exchange figures come from the shared sources' stats, and the memory block is the one
the ranks' feature sources state (`FeatureSource.memory()`), counted over the G devices.
"""

from __future__ import annotations

import dataclasses
import json

from lsm_gnn.cache.budget import for_devices
from lsm_gnn.metrics import IO_KEYS, ROW_KEYS, epoch_times, hit_rates, slowest, sum_counts
from lsm_gnn.records import merge_accelerators, new_record, throughput


@dataclasses.dataclass(frozen=True)
class RunHead:
    """What a multi-device run's record states of the run, from its config: the record's `system`,
    its `config` block, the exchange mode (distributed.mode) and the process group's backend."""
    system: str
    config: dict
    mode: str
    backend: str


def merge_rank_records(rec: dict, ranks: list[dict]) -> dict:
    """Rank 0's record `rec` (a copy) made the run's from every rank's record (in rank order): rows,
    hit rates, traffic and each epoch's timed-window rows and io summed over the ranks, epoch times the
    slowest rank's (the ranks step together), each rank's own block, accelerators merged (AU over all
    of them, samples/s summed). Returns `rec`."""
    metrics = rec.setdefault("metrics", {})
    rows = sum_counts((r.get("metrics", {}).get("rows") or {} for r in ranks), ROW_KEYS)
    metrics["rows"] = {**metrics.get("rows", {}), **rows}
    if "hit_rate" in metrics:  # rank 0's own rates: over all devices
        metrics["hit_rate"] = hit_rates(rows)
    traffic = metrics.setdefault("traffic", {})
    traffic.update(sum_counts((r["metrics"].get("traffic", {}) for r in ranks),
                              ("storage_bytes", "storage_io_ops", "host_to_device_bytes")))
    rank_time = [r["metrics"].get("time", {}) for r in ranks]
    for key in ("epoch_cold_s", "epoch_steady_s"):
        metrics.setdefault("time", {})[key] = slowest(t.get(key) for t in rank_time)
    metrics["ranks"] = {str(i): r["metrics"].get("ranks", {}).get(str(i), {}) for i, r in enumerate(ranks)}
    accs = [rk.get("accelerator") for rk in metrics["ranks"].values()]
    if all(accs):
        metrics["accelerator"] = merge_accelerators(accs)
        metrics["throughput"] = throughput(metrics["accelerator"], per_worker=accs)
    # each epoch's timed-window counts over all devices, as metrics.rows and traffic are (a steady
    # epoch can miss more than the cold one's window: lsm_gnn.project reads these)
    rank_epochs = [r.get("epochs") or [] for r in ranks]
    for i, ep in enumerate(rec.get("epochs") or []):
        for key in ("rows", "io"):
            if key in ep and all(len(e) > i and key in e[i] for e in rank_epochs):
                ep[key] = sum_counts((e[i][key] for e in rank_epochs), ep[key])
    return rec


def failed_record(head: RunHead, failure: dict, worker: str) -> dict:
    """The record of a multi-device run that failed, naming the failed rank."""
    rec = new_record("train" if worker == "train" else "bench", head.system, head.config)
    rec["status"] = "failed"
    rec["failure"] = {"rank": failure["rank"], "message": failure["message"], "ranks": failure.get("ranks", [])}
    return rec


def merge_records(head: RunHead, results: list[dict], worker: str, wall_s: float) -> dict:
    """One record for the run: rows and traffic summed over ranks, epoch times the slowest rank's."""
    G = len(results)
    base = results[0].get("record")
    if base is not None:
        rec = json.loads(json.dumps(base))  # rank 0's record carries config, accuracy and epoch times
        rec["system"] = head.system
        rec["config"] = head.config
        # training: each rank's record counts the timed windows
        merge_rank_records(rec, [r["record"] for r in results])
    else:
        rec = new_record("bench", head.system, head.config)
    metrics = rec.setdefault("metrics", {})
    if base is None:  # trace replay: the sources' counters
        metrics["rows"] = sum_counts((r["source"]["rows"] for r in results), ROW_KEYS)
    stats = [r["source"]["stats"] for r in results]
    iters = max(1, max(int(s.get("exchange_calls", 0)) for s in stats))
    ex_bytes = sum(int(s.get("exchange_bytes", 0)) for s in stats)
    ex_seconds = max(float(s.get("exchange_id_seconds", 0)) + float(s.get("exchange_row_seconds", 0)) for s in stats)
    metrics["rows"].update({"peer_rows": sum(int(s.get("peer_rows", 0)) for s in stats),
                            # rows two devices asked of one owner in the same iteration, served once:
                            # distinct = local_hits + peer_hits + victim_hits + storage_rows + coalesced
                            "coalesced": sum(int(s.get("coalesced_requests", 0)) for s in stats)})
    # the emulated testbed's charges of every rank's stages (lsm_gnn.storage.charge; the harness sums them)
    if any(k.startswith("testbed:") for s in stats for k in s):
        from lsm_gnn.storage.charge import raw_from_stats

        metrics["testbed_per_rank"] = [raw_from_stats(s) for s in stats]
    # the emulated storage device's pacing of every rank's store (metrics.storage sums them)
    emu = [((((r.get("record") or {}).get("metrics") or {}).get("source") or {}).get("storage_path") or {})
           .get("emulation") for r in results]
    if any(emu):
        metrics.setdefault("source", {})["emulation_per_rank"] = [(e or {}).get("raw", [None])[0] for e in emu]
    traffic = metrics.setdefault("traffic", {})
    traffic["device_exchange_bytes"] = ex_bytes
    if base is None:
        io = sum_counts((r["source"].get("io") or {} for r in results), IO_KEYS)
        traffic["storage_bytes"], traffic["storage_io_ops"] = io["bytes_read"], io["io_ops"]
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
        time_m.update(epoch_times(epochs, key="seconds"))
    # every device holds what rank 0's source states (the ranks are built alike)
    metrics["memory"] = for_devices(results[0]["source"]["memory"], G)
    metrics["multidevice"] = {
        "devices": G, "mode": head.mode, "worker": worker, "backend": head.backend,
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
    # why `row_transport: auto` fell back to the collective (each rank's own reason)
    notes = [res["source"]["row_transport_note"] for res in results if res["source"].get("row_transport_note")]
    if notes:
        metrics["multidevice"]["row_transport_note"] = "; ".join(dict.fromkeys(notes))
    return rec

"""Launch G ranks on one machine, watch them, and merge their metrics into one run record.

`run_multi_device(cfg)` spawns `cfg.distributed.devices` processes (torch.multiprocessing,
spawn), each joins a torch.distributed process group (gloo on the CPU, NCCL on CUDA) on a free
port of 127.0.0.1 and runs a *worker*: by default `train_worker` (the training loop with the
shared-cache or isolated feature source), or `trace_worker` (replays a recorded request trace
through the same feature sources, no model: what `lsm-gnn bench multidevice` uses).

Faults: the parent polls the ranks. A rank that exits with an error, is killed, or stops
stamping its heartbeat for `distributed.timeout_s` while the others wait for it, is the failed
rank; the parent terminates the others at once and writes a record with status "failed" and
`failure.rank`. Inside the ranks, the process-group timeout (`timeout=` of
init_process_group) bounds every collective, so no rank blocks forever even without the parent
(the `torchrun` case, see `torchrun_main` and docs/multi-device.md).
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

from lsm_gnn.config import RunConfig, config_to_dict, parse_config
from lsm_gnn.multidevice.health import DONE, IN_COLLECTIVE, STARTING, STARTUP_LIMIT_S, WORKING, Heartbeat
from lsm_gnn.utils.atomic import write_json
from lsm_gnn.train.sources import open_store
from lsm_gnn.utils.errors import DistributedError, LsmGnnError

POLL_S = 0.2
TERMINATE_GRACE_S = 5.0
ROW_KEYS = ("requests", "distinct", "local_hits", "peer_hits", "victim_hits", "storage_rows")


# ---- process group -------------------------------------------------------------------------------
def pick_free_port(addr: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def resolve_backend(cfg: RunConfig) -> str:
    b = cfg.distributed.backend
    if b != "auto":
        return b
    import torch

    return "nccl" if cfg.train.device == "cuda" and torch.cuda.is_available() else "gloo"


def init_process_group(cfg: RunConfig, rank: int, world_size: int, init_method: str | None = None):
    import torch
    import torch.distributed as dist

    backend = resolve_backend(cfg)
    timeout = datetime.timedelta(seconds=cfg.distributed.timeout_s)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    dist.init_process_group(backend, init_method=init_method or "env://", rank=rank,
                            world_size=world_size, timeout=timeout)
    return backend


# ---- feature sources -----------------------------------------------------------------------------
def _local_source(cfg: RunConfig, store, lay, static, num_owners: int, owner: int):
    """A rank's own source over `store`: the cache engine, or plain storage when the cache is off."""
    if not cfg.cache.enabled:
        from lsm_gnn.train.sources import StoreFeatureSource

        return StoreFeatureSource(store)
    from lsm_gnn.cache.fetcher import CachedFeatureSource

    # every device has the same memory budget in shared and isolated mode (the fair comparison)
    return CachedFeatureSource(store, lay.num_rows, lay.dim, lay.dtype, cfg.cache, static,
                               num_owners=num_owners, owner=owner)


def build_feature_source(cfg: RunConfig, dataset, rank: int, world_size: int, *, heartbeat=None,
                         exchange=None, owner_layouts=None):
    """The feature source of `rank`: shared (owner cache + exchange) or isolated (own cache)."""
    from lsm_gnn.multidevice.exchange import Exchange
    from lsm_gnn.multidevice.health import NULL_HEARTBEAT
    from lsm_gnn.multidevice.source import IsolatedFeatureSource, SharedCacheFeatureSource
    from lsm_gnn.storage.open import owner_row_map

    hb = heartbeat or NULL_HEARTBEAT
    lay = dataset.features()
    static = dataset.static_scores()
    if cfg.distributed.mode == "isolated" or world_size == 1:
        return IsolatedFeatureSource(_local_source(cfg, open_store(cfg, lay), lay, static, 1, 0), rank,
                                     heartbeat=hb)
    from lsm_gnn.multidevice.owner_files import ensure_owner_files

    layouts = owner_layouts or ensure_owner_files(dataset, world_size, owners=[rank], progress=False)
    # the owner's own file: global id v is its row v // G (ids of other owners are an error)
    store = open_store(cfg, layouts[rank], row_map=owner_row_map(rank, world_size))
    local = _local_source(cfg, store, lay, static, world_size, rank)
    ex = exchange or Exchange(rank, world_size, device="cuda" if resolve_backend(cfg) == "nccl" else "cpu",
                              group=exchange_group(cfg), heartbeat=hb)
    return SharedCacheFeatureSource(local, ex, num_rows=lay.num_rows, row_dim=lay.dim, dtype=lay.dtype,
                                    max_window=cfg.cache.window, heartbeat=hb)


def exchange_group(cfg: RunConfig):
    """A process group of its own for the exchange (every rank must call this, in the same order).

    The loader may fetch batch t+1 in a thread while DDP all-reduces batch t's gradients on the
    default group; collectives of two threads on one group could interleave differently on
    different ranks, so the exchange never shares the default group.
    """
    import torch.distributed as dist

    if not dist.is_initialized():
        return None
    return dist.new_group(backend=resolve_backend(cfg),
                          timeout=datetime.timedelta(seconds=cfg.distributed.timeout_s))


def source_metrics(src) -> dict:
    """What a rank contributes to the merged record."""
    out = {"rows": src.counters.as_dict(), "stats": {}}
    for k, v in (getattr(src, "stats", {}) or {}).items():
        if isinstance(v, (int, float, np.integer, np.floating)):
            out["stats"][k] = float(v) if isinstance(v, (float, np.floating)) else int(v)
    from lsm_gnn.train.sources import io_counters

    io = io_counters(src)
    if io is not None:
        out["io"] = io.as_dict()
    return out


# ---- workers (run inside each rank) ---------------------------------------------------------------
def train_worker(cfg: RunConfig, rank: int, world_size: int, heartbeat: Heartbeat, args: dict) -> dict:
    """The training loop of one rank with the shared (or isolated) feature source."""
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.train.loop import run_training

    dataset = Dataset(cfg.dataset.path)
    src = build_feature_source(cfg, dataset, rank, world_size, heartbeat=heartbeat)
    heartbeat.beat()
    try:
        rec = run_training(cfg, rank=rank, world_size=world_size, feature_source=src,
                           process_group_ready=True, progress=False, record_path=None)
    finally:
        src.close()
    return {"record": rec, "source": source_metrics(src)}


def trace_worker(cfg: RunConfig, rank: int, world_size: int, heartbeat: Heartbeat, args: dict) -> dict:
    """Replay device `rank`'s part of a recorded trace through the feature source (no model).

    args: trace (path), verify (compare every row with features.bin), epoch_batches (batches
    per epoch, for per-epoch counts; default: the whole trace is one epoch).
    """
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.sim.trace import Trace
    from lsm_gnn.utils.errors import DataError

    dataset = Dataset(cfg.dataset.path)
    trace = Trace.load(args["trace"])
    if trace.num_devices != world_size:
        raise DataError(args["trace"], "trace devices", expected=world_size, found=trace.num_devices)
    mine = trace.device(rank)
    W = cfg.cache.window
    truth = dataset.feature_array() if args.get("verify") else None
    src = build_feature_source(cfg, dataset, rank, world_size, heartbeat=heartbeat)
    per_epoch = args.get("epoch_batches") or len(mine)
    epochs, mismatched, per_iteration = [], 0, []
    try:
        t_epoch, start_rows = time.perf_counter(), 0
        for b, ids in enumerate(mine):
            e0 = (b // per_epoch) * per_epoch
            src.advance(mine[b + 1: min(b + 1 + W, e0 + per_epoch)] if W else [])
            before = src.counters.storage_rows
            rows = src.fetch(ids)
            per_iteration.append(src.counters.storage_rows - before)
            if truth is not None and not np.array_equal(rows, truth[ids]):
                mismatched += int((rows != truth[ids]).any(axis=1).sum())
            if (b + 1) % per_epoch == 0 or b + 1 == len(mine):
                epochs.append({"epoch": len(epochs), "seconds": time.perf_counter() - t_epoch,
                               "storage_rows": src.counters.storage_rows - start_rows,
                               "batches": b + 1 - e0})
                t_epoch, start_rows = time.perf_counter(), src.counters.storage_rows
    finally:
        src.close()
    if mismatched:
        raise DataError(dataset.features().path, f"rank {rank}: {mismatched} rows received differ from the file")
    return {"source": source_metrics(src), "epochs": epochs, "verified": truth is not None,
            "iterations": len(mine), "storage_rows_per_iteration": per_iteration}


WORKERS = {"train": train_worker, "trace": trace_worker}


def _resolve_worker(name: str):
    if name in WORKERS:
        return WORKERS[name]
    module, attr = name.split(":")
    return getattr(importlib.import_module(module), attr)


def _rank_main(rank, world_size, cfg_dict, worker, worker_args, init_method, stamps, phases, outdir):
    """Entry point of a spawned rank: join the group, run the worker, leave a result or an error file."""
    os.environ.setdefault("DGLBACKEND", "pytorch")
    hb = Heartbeat(rank, stamps, phases)
    hb.beat(STARTING)
    out = Path(outdir)
    try:
        import torch
        import torch.distributed as dist

        cfg = parse_config(cfg_dict)
        torch.set_num_threads(cfg.train.threads or max(1, (os.cpu_count() or 1) // world_size))
        init_process_group(cfg, rank, world_size, init_method)
        hb.beat(STARTING)
        result = _resolve_worker(worker)(cfg, rank, world_size, hb, worker_args)
        hb.beat(IN_COLLECTIVE)
        dist.barrier()  # nobody leaves while a peer still needs it for a collective
        write_json(out / f"rank-{rank}.json", result)
        hb.beat(DONE)
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - every failure must leave an error file
        peer = isinstance(e, DistributedError) and e.rank is None or "Connection" in str(e) \
            or "Timeout" in type(e).__name__ or "timed out" in str(e).lower()
        write_json(out / f"rank-{rank}.error.json",
                   {"rank": rank, "kind": "peer" if peer else "own", "type": type(e).__name__,
                    "message": str(e).splitlines()[0] if str(e) else type(e).__name__,
                    "traceback": traceback.format_exc()})
        sys.stderr.flush()
        os._exit(1)  # skip atexit/destructors that could wait on dead peers


# ---- parent: spawn, watch, merge ----------------------------------------------------------------
def run_multi_device(cfg: RunConfig, *, worker: str = "train", worker_args: dict | None = None,
                     record_path: str | os.PathLike | None = None, raise_on_failure: bool = True,
                     progress: bool = True) -> dict:
    """Run G ranks on this machine; return the merged run record (also written to the record path)."""
    import torch.multiprocessing as mp

    from lsm_gnn.datasets.format import Dataset

    G = cfg.distributed.devices
    timeout = cfg.distributed.timeout_s
    record_path = record_path or cfg.output.record
    if cfg.distributed.mode == "shared" and G > 1:
        from lsm_gnn.multidevice.owner_files import ensure_owner_files

        ensure_owner_files(Dataset(cfg.dataset.path), G, progress=progress)  # once, before the ranks
    addr = cfg.distributed.master_addr
    port = cfg.distributed.master_port or pick_free_port(addr)
    init_method = f"tcp://{addr}:{port}"
    ctx = mp.get_context("spawn")
    stamps = ctx.Array("d", [time.monotonic()] * G, lock=False)
    phases = ctx.Array("i", [STARTING] * G, lock=False)
    outdir = Path(tempfile.mkdtemp(prefix="lsm-gnn-ranks-"))
    procs = []
    t_start = time.perf_counter()
    try:
        for r in range(G):
            p = ctx.Process(target=_rank_main, name=f"lsm-gnn-rank-{r}",
                            args=(r, G, config_to_dict(cfg), worker, worker_args or {}, init_method,
                                  stamps, phases, str(outdir)))
            p.start()
            procs.append(p)
        failure = _watch(procs, stamps, phases, outdir, timeout)
        wall = time.perf_counter() - t_start
        if failure is None:
            results = [json.loads((outdir / f"rank-{r}.json").read_text()) for r in range(G)]
            record = merge_records(cfg, results, worker, wall)
        else:
            record = failed_record(cfg, failure, worker)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=1)
        import shutil

        shutil.rmtree(outdir, ignore_errors=True)
    if record_path:
        from lsm_gnn.records import write_record

        write_record(record_path, record)
    if failure is not None and raise_on_failure:
        err = DistributedError(failure["rank"], failure["message"])
        err.record = record
        raise err
    return record


def _read_error(outdir: Path, r: int) -> dict | None:
    p = outdir / f"rank-{r}.error.json"
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _watch(procs, stamps, phases, outdir: Path, timeout: float) -> dict | None:
    """Poll until every rank is done (None) or one failed (a failure dict naming the rank)."""
    while True:
        codes = [p.exitcode for p in procs]
        if all(c == 0 for c in codes):
            return None
        now = time.monotonic()
        dead = [r for r, c in enumerate(codes) if c not in (None, 0)]
        alive = [r for r, c in enumerate(codes) if c is None and phases[r] != DONE]
        stale = [r for r in alive
                 if now - stamps[r] > (max(timeout, STARTUP_LIMIT_S) if phases[r] == STARTING else timeout)]
        # a slow rank is only a hung rank when another one is blocked waiting for it (or all are
        # stuck): ranks that are all busy (JIT compiles, evaluation) are not a failure
        waiting = [r for r in stale if phases[r] == IN_COLLECTIVE]
        hung = [r for r in stale if phases[r] != IN_COLLECTIVE]
        if dead or (hung and waiting) or (alive and len(stale) == len(alive)):
            time.sleep(POLL_S)  # let simultaneous error files land before judging
            failure = _judge(procs, stamps, phases, outdir, dead, stale, timeout)
            _terminate(procs)
            for state, p in zip(failure["ranks"], procs):
                state["exitcode"] = p.exitcode
            return failure
        time.sleep(POLL_S)


def _judge(procs, stamps, phases, outdir, dead, stale, timeout) -> dict:
    errors = {r: _read_error(outdir, r) for r in range(len(procs))}
    codes = [p.exitcode for p in procs]
    # 1. a rank that died by itself (killed, crashed, or an error of its own)
    own = [r for r in dead if errors[r] is None or errors[r]["kind"] == "own"]
    for r in own:
        e = errors[r]
        if e is None:
            how = f"exit code {codes[r]}" + (f" (signal {-codes[r]})" if codes[r] < 0 else "")
            return {"rank": r, "message": f"process exited unexpectedly with {how}", "ranks": _states(procs, errors)}
        return {"rank": r, "message": f"{e['type']}: {e['message']}", "ranks": _states(procs, errors)}
    # 2. a rank that stopped answering while not waiting for the others
    suspects = [r for r in range(len(procs)) if codes[r] is None and phases[r] == WORKING] or \
               [r for r in range(len(procs)) if codes[r] is None and phases[r] != DONE]
    if suspects:
        r = min(suspects, key=lambda q: stamps[q])
        idle = time.monotonic() - stamps[r]
        return {"rank": r, "message": f"no progress for {idle:.0f} s (distributed.timeout_s={timeout:g}); "
                                      "the other ranks were waiting for it", "ranks": _states(procs, errors)}
    r = dead[0] if dead else None
    msg = errors[r]["message"] if r is not None and errors[r] else "a rank failed"
    return {"rank": r, "message": msg, "ranks": _states(procs, errors)}


def _states(procs, errors) -> list[dict]:
    return [{"rank": r, "exitcode": p.exitcode, "error": (errors[r] or {}).get("message")}
            for r, p in enumerate(procs)]


def _terminate(procs) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE_S
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join(timeout=1)


# ---- records ---------------------------------------------------------------------------------------
def _system(cfg: RunConfig) -> str:
    return "isolated" if cfg.distributed.mode == "isolated" else "lsm"


def failed_record(cfg: RunConfig, failure: dict, worker: str) -> dict:
    from lsm_gnn.records import new_record

    rec = new_record("train" if worker == "train" else "bench", _system(cfg), config_to_dict(cfg))
    rec["status"] = "failed"
    rec["failure"] = {"rank": failure["rank"], "message": failure["message"], "ranks": failure.get("ranks", [])}
    return rec


def merge_records(cfg: RunConfig, results: list[dict], worker: str, wall_s: float) -> dict:
    """One record for the run: rows and traffic summed over ranks, epoch times the slowest rank's."""
    from lsm_gnn.records import new_record

    G = len(results)
    base = results[0].get("record")
    if base is not None:
        rec = json.loads(json.dumps(base))  # rank 0's record carries config, accuracy and epochs
        rec["system"] = _system(cfg)
        rec["config"] = config_to_dict(cfg)
    else:
        rec = new_record("bench", _system(cfg), config_to_dict(cfg))
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
    from lsm_gnn.cache.budget import system_memory
    from lsm_gnn.datasets.format import Dataset

    lay = Dataset(cfg.dataset.path).features()
    metrics["memory"] = system_memory(cfg, _system(cfg), lay.num_rows, lay.row_bytes, devices=G)
    metrics["multidevice"] = {
        "devices": G, "mode": cfg.distributed.mode, "backend": resolve_backend(cfg), "worker": worker,
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


# ---- torchrun ---------------------------------------------------------------------------------------
def torchrun_main(argv: list[str] | None = None) -> None:
    """Entry for `torchrun ... -m lsm_gnn.multidevice.launch --config FILE [key=value ...]` (multi-node).

    torchrun sets RANK, WORLD_SIZE, MASTER_ADDR/PORT; every rank runs the training worker; rank 0
    writes the record of its own metrics plus the per-rank figures gathered with all_gather_object.
    """
    import torch.distributed as dist

    from lsm_gnn.config import load_config

    argv = list(sys.argv[1:] if argv is None else argv)
    path = None
    if argv[:1] == ["--config"]:
        path, argv = argv[1], argv[2:]
    cfg = load_config(path, argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    init_process_group(cfg, rank, world)
    hb = Heartbeat(rank)
    result = train_worker(cfg, rank, world, hb, {})
    gathered = [None] * world
    dist.all_gather_object(gathered, result)
    if rank == 0:
        record = merge_records(cfg, gathered, "train", 0.0)
        if cfg.output.record:
            from lsm_gnn.records import write_record

            write_record(cfg.output.record, record)
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        torchrun_main()
    except LsmGnnError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)

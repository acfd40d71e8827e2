"""One harness for every compared system: `run_system(system, cfg, ...) -> run record`.

Systems (`SYSTEMS`):
- `lsm`: LSM-GNN, shared cache over G devices (lsm_gnn.ranks.launch.run_multi_device);
- `isolated`: per-device caches of the same size, each device caching what it requests;
- `memory`: the in-memory ideal (every feature row in RAM);
- `mmap`, `direct`: plain storage loaders without a cache (baselines.loaders);
- `distdgl`: Dist-DGL on M emulated machines x T trainers (baselines.distdgl).
Every system trains the same model with the same sampler settings and writes the same record
(schema lsm_gnn/schemas/run_record.schema.json): epoch times (cold, steady), stage breakdown per
iteration where the system has the stage, storage bytes, bytes over the network or between
devices, accuracy, preprocessing time, and `time.first_epoch_s` = preprocessing + cold epoch.
Each record also carries `cpu_index_s`: the CPU speed index (lsm_gnn/project/calibrate.py) measured
just before the workers start and just after they end, alone on the machine, so that a projection
can put its CPU figures at the speed the run had (a shared VM runs one command tens of % slower in
one half hour than in the next).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

from lsm_gnn.config import RunConfig, config_to_dict, parse_config
from lsm_gnn.metrics import STAGES, TIMED_WINDOW, epoch_times, measured_epochs, steady_epochs
from lsm_gnn.records import claim_record, emulation_records, new_record, write_record
from lsm_gnn.utils.errors import ConfigError, DistributedError
from lsm_gnn.utils.machine import cpu_time_around

SYSTEMS = ("lsm", "isolated", "mmap", "direct", "memory", "distdgl")


def system_config(system: str, cfg: RunConfig, devices: int) -> RunConfig:
    """`cfg` with the switches that make it `system` on `devices` devices."""
    if system not in SYSTEMS:
        raise ConfigError("--system", "system", f"unknown system {system!r}; choose one of {', '.join(SYSTEMS)}")
    d = config_to_dict(cfg)
    d["distributed"]["devices"] = devices
    if system == "lsm":
        d["cache"]["enabled"], d["distributed"]["mode"] = True, "shared"
    elif system == "isolated":
        d["cache"]["enabled"], d["distributed"]["mode"] = True, "isolated"
    elif system in ("memory", "mmap", "direct"):
        d["cache"]["enabled"], d["distributed"]["mode"] = False, "isolated"
        d["storage"]["reader"] = system
        if system == "mmap":
            # the cap binds only while no train step allocates: a real step's tensors would share the
            # cgroup with the page cache; an emulated step allocates nothing and overlaps like the others
            d["train"]["overlap_fetch"] = cfg.train.accelerator == "emulated"
            if cfg.baseline.page_cache_cap:
                # under a page-cache cap as small as the caches' budget, readahead evicts the rows being
                # gathered and the loader thrashes; a cache-aware mmap loader would madvise(RANDOM) too
                d["storage"]["mmap_advice"] = "random"
    return parse_config(d, f"<system {system}>")


def lsm_memory_bytes(cfg: RunConfig, devices: int) -> int:
    """LSM-GNN's feature memory over all devices: each device's total budget (cache lines, victim
    buffer, landing buffer; lsm_gnn.cache.budget). The mmap page cache gets the same bytes."""
    from lsm_gnn.cache.budget import total_rows_for
    from lsm_gnn.datasets.format import Dataset

    lay = Dataset(cfg.dataset.path).features()
    return total_rows_for(cfg.cache, lay.num_rows, lay.row_bytes) * lay.row_bytes * devices


def run_system(system: str, cfg: RunConfig, *, devices: int = 1, machines: int = 2, trainers: int = 2,
               record_path: str | os.PathLike | None = None, progress: bool = False) -> dict:
    """Run one system and return its record (written to `record_path` if given; the path is checked
    and locked before the run: lsm_gnn.records.claim_record)."""
    with claim_record(record_path):
        try:
            with cpu_time_around() as cpu:
                if system == "distdgl":
                    rec = run_distdgl(cfg, machines=machines, trainers=trainers, progress=progress)
                else:
                    tb = testbed_args(cfg)
                    run_cfg = cfg if tb is None else cfg.model_copy(
                        update={"emulation": cfg.emulation.model_copy(update={"testbed": tb})})
                    rec = _run_lsm_family(system, run_cfg, devices, progress)
                    if tb is not None:
                        rec["metrics"]["testbed"] = testbed_block(system, tb, rec["metrics"].pop("testbed_per_rank", []))
        except Exception as e:  # a failed run leaves a failed record (a rejected config: none)
            if record_path is not None and not isinstance(e, ConfigError):
                _write_failed(record_path, system, cfg, e)
            raise
        finish_record(rec)
        emulation_records(rec, cfg, cpu)
        if record_path is not None:
            write_record(record_path, rec)
    return rec


def _write_failed(path, system: str, cfg: RunConfig, e: Exception) -> None:
    import sys
    import traceback

    rec = getattr(e, "record", None)  # the launcher's own failed record names the rank
    if rec is None:
        rec = new_record("train", system, config_to_dict(cfg))
        rec["status"] = "failed"
        rec["failure"] = {"rank": getattr(e, "rank", None), "message": f"{type(e).__name__}: {e}"}
    rec["system"] = system
    try:
        write_record(path, rec)
    except Exception:  # noqa: BLE001 - never mask the run's own error
        traceback.print_exc(file=sys.stderr)


@contextmanager
def cpu_speed_around():
    """The CPU speed index before and after the block (`{"before": s, "after": s}`, filled in place)."""
    from lsm_gnn.project.calibrate import cpu_index_seconds

    speed = {"before": cpu_index_seconds()}
    yield speed
    speed["after"] = cpu_index_seconds()


def _run_lsm_family(system: str, cfg: RunConfig, devices: int, progress: bool) -> dict:
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.ranks.launch import run_multi_device

    scfg = system_config(system, cfg, devices)
    pre = 0.0
    if system == "lsm" and devices > 1:
        from lsm_gnn.multidevice.owner_files import ensure_owner_files, owner_files_build_seconds

        # the per-owner files are LSM-GNN's preprocessing, as METIS is Dist-DGL's: made once and
        # reused, and charged their build time either way (as reused Dist-DGL partitions are)
        ds = Dataset(scfg.dataset.path)
        t0 = time.perf_counter()
        out, rank_dirs = scfg.dataset.owners_dir, scfg.storage.rank_dirs
        ensure_owner_files(ds, devices, out_dir=out, progress=progress, rank_dirs=rank_dirs)
        pre = max(time.perf_counter() - t0, owner_files_build_seconds(ds, devices, out, rank_dirs) or 0.0)
    worker, args = "train", {}
    if system in ("mmap", "direct"):
        worker = "baselines.loaders:plain_worker"
        budget = cfg.baseline.page_cache_budget_bytes
        args = {"page_cache_budget": budget if budget is not None else lsm_memory_bytes(cfg, devices),
                "cap": cfg.baseline.page_cache_cap}
    with cpu_speed_around() as speed:
        rec = run_multi_device(scfg, worker=worker, worker_args=args, progress=progress)
    rec["metrics"]["cpu_index_s"] = speed
    rec["system"] = system  # its memory block is the one its feature sources state (mmap: the cap)
    t = rec["metrics"].setdefault("time", {})
    t["preprocessing_s"] = (t.get("preprocessing_s") or 0.0) + pre
    return rec


# ---- Dist-DGL ------------------------------------------------------------------------------------
def network_shape(cfg: RunConfig, time_scale: float = 1.0):
    """The emulated network of `baseline.network_emulation` (None: real): the NIC of
    `baseline.network_profile`, delays x `time_scale`, rates / `time_scale` (baselines/distdgl/netem.py);
    `rate`: the rate alone; `auto`: the delay too where the kernel has sch_netem (netem.fit)."""
    mode = cfg.baseline.network_emulation
    if mode == "real":
        return None
    from baselines.distdgl.netem import LinkShape

    shape = LinkShape.from_profile(cfg.baseline.network_profile, time_scale)
    if mode == "rate":
        return shape.rate_only()
    return replace(shape, delay_required=(mode == "emulated"))


def testbed_args(cfg: RunConfig) -> dict | None:
    """What the emulated testbed charges Dist-DGL's stages with (None: not the testbed, i.e. no emulated
    storage device): the time scale S, the host factor f (emulation.host_speed, else the hardware
    profile's cpu.host_time_factor), the profile's PCIe and NIC links."""
    if cfg.storage.device != "emulated":
        return None
    from lsm_gnn.project.profiles import load_profile

    prof = load_profile(cfg.emulation.hardware_profile)
    if cfg.baseline.network_emulation != "real":
        raise ConfigError("<config>", "baseline.network_emulation",
                          f"the emulated testbed (storage.device: emulated) charges the network in user space "
                          f"(round trips x RTT x S, bytes / the NIC); found {cfg.baseline.network_emulation!r}, "
                          "which would shape it twice: use real")
    f = cfg.emulation.host_speed if cfg.emulation.host_speed is not None else prof.cpu.host_time_factor
    return {"time_scale": float(cfg.emulation.time_scale), "host_speed": float(f), "profile": prof.name,
            "host_core": cfg.emulation.host_core,
            "host_speed_from": "emulation.host_speed" if cfg.emulation.host_speed is not None
            else f"{prof.name}: cpu.host_time_factor",
            "pcie": prof.links.pcie.model_dump(), "nic": prof.links.nic.model_dump()}


def run_distdgl(cfg: RunConfig, *, machines: int = 2, trainers: int = 2, progress: bool = False) -> dict:
    from baselines.distdgl.launch import ClusterSpec, run_cluster
    from baselines.distdgl.partition import partition_dataset
    from lsm_gnn.accelerator import step_scale
    from lsm_gnn.datasets.format import Dataset

    b = cfg.baseline
    ds = Dataset(cfg.dataset.path)
    work = Path(tempfile.mkdtemp(prefix="lsm-gnn-distdgl-"))
    try:
        # absolute: the emulated machines run in their own working directories
        part_dir = Path(b.partition_dir).resolve() / f"{ds.name}-{machines}-{b.partition_method}" \
            if b.partition_dir else work / "parts"
        info = partition_dataset(ds, part_dir, machines, b.partition_method, reuse=bool(b.partition_dir),
                                 num_trainers_per_machine=trainers)
        tr = cfg.train
        args = {"dataset": str(ds.root.resolve()), "fanouts": list(cfg.sampler.fanouts), "batch_size": cfg.sampler.batch_size,
                "shuffle": cfg.sampler.shuffle, "model": cfg.model.model_dump(), "lr": tr.lr,
                "weight_decay": tr.weight_decay, "seed": tr.seed, "epochs": tr.epochs,
                "warmup_iters": tr.warmup_iters, "timed_iters": tr.timed_iters, "eval": tr.eval,
                "eval_nodes": tr.eval_nodes, "threads": b.trainer_threads,
                "pg_timeout_s": cfg.distributed.timeout_s, "die_at": b.fault_die_at or None,
                "accelerator": {"profile": tr.accelerator_profile, "scale": step_scale(cfg)}
                if tr.accelerator == "emulated" else None, "testbed": testbed_args(cfg)}
        spec = ClusterSpec(machines=machines, trainers=trainers, servers=b.servers, samplers=b.samplers,
                           network=b.network, timeout_s=b.timeout_s, shape=network_shape(cfg, cfg.emulation.time_scale))
        with cpu_speed_around() as speed:
            t0 = time.perf_counter()
            res = run_cluster(spec, info.part_config, info.graph_name, args, work / "cluster", progress=progress)
            wall = time.perf_counter() - t0
        rec = distdgl_record(cfg, info, spec, res.trainer_metrics, wall)
        if args["testbed"]:
            rec["metrics"]["testbed"] = testbed_block(
                "distdgl", args["testbed"], [(m.get("testbed") or {}).get("raw") or {} for m in res.trainer_metrics]
                + [s.get("raw") or {} for s in res.server_metrics], trainers=res.trainer_metrics,
                servers=res.server_metrics)
        rec["metrics"]["cpu_index_s"] = speed
        emu = res.network_emulation
        if emu is not None:
            emu["requested"] = b.network_emulation
            if emu.get("shape"):  # what a rate-only link lacks per epoch (0 when the delay was added)
                from baselines.distdgl.netem import missing_delay_per_epoch
                from lsm_gnn.project.model import distdgl_round_trips

                trips = sum(distdgl_round_trips(len(cfg.sampler.fanouts), spec.world_size).values())
                P = rec["metrics"]["time"][TIMED_WINDOW]["iterations_per_epoch"]
                emu["round_trips_per_iteration"] = trips
                emu["missing_delay_epoch_s"] = missing_delay_per_epoch(emu["shape"], trips, P)
        rec["metrics"]["distdgl"]["network_emulation"] = emu
        return rec
    finally:
        shutil.rmtree(work, ignore_errors=True)


def testbed_block(system: str, tb: dict, raws: list[dict], *, trainers: list[dict] | None = None,
                  servers: list[dict] | None = None) -> dict:
    """metrics.testbed of a run in the emulated testbed: every charged stage (all processes together)
    with its component and lateness, the parts' validity (lsm_gnn.storage.charge.charge_summary), the
    links and f charged with, the stage-to-part table; Dist-DGL's round trips counted."""
    from lsm_gnn.storage.charge import charge_summary
    from lsm_gnn.testbed import as_record

    out = charge_summary(raws, tb["time_scale"], tb["host_speed"])
    counted: dict[str, int] = {}
    for m in trainers or []:
        for k, v in ((m.get("testbed") or {}).get("counted") or {}).items():
            counted[k] = counted.get(k, 0) + int(v)
    out.update({"counted": counted, "links": {"pcie": tb["pcie"], "nic": tb["nic"]}, "profile": tb["profile"],
                "host_speed_from": tb["host_speed_from"], "processes_charged": len(raws),
                "host_core": tb.get("host_core", "this"),
                "table": as_record(system)})
    if system == "distdgl":
        out["servers_charged"] = len(servers or [])
        out["usage"] = usage_block([(m.get("testbed") or {}).get("usage") or {} for m in trainers or []]
                                   + [s.get("usage") or {} for s in servers or []])
        out["window"] = "trainers: the timed iterations; servers: every request (they cannot tell the windows)"
    else:
        out["window"] = "the timed iterations (lsm_gnn.storage.emulated.timed_window_begin)"
    return out


def usage_block(usages: list[dict]) -> dict:
    """Dist-DGL's charged host stages' resource use (baselines.distdgl.testbed.thread_usage), per
    stage summed over the processes, with each process's CPU seconds (user + system) beside it:
    whether a run's extra CPU time was in every process or in one."""
    out: dict[str, dict] = {}
    for u in usages:
        for stage, fields in u.items():
            acc = out.setdefault(stage, {"cpu_s_by_process": []})
            for k, v in fields.items():
                acc[k] = acc.get(k, 0) + v
            acc["cpu_s_by_process"].append(fields.get("user_s", 0.0) + fields.get("sys_s", 0.0))
    return out


def distdgl_record(cfg: RunConfig, info, spec, metrics: list[dict], wall_s: float) -> dict:
    """The run record of a Dist-DGL run, with lsm-gnn's epoch-time semantics (see train/loop.py)."""
    rec = new_record("train", "distdgl", config_to_dict(cfg))
    P = metrics[0]["iters_per_epoch"]
    warm = metrics[0]["warmup_iters"]
    timed = metrics[0]["timed_iters"] is not None
    E = len(metrics[0]["epoch_walls"])
    epochs = []
    all_losses = [x for m in metrics for x in m["losses"]]
    for e in range(E):
        win = [[it for it in m["iterations"] if it["epoch"] == e] for m in metrics]
        steady_win = [w[warm:] for w in win]
        # per step, the slowest trainer (DDP waits for it); then the mean over the window
        per_step = np.max(np.array([[it["total"] for it in w] for w in steady_win]), axis=0)
        all_steps = np.max(np.array([[it["total"] for it in w] for w in win]), axis=0)
        wall = max(m["epoch_walls"][e] for m in metrics)
        epochs.append({"epoch": e, "iterations": len(win[0]), "time_s": wall,
                       "epoch_s": float(per_step.mean() * P) if timed else wall,
                       "cold_estimate_s": float(all_steps.mean() * P) if timed else wall,
                       "extrapolated": timed and len(win[0]) < P,
                       "loss": float(np.mean(all_losses)) if (e == 0 and all_losses) else None})
    steady_idx = steady_epochs(E, timed=timed, warmup_iters=warm)
    measured = measured_epochs(E, timed=timed, warmup_iters=warm)
    times = epoch_times(epochs, timed=timed, warmup_iters=warm)
    chosen = [it for m in metrics for it in m["iterations"] if it["epoch"] in measured and it["step"] >= warm]
    stage = {k: 0.0 for k in STAGES}
    if chosen:
        stage["sample"] = float(np.mean([it["sample"] for it in chosen]))
        stage["exchange_rows"] = float(np.mean([it["fetch"] for it in chosen]))  # KVStore pull
        stage["train"] = float(np.mean([it["train"] for it in chosen]))  # forward, backward, Adam
        stage["sync"] = float(np.mean([it.get("sync", 0.0) for it in chosen]))  # the gradient all-reduce
        # DGL block -> lsm-gnn Block, and (the emulated testbed) the batch's copy to the GPU
        stage["other"] = float(np.mean([it["convert"] + it.get("copy", 0.0) for it in chosen]))
    # the straggler: per timed step, each trainer's work before the all-reduce (its total less the
    # sync, which is the wait for the others and the all-reduce), the slowest against the mean
    # (the projection's wait for the slowest trainer, lsm_gnn.project.model)
    work: dict = {}
    for m in metrics:
        for it in m["iterations"]:
            if it["epoch"] in measured and it["step"] >= warm:
                work.setdefault((it["epoch"], it["step"]), []).append(it["total"] - it.get("sync", 0.0))
    steps = [w for w in work.values() if len(w) == len(metrics)]
    trainer_work = None
    if steps and len(metrics) > 1:
        mean_w, max_w = float(np.mean([np.mean(w) for w in steps])), float(np.mean([max(w) for w in steps]))
        trainer_work = {"mean_s": mean_w, "slowest_s": max_w, "steps": len(steps),
                        "slowest_over_mean": max_w / mean_w if mean_w > 0 else None}
    net = None
    if spec.network == "netns":
        net = 0
        for m in metrics:
            if m["local_rank"] == 0 and m["net_start"] and m["net_end"]:
                net += m["net_end"]["tx_bytes"] - m["net_start"]["tx_bytes"]
    feat_bytes = sum(it["feature_bytes"] for m in metrics for it in m["iterations"] if it["epoch"] in measured)
    startup = max(m["startup"]["initialize_s"] + m["startup"]["setup_s"] for m in metrics)
    from lsm_gnn.cache.budget import system_memory
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.records import accelerator_block, batch_window, merge_accelerators, throughput

    accs = []
    for m in metrics:  # each trainer's timed windows, as lsm-gnn's loop counts its own
        win = [it for it in m["iterations"] if it["epoch"] in measured and it["step"] >= warm]
        shapes = [(it.get("seeds", 0), it["input_rows"], it.get("edges", 0), it.get("busy", 0.0)) for it in win]
        emu = m.get("accelerator")
        overshoot = (m.get("overshoot_s_per_step") or 0.0) if emu else None
        accs.append(accelerator_block(emu, "cpu", [batch_window(shapes, [it["total"] for it in win])], overshoot))
    acc = merge_accelerators(accs)
    lay = Dataset(cfg.dataset.path).features()
    rec["epochs"] = epochs
    rec["metrics"] = {
        "memory": system_memory(cfg.cache, "distdgl", lay.num_rows, lay.row_bytes, machines=spec.machines),
        "rows": {"requests": int(sum(it["input_rows"] for m in metrics for it in m["iterations"]))},
        "traffic": {"storage_bytes": 0, "storage_io_ops": 0, "device_exchange_bytes": 0, "host_to_device_bytes": 0,
                    **({"network_bytes": int(net)} if net is not None else {}),
                    "kvstore_feature_bytes": int(feat_bytes)},
        "time": {"per_iteration": stage, **times,
                 "preprocessing_s": info.preprocessing_s, "partition_s": info.partition_s,
                 "partition_load_s": info.load_s, "startup_s": startup, "cluster_wall_s": wall_s,
                 TIMED_WINDOW: {"full_epoch": (not timed) or epochs[0]["iterations"] == P,
                                   "warmup_iters": warm, "timed_iters": metrics[0]["timed_iters"],
                                   "iterations_per_epoch": P, "steady_epochs": steady_idx}},
        "accuracy": {"val": metrics[0]["accuracy"]["val"], "test": metrics[0]["accuracy"]["test"],
                     "trained": acc["mode"] == "real"},
        "accelerator": acc,
        "throughput": throughput(acc, per_worker=accs),
        "distdgl": {"machines": spec.machines, "trainers_per_machine": spec.trainers, "servers_per_machine":
                    spec.servers, "samplers_per_trainer": spec.samplers, "network": spec.network,
                    "network_bytes_over_epochs": measured if net is not None else None,
                    "partition": info.as_dict(), "part_ids": [m["part_id"] for m in metrics],
                    "train_nodes_per_trainer": [m["num_train_nids"] for m in metrics],
                    "trainer_threads": metrics[0].get("threads"),
                    "trainer_work_s": trainer_work,
                    "stage_map": {"sample": "DistNodeDataLoader (RPC sampling)",
                                  "exchange_rows": "DistTensor pull of features and labels (KVStore)",
                                  "train": "forward, backward, Adam (emulated: the accelerator's wait)",
                                  "sync": "the gradient all-reduce over gloo between the trainers "
                                          "(emulated: their one-number meeting): waiting for the peers",
                                  "other": "DGL block -> lsm_gnn Block conversion"}},
    }
    return rec


def finish_record(rec: dict) -> None:
    """Fields every system's record has: time to first epoch (preprocessing + cold epoch)."""
    t = rec.setdefault("metrics", {}).setdefault("time", {})
    cold, pre = t.get("epoch_cold_s"), t.get("preprocessing_s") or 0.0
    t["first_epoch_s"] = None if cold is None else pre + cold + (t.get("startup_s") or 0.0)

"""`lsm-gnn bench compare`: every system of the harness at equal memory, replicated and interleaved.

Every system runs the same model and sampler on the same timing window (the same warm-up and timed
iterations per epoch, epoch time extrapolated from it as lsm-gnn's loop does). Each system's feature
memory is reported beside it (`memory`): LSM-GNN's budget per device (cache.capacity_fraction,
victim buffer included), the isolated caches the same per device, the mmap page cache capped at the
same total, the direct loader none, the ideal and Dist-DGL every row in RAM.

`--accelerator PROFILE` (a100, h200, or a YAML file) runs every system with emulated accelerators
(lsm_gnn.accelerator, after MLPerf Storage): each train step is a wait of that GPU's step time for
the batch, the data plane runs as it does, and each record reports accelerator utilisation (AU).
Without it the model trains on the CPU (`real`).

Replication (MLPerf Storage: replicated results within 5 %): `--repeats N` runs of every system,
interleaved and rotated (round r starts at system r mod S: ABC, BCA, CAB, ...), so that a slow
quarter hour of the shared VM falls on every system alike. Each figure is the median of its runs
with min and max, and is flagged when its runs spread (max - min) / median more than 5 %. Before
every run the feature file's pages are dropped from the page cache. Beside the medians, each
system's epoch over LSM-GNN's in the same round (`per_round_vs_lsm`: the runs of a round follow
one another within minutes, so the VM's drift between rounds cancels) with its own spread. With
emulated accelerators and `--limits`, fio measures the disk for 2 s before every run
(`disk_iops_before` of each run, `disk`: their spread and how each system's epoch correlates
with the time per read, 1 / IOPS): on the VM the disk's rate moves by tens of per cent between
minutes, which no order of runs removes.

Seeds (MLPerf Storage draws a new seed per run): round r runs every system with train.seed =
`run_seed(base, r)`, base = the config's train.seed, so the runs are independent draws of the batches
and the comparison is reproducible from its base seed; the systems of one round share their seed
(the same batches: `per_round_vs_lsm` compares like with like). Each run's record carries its seed
(config.train.seed), the output `seeds` (base, by_round) and each run's `seed`. A single
`lsm-gnn run` keeps the configured seed.

Ratios (above 1: LSM-GNN is faster): `{system}_vs_lsm_epoch` = the median steady epoch over
LSM-GNN's. With emulated accelerators also:
- LSM-GNN's floor per iteration: max(the emulated step, storage reads of all devices / fio's
  random 4 KiB IOPS at its best depth, one device's exchange bytes / the exchange link's bandwidth),
  both devices' limits measured in the same run (fio over the feature file before the first run
  and after the last, the better of the two; `lsm_gnn.bench.exchange`); `lsm_vs_floor` =
  LSM-GNN's steady epoch over the floor's epoch.
- `--sweep 1,8,32,...`: every system once more at each multiple of the profile's step time (a
  slower accelerator); the fastest accelerator a system keeps at AU >= 90 % (MLPerf Storage's
  threshold) is the smallest multiple that reaches it (`sustained_scale`).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import click

from lsm_gnn.bench.replicate import (SPREAD_LIMIT, correlation, per_round_ratios, rotated_order, spread_of,
                                     summarise_run, summarise_system, with_seed)
from lsm_gnn.bench.validate import load_outputs, primitive_run, print_validation, validation
from lsm_gnn.records import emulation_label
from lsm_gnn.utils.outpaths import output_option
from lsm_gnn.utils.output import emit
from lsm_gnn.utils.seeds import run_seed

COMPARED = ("lsm", "distdgl", "mmap", "direct")
EMULATED = ("lsm", "isolated", "direct", "mmap", "memory", "distdgl")
EMULATED_STORAGE = ("lsm", "isolated", "direct")
"""The systems whose reads go through an emulated storage device (mmap's faults stay real)."""
FIO_DEPTHS = (32, 64, 128)


def _fio_random(cfg, fio: str, seconds: float, depth: int) -> dict:
    """One fio job of random 4 KiB reads over the feature file at queue depth `depth`, its pages
    dropped from the page cache first (lsm_gnn.bench.storage.run_fio's result)."""
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.bench.storage import FIO_RANDOM, run_fio
    from lsm_gnn.storage.pagecache import drop_file_cache

    lay = Dataset(cfg.dataset.path).features()
    drop_file_cache(lay.path)
    return run_fio(fio, str(lay.path), lay.file_bytes, seconds, dict(FIO_RANDOM, iodepth=depth))


def fio_limit(cfg, *, fio: str = "fio", fio_seconds: float = 3.0) -> dict:
    """fio's best random 4 KiB IOPS over the feature file now (queue depths FIO_DEPTHS)."""
    fio_runs = []
    for qd in FIO_DEPTHS:
        res = _fio_random(cfg, fio, fio_seconds, qd)
        fio_runs.append(res)
        if not res["available"]:
            break
    best = max((r for r in fio_runs if r["available"]), key=lambda r: r["iops"], default=None)
    return {"available": best is not None, "best_iops": best["iops"] if best else None,
            "best_depth": best["iodepth"] if best else None,
            "by_depth": {r.get("iodepth"): r.get("iops") for r in fio_runs if r["available"]},
            **({} if best else {"reason": fio_runs[-1].get("reason")})}


def best_of(moments: dict) -> dict:
    """fio measured at several moments of one benchmark (`moments`: name -> fio_limit): the best
    IOPS of all, so the floor is the one the disk allowed at its fastest moment of the run."""
    ok = {k: v for k, v in moments.items() if v.get("available")}
    if not ok:
        return {**next(iter(moments.values())), "by_moment": moments}
    k = max(ok, key=lambda m: ok[m]["best_iops"])
    return {**ok[k], "best_moment": k, "by_moment": moments}


def device_limits(cfg, *, fio: str = "fio", fio_seconds: float = 3.0, exchange_bytes_per_rank: float | None,
                  devices: int = 2, fio_before: dict | None = None) -> dict:
    """The limits LSM-GNN's floor divides by, measured now: fio's best random 4 KiB IOPS over the
    feature file (queue depths FIO_DEPTHS; with `fio_before`, the best of that and now), the
    exchange link's bandwidth at LSM-GNN's size."""
    from lsm_gnn.bench.exchange import exchange_bandwidth

    now = fio_limit(cfg, fio=fio, fio_seconds=fio_seconds)
    out = {"fio": best_of({"before": fio_before, "after": now}) if fio_before is not None else now}
    out["exchange"] = exchange_bandwidth(cfg, exchange_bytes_per_rank, devices=devices) \
        if exchange_bytes_per_rank else None
    return out


def disk_probe(cfg, *, fio: str = "fio", seconds: float = 2.0) -> float | None:
    """The disk's random 4 KiB IOPS right before a run (fio, the deepest of FIO_DEPTHS): what the
    run's storage-bound stages will find; None without fio."""
    res = _fio_random(cfg, fio, seconds, max(FIO_DEPTHS))
    return res["iops"] if res["available"] else None


def lsm_floor(lsm: dict, limits: dict, devices: int, *, device=None, queue_depth: int | None = None,
              time_scale: float = 1.0) -> dict:
    """LSM-GNN's floor per iteration and epoch: the slowest of its three limits. Storage through the
    device model (lsm_gnn.storage.device_model.device_reads_seconds): on the real disk, fio's best
    IOPS shared by every device's reads; on an emulated device (`device`: its DeviceProfile, at
    scale 1: the times here are divided back by the time scale already), each device's pages on
    its SSDs at the run's queue depth. The exchange is real CPU work on this machine: at time scale
    S it is divided by S like every other time of the run."""
    from lsm_gnn.storage.device_model import PAGE, DeviceProfile, SSDModel, device_reads_seconds

    parts = {"accelerator_step_s": lsm["busy_s_per_iteration"]}
    if device is not None:
        pages = (lsm.get("storage_bytes_per_iteration") or 0) / PAGE / devices  # one command per page
        parts["storage_s"], which = device_reads_seconds(device, pages, pages * PAGE, devices=devices,
                                                         queue_depth=queue_depth)
        storage_from = f"device model {device.name}: {which}"
    else:
        iops = limits["fio"]["best_iops"]
        storage_from = "fio's best IOPS, one disk shared by the devices"
        if iops:
            # the devices' reads (counted together) share one disk
            disk = DeviceProfile(name="fio", ssd=SSDModel(iops=iops, bandwidth=float("inf"), latency_s=0.0),
                                 ssds_per_device=1, shared=True)
            parts["storage_s"], _ = device_reads_seconds(disk, lsm["storage_io_ops_per_iteration"] / devices, 0.0,
                                                         devices=devices)
        else:
            parts["storage_s"] = None
    ex, xb = (limits or {}).get("exchange"), lsm.get("exchange_bytes_per_iteration")
    parts["exchange_s"] = (xb / devices) / ex["bytes_per_s"] / time_scale \
        if (ex and ex.get("bytes_per_s") and xb) else None
    known = {k: v for k, v in parts.items() if v is not None}
    it = max(known.values()) if known else None
    P = lsm.get("iterations_per_epoch") or 0
    return {**parts, "iteration_s": it, "bound": max(known, key=known.get) if known else None,
            "epoch_s": it * P if it is not None else None, "storage_from": storage_from,
            "complete": all(v is not None for v in parts.values())}


PROBE_ROWS = 4096
"""Rows a batch of the scale probe reads (a batch-128 iteration of synthetic-small reads ~6k rows)."""
PROBE_BATCHES = 6
MAX_PROBE_SCALE = 256.0


def scale_probe(cfg, time_scale: float, host_speed: float, *, rows: int = PROBE_ROWS,
                batches: int = PROBE_BATCHES, storage: bool = True) -> dict:
    """Whether the emulated testbed can be paced at `time_scale` here: a few batches of `rows` random
    rows through the emulated device (its pacing valid, lsm_gnn.storage.emulated.emulation_summary) and
    a fixed CPU kernel charged as host work at S x f (lsm_gnn.storage.charge). A short probe: a scale
    it refuses would make every run of the benchmark invalid. `storage=False` (no compared system
    reads the SSD model: lsm_gnn.testbed.charges(system, "ssd")) probes the host charge only, so Dist-DGL alone
    runs at S = 1 (the host ground truth), where no copy could keep up with the paper's SSDs."""
    import numpy as np

    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.storage.emulated import open_emulated

    st = {"valid": True, "lateness_fraction": None, "probed": False}
    if storage:
        lay = Dataset(cfg.dataset.path).features()
        store = open_emulated(lay, cfg.storage, time_scale=time_scale, verify_checksums=False)
        try:
            rng = np.random.default_rng(0)
            n = min(rows, lay.num_rows)
            out = store.empty_rows(n)
            store.reset_stats()
            for _ in range(batches):
                store.read_rows(np.sort(rng.choice(lay.num_rows, n, replace=False)), out)
            st = dict(store.emulation_stats(), probed=True)
        finally:
            store.close()
    host = primitive_run(time_scale, host_speed, reps=2)
    ok = bool(st["valid"] and host["valid"])
    reason = None
    if not ok:
        reason = "; ".join(([f"storage: {st['invalid_cause']}"] if not st["valid"] else [])
                           + ([f"host: {c}" for c in host["invalid_causes"]] if not host["valid"] else []))
    kind = None if ok else ("scale" if (st.get("cause_kind") == "scale" or host.get("cause_kind") == "scale")
                            else "busy")
    return {"time_scale": time_scale, "host_speed": host_speed, "ok": ok, "cause_kind": kind, "reason": reason,
            "storage_probed": st["probed"], "storage_lateness_fraction": st["lateness_fraction"],
            "host_late_fraction": host["late_fraction"]}


def choose_scale(cfg, *, given: bool, host_speed: float, storage: bool = True) -> dict:
    """Probe the configured time scale (scale_probe; `storage`: whether a compared system reads the SSD
    model); where the scale is too small for the profile, raise it (doubling, up to MAX_PROBE_SCALE)
    when the user did not set it, or refuse when they did. A busy machine is not mended by a larger
    scale: it is refused with that cause."""
    from lsm_gnn.utils.errors import ConfigError

    S = float(cfg.emulation.time_scale)
    tried = []
    while True:
        p = scale_probe(cfg, S, host_speed, storage=storage)
        tried.append(p)
        if p["ok"]:
            return {"time_scale": S, "raised": S != float(cfg.emulation.time_scale), "probes": tried}
        if p["cause_kind"] == "busy" and len(tried) >= 2:
            raise ConfigError("--time-scale", "emulation.time_scale",
                              f"the probe could not pace the emulated testbed at scale {S:g} because the machine is "
                              f"busy ({p['reason']}); rerun on a quiet machine")
        if given or S * 2 > MAX_PROBE_SCALE:
            raise ConfigError("--time-scale", "emulation.time_scale",
                              f"scale {S:g} is too small for storage profile {cfg.storage.device_profile!r} with host "
                              f"speed {host_speed:g} on this machine ({p['reason']}); "
                              + ("raise --time-scale" if given else f"no scale up to {MAX_PROBE_SCALE:g} passed"))
        S *= 2


MAX_SYSTEM_SCALE = 512.0
"""The largest time scale a system's own probe raises it to (system_scale_probe): a power of two within
emulation.time_scale's bound (1,000), whose dilation check runs at 2 S."""
SYSTEM_PROBE_ITERS = (2, 3)
"""Warm-up and timed iterations of a system's probe run (one epoch: its first fetches miss more than
a steady epoch's, so the probe asks for at least the scale a steady run needs)."""


def system_scale_probe(cfg, system: str, time_scale: float, *, devices: int, machines: int,
                       trainers: int) -> dict:
    """Whether `system`'s GPU-charged stages (lsm_gnn.testbed.charges(system, "gpu"): this machine's engine does
    the GPU's work, which the storage and host probe cannot tell) are paced at `time_scale`: one short
    run of the system itself (SYSTEM_PROBE_ITERS), its record's testbed parts read."""
    from baselines.harness import run_system

    warm, timed = SYSTEM_PROBE_ITERS
    c = cfg.model_copy(update={
        "train": cfg.train.model_copy(update={"epochs": 1, "warmup_iters": warm, "timed_iters": timed}),
        "emulation": cfg.emulation.model_copy(update={"time_scale": float(time_scale)})})
    rec = run_system(system, c, devices=devices, machines=machines, trainers=trainers, record_path=None,
                     progress=False)
    tb = (rec.get("metrics") or {}).get("testbed") or {}
    bad = {p: v for p, v in (tb.get("parts") or {}).items() if not v.get("valid", True)}
    kind = None if not bad else ("scale" if any(v.get("cause") == "scale" for v in bad.values()) else "busy")
    return {"system": system, "time_scale": float(time_scale), "ok": not bad, "cause_kind": kind,
            "reason": "; ".join(tb.get("invalid_causes") or []) or None,
            "late_fraction": {p: v.get("late_fraction") for p, v in (tb.get("parts") or {}).items()}}


def choose_system_scale(cfg, system: str, time_scale: float, *, given: bool, devices: int, machines: int,
                        trainers: int) -> dict:
    """A system's own time scale (system_scale_probe): doubled from `time_scale` up to
    MAX_SYSTEM_SCALE while its GPU-charged work outruns its charge, unless the user gave it (then
    refused); a busy machine (twice) is refused, as choose_scale does."""
    from lsm_gnn.utils.errors import ConfigError

    S, tried = float(time_scale), []
    while True:
        p = system_scale_probe(cfg, system, S, devices=devices, machines=machines, trainers=trainers)
        tried.append(p)
        if p["ok"]:
            return {"system": system, "time_scale": S, "raised": S != float(time_scale), "probes": tried}
        if p["cause_kind"] == "busy" and sum(1 for t in tried if t["cause_kind"] == "busy") >= 2:
            raise ConfigError("--system-scale", "emulation.time_scale",
                              f"the probe could not pace {system} at scale {S:g} because the machine is busy "
                              f"({p['reason']}); rerun on a quiet machine")
        if p["cause_kind"] == "busy":
            continue
        if given or S * 2 > MAX_SYSTEM_SCALE:
            raise ConfigError("--system-scale", "emulation.time_scale",
                              f"scale {S:g} is too small for {system}'s GPU-charged work on this machine "
                              f"({p['reason']}); " + (f"raise --system-scale {system}=S" if given
                                                      else f"no scale up to {MAX_SYSTEM_SCALE:g} passed"))
        S *= 2


VM_PROBES = 3
"""Disk probes the `vm` profile's IOPS cap is the median of."""


def measure_vm_profile(cfg, prof, *, fio: str = "fio", fio_seconds: float = 3.0, out_dir: str | None = None) -> dict:
    """The `vm` device profile filled from fio over the feature file now: the IOPS cap is the median
    of VM_PROBES disk probes (disk_probe: the probe a real-disk bench compare takes before each run,
    so the model is the disk as the real runs find it, not fio's best moment: on synthetic-tiny
    fio's best over the depths was 129,214 IOPS while the real runs' probes spread 105,556-140,249,
    median 121,186), the latency its 4 KiB psync QD1 read, the bandwidth its sequential 1 MiB rate;
    written as a YAML profile (`path`) that the runs read. Without fio the packaged numbers stay,
    and `measured` says why."""
    import tempfile

    import yaml

    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.bench.storage import FIO_LATENCY, FIO_SEQ, run_fio
    from lsm_gnn.storage.pagecache import drop_file_cache
    from lsm_gnn.utils.atomic import write_text

    lim = fio_limit(cfg, fio=fio, fio_seconds=fio_seconds)
    data = prof.model_dump(mode="json")
    measured = {"available": lim["available"], "random": lim}
    if lim["available"]:
        lay = Dataset(cfg.dataset.path).features()
        drop_file_cache(lay.path)
        qd1 = run_fio(fio, str(lay.path), lay.file_bytes, fio_seconds, FIO_LATENCY["qd1"])
        drop_file_cache(lay.path)
        seq = run_fio(fio, str(lay.path), lay.file_bytes, fio_seconds, FIO_SEQ)
        measured.update({"qd1_latency_s": qd1.get("lat_s"), "seq_bw_bytes_per_s": seq.get("bw_bytes_per_s")})
        probes = [p for p in (disk_probe(cfg, fio=fio) for _ in range(VM_PROBES)) if p]
        measured["probes_iops"] = probes
        data["ssd"]["iops"] = float(statistics.median(probes)) if probes else lim["best_iops"]
        if qd1.get("available") and qd1.get("lat_s"):
            data["ssd"]["latency_s"] = qd1["lat_s"]
        if seq.get("available") and seq.get("bw_bytes_per_s"):
            data["ssd"]["bandwidth"] = seq["bw_bytes_per_s"]
        data["notes"] = list(data.get("notes") or []) + [
            f"measured by bench compare before its runs: IOPS the median of {len(probes)} probes "
            f"({', '.join(f'{p:,.0f}' for p in probes)}; fio random 4 KiB best {lim['best_iops']:,.0f} IOPS "
            f"at QD{lim['best_depth']}), psync QD1 {measured['qd1_latency_s']}, sequential 1 MiB "
            f"{measured['seq_bw_bytes_per_s']} B/s"]
    folder = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="lsm-gnn-vm-profile-"))
    path = folder / "vm-measured.yaml"
    write_text(path, yaml.safe_dump(data, sort_keys=False))
    return {"path": str(path), "ssd": data["ssd"], "measured": measured}


def compare(cfg, *, devices: int = 2, machines: int = 2, trainers: int = 2, systems=COMPARED, repeats: int = 1,
            records_dir: str | None = None, sweep=(), limits: bool = False, fio: str = "fio",
            progress: bool = False, scale_given: bool = True, probe_scale: bool = True,
            check_primitive: bool = True, system_scales: dict | None = None, busy: bool = False) -> dict:
    """Run `systems` `repeats` times, interleaved and rotated; with `sweep`, once more at each step multiple."""
    from tqdm import tqdm

    from baselines.harness import run_system
    from lsm_gnn.config import config_to_dict, parse_config
    from lsm_gnn.datasets.format import Dataset
    from lsm_gnn.project.model import CLAIM_SYSTEMS
    from lsm_gnn.storage.pagecache import drop_file_cache
    from lsm_gnn.utils.errors import LsmGnnError

    systems = list(systems)
    order = rotated_order(systems, repeats)
    emulated = cfg.train.accelerator == "emulated"
    emulated_storage = cfg.storage.device == "emulated"
    S = cfg.emulation.time_scale
    measured_profile = None
    if emulated_storage:
        from lsm_gnn.storage.device_model import load_device_profile

        prof = load_device_profile(cfg.storage.device_profile)
        if prof.measured_by == "fio":  # `vm`: this disk as fio measures it now, in this run
            measured_profile = measure_vm_profile(cfg, prof, fio=fio, out_dir=records_dir)
            d = config_to_dict(cfg)
            d["storage"]["device_profile"] = measured_profile["path"]
            cfg = parse_config(d, "<bench compare: the vm profile measured>")
    scale_choice = None
    host_speed = None
    if emulated_storage:
        from lsm_gnn.project.profiles import load_profile

        host_speed = cfg.emulation.host_speed if cfg.emulation.host_speed is not None \
            else load_profile(cfg.emulation.hardware_profile).cpu.host_time_factor
        if probe_scale:  # a scale too small for the profile is found before the runs, not after them
            from lsm_gnn.testbed import charges

            scale_choice = choose_scale(cfg, given=scale_given, host_speed=host_speed,
                                        storage=any(charges(s, "ssd") for s in systems))
            if scale_choice["raised"]:
                d = config_to_dict(cfg)
                d["emulation"]["time_scale"] = scale_choice["time_scale"]
                cfg = parse_config(d, "<bench compare: the time scale raised by the probe>")
                S = cfg.emulation.time_scale
    scales = [float(s) for s in sweep] if emulated else []
    feat = Dataset(cfg.dataset.path).features().path
    runs: dict[str, list] = {s: [] for s in systems}
    sweep_runs: dict[str, dict] = {s: {} for s in systems}
    total = repeats * len(systems) + len(scales) * len(systems)
    bar = tqdm(total=total, desc="bench compare", unit="run", disable=not progress or not sys.stderr.isatty())

    failures = []
    claim_records: list = []
    # the disk's rate before every run, and fio's limit before the first (an emulated device reads
    # the page cache: its rate is the model's, and its copy must stay resident)
    probe = emulated and limits and not emulated_storage
    fio_before = fio_limit(cfg, fio=fio) if probe else None

    def one(system, c, tag):
        iops = disk_probe(cfg, fio=fio) if probe else None
        if not emulated_storage or system not in EMULATED_STORAGE:
            # every run starts with the feature file out of the page cache (but the copy an emulated
            # device serves from, which its store warms when it opens)
            drop_file_cache(feat)
        path = str(Path(records_dir) / f"{system}-{tag}.json") if records_dir else None
        try:
            rec = run_system(system, c, devices=devices, machines=machines, trainers=trainers, record_path=path,
                             progress=False)
        except LsmGnnError as e:  # one failed run must not lose the others: it is reported, not summarised
            failures.append({"system": system, "run": tag, "error": f"{type(e).__name__}: {e}"})
            bar.update()
            return None
        bar.update()
        if emulated_storage and system in CLAIM_SYSTEMS:  # projected against its emulation after the runs
            claim_records.append((rec, path or f"{system}-{tag}"))
        return {**summarise_run(rec), "disk_iops_before": iops, "round": tag, "seed": c.train.seed}

    # a system at its own time scale (the issue allows it where the dilation check shows it makes no
    # difference): Dist-DGL's host work charged at S x f x its CPU time takes S times its CPU to run
    own = {k: float(v) for k, v in (system_scales or {}).items() if k in systems}
    system_probes = {}
    if emulated_storage and probe_scale:
        # a system whose GPU stages this machine's engine runs: its own short run finds the scale
        # (LSM-GNN's cache work: 55-90 ms of CPU a batch-1024 fetch against the H200's ~0.85 ms)
        from lsm_gnn.testbed import charges

        for s in systems:
            if charges(s, "gpu"):
                ch = choose_system_scale(cfg, s, own.get(s, S), given=s in own, devices=devices,
                                         machines=machines, trainers=trainers)
                own[s] = ch["time_scale"]
                system_probes[s] = ch

    def at_scale(c, system):
        if system not in own:
            return c
        return c.model_copy(update={"emulation": c.emulation.model_copy(update={"time_scale": own[system]})})

    seeds = [run_seed(cfg.train.seed, r) for r in range(repeats)]
    import contextlib

    from lsm_gnn.bench.validate import busy_core

    # replication under load (issue 43's validation): one core kept busy by another process for the runs
    with (busy_core() if busy else contextlib.nullcontext()):
        for r, rnd in enumerate(order):
            c = with_seed(cfg, seeds[r])
            for s in rnd:
                res = one(s, at_scale(c, s), f"r{r}")
                if res is not None:
                    runs[s].append(res)
    for scale in scales:
        d = config_to_dict(with_seed(cfg, seeds[0]))  # the sweep's runs: round 0's batches
        d["train"]["accelerator_scale"] = scale * cfg.train.accelerator_scale
        c = parse_config(d, f"<sweep x{scale:g}>")
        for s in systems:
            res = one(s, c, f"x{scale:g}")
            if res is not None:
                sweep_runs[s][scale] = res
    bar.close()

    out = {"benchmark": "compare", "devices": devices, "machines": machines, "trainers_per_machine": trainers,
           "warmup_iters": cfg.train.warmup_iters, "timed_iters": cfg.train.timed_iters, "repeats": repeats,
           "order": order, "spread_limit": SPREAD_LIMIT,
           "seeds": {"base": cfg.train.seed, "by_round": seeds, "rule": "numpy SeedSequence([base, round])"},
           "accelerator": "real" if not emulated else
           {"profile": cfg.train.accelerator_profile, "scale": cfg.train.accelerator_scale},
           "time_scale": S, "time_label": emulation_label(S), "host_speed": host_speed,
           "scale_probe": scale_choice, "system_scale_probes": system_probes,
           "busy_core": bool(busy),
           "time_scale_by_system": {s: own.get(s, S) for s in systems},
           "hardware_profile": cfg.emulation.hardware_profile,
           "storage_device": cfg.storage.device,
           "storage_profile": (prof.name if emulated_storage else None),
           "storage_profile_measured": measured_profile,
           "systems": {s: summarise_system(v) for s, v in runs.items() if v}, "failures": failures}
    lsm = out["systems"].get("lsm", {}).get("epoch_steady_s", {}).get("median")
    for s in systems:
        if s == "lsm" or s not in out["systems"]:
            continue
        v = out["systems"][s]["epoch_steady_s"]["median"]
        out[f"{s}_vs_lsm_epoch"] = (v / lsm) if (v and lsm) else None
    if "lsm" in out["systems"]:
        out["per_round_vs_lsm"] = per_round_ratios(runs)
    out["flagged"] = [f"{s}.{k}" for s, v in out["systems"].items() for k in ("epoch_steady_s", "au")
                      if v[k]["flagged"]]
    if probe:
        every = [r["disk_iops_before"] for v in runs.values() for r in v]
        out["disk"] = {"iops_before_runs": spread_of(every),
                       "epoch_vs_disk_time_r": {s: correlation([r["epoch_steady_s"] for r in v],
                                                               [1 / r["disk_iops_before"] if r["disk_iops_before"]
                                                                else None for r in v])
                                                for s, v in runs.items() if v}}
    if emulated and "lsm" in out["systems"]:
        L = out["systems"]["lsm"]
        lim = None
        if limits and emulated_storage:  # the storage term is the device model's: only the link is measured
            from lsm_gnn.bench.exchange import exchange_bandwidth

            xb = (L["exchange_bytes_per_iteration"] or 0) / devices
            lim = {"fio": None, "exchange": exchange_bandwidth(cfg, xb, devices=devices) if xb else None}
        elif limits:
            lim = device_limits(cfg, fio=fio, exchange_bytes_per_rank=(L["exchange_bytes_per_iteration"] or 0) / devices,
                                devices=devices, fio_before=fio_before)
        if lim is not None:
            out["limits"] = lim
            out["lsm_floor"] = lsm_floor(L, lim, devices, time_scale=S, queue_depth=cfg.storage.queue_depth,
                                         device=load_device_profile(cfg.storage.device_profile)
                                         if emulated_storage else None)
            fe = out["lsm_floor"]["epoch_s"]
            out["lsm_vs_floor"] = lsm / fe if (lsm and fe) else None
        iso, di = out["systems"].get("isolated"), out["systems"].get("direct")

        def le(a, b):  # a target from valid runs only: None where either side has none
            return None if a is None or b is None else a <= b

        out["targets"] = {
            "lsm_epoch_le_isolated": None if not iso else le(lsm, iso["epoch_steady_s"]["median"]),
            "lsm_epoch_le_direct": None if not di else le(lsm, di["epoch_steady_s"]["median"]),
            "lsm_au_ge_isolated": None if not iso else le(iso["au"]["median"], L["au"]["median"]),
            "every_spread_within_5pct": None if any(v["epoch_steady_s"]["median"] is None
                                                    for v in out["systems"].values())
            else not any(v["epoch_steady_s"]["flagged"] for v in out["systems"].values()),
            "every_run_valid": not any(v["invalid_runs"] for v in out["systems"].values()),
            "lsm_within_1.25x_floor": None if out.get("lsm_vs_floor") is None else out["lsm_vs_floor"] <= 1.25}
    if claim_records:  # the projection of lsm's and distdgl's emulated runs against their emulated epochs
        from lsm_gnn.bench.validate import projection_rows

        try:
            out["projection_vs_emulation_runs"] = projection_rows(claim_records)
        except LsmGnnError as e:
            failures.append({"system": "projection", "run": "projection_vs_emulation", "error": f"{type(e).__name__}: {e}"})
    out["validation"] = validation([out])
    if emulated_storage and check_primitive:  # the charging primitive, checked in the same run (S = 1, 16, 64)
        from lsm_gnn.bench.validate import primitive_check

        out["validation"]["primitive"] = primitive_check(host_speed)
    if scales:
        from lsm_gnn.accelerator import AU_TARGET

        out["sweep"] = {s: {f"{k:g}": {"au": v["au"], "epoch_steady_s": v["epoch_steady_s"],
                                       "busy_s_per_iteration": v["busy_s_per_iteration"], "bound": v["bound"]}
                            for k, v in pts.items()} for s, pts in sweep_runs.items()}
        out["sustained_scale"] = {s: min((k for k, v in pts.items() if (v["au"] or 0) >= AU_TARGET), default=None)
                                  for s, pts in sweep_runs.items()}
    return out


def _fmt(v, spec=".1f", none="n/a"):
    return none if v is None else format(v, spec)


def print_compare(res: dict) -> None:
    acc = res["accelerator"]
    what = "real compute (the model trains on the CPU)" if acc == "real" else \
        f"emulated accelerators: {acc['profile']}" + (f" x{acc['scale']:g}" if acc["scale"] != 1 else "")
    click.echo(f"{what}; {res['repeats']} run(s) per system, interleaved and rotated; "
               f"{res['warmup_iters']} warm-up + {res['timed_iters']} timed iterations per epoch, epoch extrapolated")
    if res.get("storage_device") == "emulated":
        m = res.get("storage_profile_measured")
        click.echo(f"storage: emulated device {res['storage_profile']}"
                   + (f" (filled from fio now: {m['ssd']['iops']:,.0f} IOPS, the median of the disk probes, {m['ssd']['latency_s'] * 1e6:.1f} us at QD1)"
                      if m else "") + f"; every time {res['time_label']} (divided back by {res['time_scale']:g})")
    elif res.get("time_scale", 1) != 1:
        click.echo(f"storage: the real disk; every time {res['time_label']}")
    click.echo(f"{'system':9s}{'steady epoch s (median [min, max], spread)':>46s}{'AU':>8s}{'samples/s':>11s}"
               f"{'storage rows/it':>17s}{'memory MiB':>12s}  bound")
    for s, v in res["systems"].items():
        e, mem = v["epoch_steady_s"], v.get("memory") or {}
        flag = " !" if e["flagged"] else ""
        click.echo(f"{s:9s}{_fmt(e['median']):>14s} [{_fmt(e['min'])}, {_fmt(e['max'])}], "
                   f"{_fmt(e['spread'] and 100 * e['spread'])} %{flag:2s}".ljust(55)
                   + f"{_fmt(v['au']['median'] and 100 * v['au']['median'], '.1f', '-'):>6s} %"
                   f"{_fmt(v['samples_per_s']['median'], ',.0f'):>11s}{_fmt(v['storage_rows_per_iteration'], ',.0f'):>17s}"
                   f"{mem.get('all_devices_bytes', 0) / 2**20:>12,.0f}  {v['bound']}")
    for k, v in res.items():
        if k.endswith("_vs_lsm_epoch"):
            pr = (res.get("per_round_vs_lsm") or {}).get(k[: -len("_vs_lsm_epoch")])
            per = "" if not pr else (f"; per round {', '.join(f'{x:.3f}' for x in pr['values'])}: median "
                                     f"{pr['median']:.3f}x, spread {100 * pr['spread']:.1f} %")
            click.echo(f"{k}: {'n/a' if v is None else f'{v:.3f}x'}{per}")
    if res.get("disk") and res["disk"]["iops_before_runs"]["runs"]:
        d = res["disk"]["iops_before_runs"]
        rs = ", ".join(f"{s} {_fmt(r, '+.2f')}" for s, r in res["disk"]["epoch_vs_disk_time_r"].items())
        click.echo(f"disk before each run (fio 4 KiB random, QD{max(FIO_DEPTHS)}, 2 s): median {d['median']:,.0f} IOPS "
                   f"[{d['min']:,.0f}, {d['max']:,.0f}], spread {100 * d['spread']:.1f} %; correlation of each "
                   f"system's epoch with 1 / IOPS: {rs}")
    if res.get("lsm_floor"):
        f = res["lsm_floor"]
        fio_ = (res.get("limits") or {}).get("fio") or {}
        if fio_.get("by_moment"):
            click.echo("fio's best IOPS: " + ", ".join(f"{k} the runs {_fmt(v.get('best_iops'), ',.0f')}"
                                                       for k, v in fio_["by_moment"].items())
                       + f" (the floor takes the best: {fio_.get('best_moment')})")
        click.echo(f"lsm floor per iteration: step {_fmt(f['accelerator_step_s'], '.4f')} s, storage "
                   f"{_fmt(f['storage_s'], '.4f')} s, exchange {_fmt(f['exchange_s'], '.4f')} s -> "
                   f"{_fmt(f['epoch_s'])} s per epoch ({f['bound']}); lsm_vs_floor {_fmt(res.get('lsm_vs_floor'), '.2f')}x")
    for s, v in res["systems"].items():
        for bad in v.get("invalid_runs") or []:
            click.echo(f"INVALID {s} run {bad['run']}: {'; '.join(bad['causes'])}")
        late, cs = v.get("lateness_fraction") or {}, v.get("cpu_share") or {}
        if late.get("median") is not None or cs.get("median") is not None:
            click.echo(f"{s}: " + (f"pacing late {_fmt(100 * late['median'], '.2f')} % of storage time (median over "
                                   f"runs, [{_fmt(100 * late['min'], '.2f')}, {_fmt(100 * late['max'], '.2f')}]); "
                                   if late.get("median") is not None else "")
                       + f"CPU share {_fmt(cs.get('median'), '.2f')} cores busy over the run's wall time")
    print_validation(res.get("validation"))
    for f in res.get("failures") or []:
        click.echo(f"FAILED {f['system']} run {f['run']}: {f['error']}")
    if res.get("flagged"):
        click.echo(f"spread above {res['spread_limit']:.0%}: {', '.join(res['flagged'])}")
    if res.get("sustained_scale"):
        for s, k in res["sustained_scale"].items():
            pts = ", ".join(f"x{x}: {100 * (p['au'] or 0):.0f} %" for x, p in res["sweep"][s].items())
            click.echo(f"{s}: AU {pts}; fastest accelerator at AU >= 90 %: "
                       f"{'slower than every point' if k is None else f'x{k:g} the profile step'}")
    if res.get("targets"):
        click.echo("targets: " + ", ".join(f"{k} {'met' if v else ('n/a' if v is None else 'missed')}"
                                          for k, v in res["targets"].items()))


def _systems(text: str | None, emulated: bool) -> tuple[str, ...]:
    from baselines.harness import SYSTEMS

    if not text:
        return EMULATED if emulated else COMPARED
    out = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in out if s not in SYSTEMS]
    if bad or not out:
        raise click.BadParameter(f"unknown system {bad[0] if bad else text!r}; choose from {', '.join(SYSTEMS)}",
                                 param_hint="--systems")
    return out


def _scales(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated step multiples, found {text!r}", param_hint="--sweep") \
            from None
    if any(v <= 0 for v in vals):
        raise click.BadParameter(f"step multiples must be positive, found {text!r}", param_hint="--sweep")
    return vals


@click.command("compare")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--dataset", default=None, help="Dataset directory.")
@click.option("--devices", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--machines", type=int, default=2, show_default=True)
@click.option("--trainers", type=int, default=2, show_default=True)
@click.option("--warmup", type=int, default=5, show_default=True, help="Warm-up iterations per epoch.")
@click.option("--timed", type=int, default=10, show_default=True, help="Timed iterations per epoch.")
@click.option("--accelerator", default=None, metavar="PROFILE",
              help="Emulated accelerators (a100, h200 or a YAML profile); default: real compute on the CPU.")
@click.option("--systems", default=None, help="Comma-separated systems (default: all six emulated, or "
                                              "lsm,distdgl,mmap,direct with real compute).")
@click.option("--repeats", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Runs of every system, interleaved and rotated (the figures are their medians).")
@click.option("--sweep", default=None, metavar="K1,K2,...",
              help="Emulated only: run every system once more at each multiple of the profile's step time.")
@click.option("--limits/--no-limits", default=True, show_default=True,
              help="Emulated only: measure fio's IOPS and the exchange bandwidth for LSM-GNN's floor.")
@click.option("--fio", "fio_path", default="fio", show_default=True)
@click.option("--storage-device", type=click.Choice(["real", "emulated"]), default=None,
              help="storage.device: the real disk, or the emulated storage device (default: the config's, real).")
@click.option("--storage-profile", default=None, metavar="NAME",
              help="storage.device_profile: vm (fio-measured in this run), paper, optane, or a YAML file.")
@click.option("--time-scale", type=float, default=None, metavar="S",
              help="emulation.time_scale: emulated devices S times slower, accelerators' steps S times longer; "
                   "every time reported divided back by S.")
@click.option("--system-scale", "system_scales", multiple=True, metavar="SYSTEM=S",
              help="Run SYSTEM at its own time scale S (e.g. distdgl=8: its host work, charged at S x f x its CPU "
                   "time, then takes S times its CPU to run); the JSON states each system's S.")
@click.option("--host-speed", "host_speed", type=click.FloatRange(min=0.0, min_open=True), default=None, metavar="F",
              help="emulation.host_speed: the paper's host core's time over this machine's (the emulated testbed "
                   "charges host stages at S x F x their thread CPU time); default: the hardware profile's.")
@click.option("--busy-core", "busy", is_flag=True,
              help="Keep one core busy with another process (a spinning loop) during the runs: the replication "
                   "check under load.")
@click.option("--validate-against", "validate_against", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Other bench compare outputs (JSON) for the validation's dilation and emulator-vs-real checks.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE")
@click.option("--records", "records_dir", default=None, callback=output_option("into", "records folder"),
              help="Also write each run's record here.")
@click.option("--output", default=None, callback=output_option(),
              help="Also write the JSON object to this file (atomically).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_compare(config_path, dataset, devices, machines, trainers, warmup, timed, accelerator, systems, repeats,
                  sweep, limits, fio_path, storage_device, storage_profile, time_scale, system_scales, host_speed,
                  busy, validate_against, overrides,
                  records_dir, output, as_json):
    """Every system at equal memory, replicated and interleaved; with --accelerator, AU and the floor."""
    from lsm_gnn.config import load_config

    sets = [f"train.warmup_iters={warmup}", f"train.timed_iters={timed}", "train.epochs=2", *overrides]
    if dataset:
        sets.append(f"dataset.path={dataset}")
    if accelerator:
        sets += ["train.accelerator=emulated", f"train.accelerator_profile={accelerator}"]
    if storage_device:
        sets.append(f"storage.device={storage_device}")
    if storage_profile:
        sets.append(f"storage.device_profile={storage_profile}")
    if time_scale is not None:
        sets.append(f"emulation.time_scale={time_scale}")
    if host_speed is not None:
        sets.append(f"emulation.host_speed={host_speed}")
    others = load_outputs(validate_against)
    cfg = load_config(config_path, sets)
    scales = _scales(sweep)
    if scales and cfg.train.accelerator != "emulated":
        raise click.BadParameter("a sweep of the step time needs emulated accelerators (--accelerator)",
                                 param_hint="--sweep")
    if records_dir:
        Path(records_dir).mkdir(parents=True, exist_ok=True)
    own = {}
    for item in system_scales:
        name, _, val = item.partition("=")
        try:
            own[name.strip()] = float(val)
        except ValueError:
            raise click.BadParameter(f"expected SYSTEM=S, found {item!r}", param_hint="--system-scale") from None
        if own[name.strip()] <= 0:
            raise click.BadParameter(f"a time scale must be positive, found {item!r}", param_hint="--system-scale")
    given = time_scale is not None or any(o.split("=", 1)[0].strip() == "emulation.time_scale" for o in overrides)
    res = compare(cfg, devices=devices, machines=machines, trainers=trainers,
                  systems=_systems(systems, cfg.train.accelerator == "emulated"), repeats=repeats,
                  records_dir=records_dir, sweep=scales, limits=limits, fio=fio_path, progress=not as_json,
                  scale_given=given, system_scales=own, busy=busy)
    if others:
        prim = (res.get("validation") or {}).get("primitive")
        res["validation"] = validation([res, *others])
        if prim is not None:
            res["validation"]["primitive"] = prim
    if emit(res, output, as_json):
        return
    print_compare(res)



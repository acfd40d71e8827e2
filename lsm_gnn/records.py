"""Run records: one JSON document per run, in the schema of schemas/run_record.schema.json.

Every system (lsm-gnn, isolated caches, plain loaders, Dist-DGL, the in-memory ideal) and every
simulator or benchmark run writes one, so the reports compare like with like. The record's blocks
are built here once (docs/results-schema.md, "Rules"): the system name, the dataset, a training
worker's metrics block, the accelerator and throughput, the storage device and the emulation; and
its file: schema, claim, atomic write, read. What each figure means and how it is computed from
counts and times is lsm_gnn.metrics (a leaf); the merge of G ranks' records is the launcher's
(lsm_gnn.ranks.merge); the loop, the integrations, the harness and the simulator call both.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import jsonschema
import numpy as np

from lsm_gnn.metrics import (IO_KEYS, ITERATION_KEYS, ROW_KEYS, STAGES, TIMED_WINDOW, epoch_times, exposed_times,
                             hidden_fetch_fraction, hit_rates, mean_times, measured_epochs, steady_epochs,
                             sum_counts)
from lsm_gnn.utils.atomic import make_parent, refused, remove_leftovers, write_json
from lsm_gnn.utils.errors import DataError, OutputError
from lsm_gnn.utils.locks import exclusive
from lsm_gnn.utils.outpaths import check_output
from lsm_gnn.utils.machine import git_commit, hardware, versions

if TYPE_CHECKING:
    from lsm_gnn.config import RunConfig

SCHEMA_VERSION = 1



# ---- the system ---------------------------------------------------------------------------------------
def system_name(cfg) -> str:
    """The record's `system` for a run config: memory (the ideal), the plain reader's name without a
    cache, isolated (per-device caches on several devices), else lsm."""
    if not cfg.cache.enabled:
        return cfg.storage.reader
    if cfg.distributed.devices > 1 and cfg.distributed.mode == "isolated":
        return "isolated"
    return "lsm"


def numeric_stats(stats: dict) -> dict:
    """The numbers of a source's stats (ints and floats; strings and flags left out), for records."""
    out = {}
    for k, v in stats.items():
        if isinstance(v, (bool, np.bool_)):
            continue
        if isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = float(v)
    return out


# ---- a training worker's metrics (lsm-gnn train and the integrations' loaders) ------------------------
def epoch_window(items: list, counts: list, shapes: list) -> dict:
    """One epoch's timed window: stage means per iteration (with wall and wait), their exposed view,
    the hidden fetch fraction, rows and io summed over its batches (`counts`: one per batch), and
    `batches` (`shapes`: one (seeds, input rows, edges, busy s) per batch; batch_window)."""
    mean = mean_times(items)
    return {"per_iteration": {k: mean[k] for k in ITERATION_KEYS}, "per_iteration_exposed": exposed_times(mean),
            "hidden_fetch_fraction": hidden_fetch_fraction(items), "rows": sum_counts(counts, ROW_KEYS),
            "io": sum_counts(counts, IO_KEYS), "batches": batch_window(shapes, [it["wall"] for it in items])}


def dataset_block(dataset) -> dict:
    """metrics.dataset: where and what the dataset is (an lsm_gnn.datasets.format.Dataset)."""
    lay = dataset.features()
    return {"path": os.fspath(dataset.root), "name": dataset.name, "nodes": dataset.num_nodes(),
            "edges": dataset.num_edges(), "feature_bytes": lay.num_rows * lay.row_bytes}


def training_metrics(epochs: list[dict], iterations: list[list], *, rank: int, timed: bool, warmup_iters: int,
                     timed_window: dict, accelerator: dict, host_to_device_bytes: int, source: dict,
                     memory: dict, preprocessing_s: float | None, eval_s: float) -> dict:
    """The metrics one training worker's record shares with every other: rows and hit rates, traffic,
    times (stage means over the measured epochs' iterations, cold and steady epochs, the timed
    window, metrics.time.timed_window), the accelerator (`accelerator`: accelerator_block's arguments but the windows: `emulated`,
    `device`, `overshoot_s`), throughput, the source and memory blocks as given, and this rank's
    block. `epochs` are the epochs' entries (epoch_window's fields and `epoch_s`, `cold_estimate_s`),
    `iterations` each epoch's timed iterations."""
    n = len(epochs)
    steady = steady_epochs(n, timed=timed, warmup_iters=warmup_iters)
    measured = measured_epochs(n, timed=timed, warmup_iters=warmup_iters)
    times = epoch_times(epochs, timed=timed, warmup_iters=warmup_iters)
    chosen = [it for i in measured for it in iterations[i]]
    mean = mean_times(chosen)
    rows = sum_counts((ep["rows"] for ep in epochs), ROW_KEYS)
    io = sum_counts((ep["io"] for ep in epochs), IO_KEYS)
    time_m = {"per_iteration": {k: mean.get(k, 0.0) for k in STAGES}, "per_iteration_wall": mean["wall"],
              "per_iteration_wait": mean["wait"], "per_iteration_exposed": exposed_times(mean), **times,
              "preprocessing_s": preprocessing_s, "eval_s": eval_s, "hidden_fetch_fraction": hidden_fetch_fraction(chosen),
              TIMED_WINDOW: {**timed_window, "warmup_iters": warmup_iters, "steady_epochs": steady}}
    acc = accelerator_block(accelerator.get("emulated"), accelerator["device"],
                            [epochs[i]["batches"] for i in measured], overshoot_s=accelerator.get("overshoot_s"))
    return {
        "rows": rows, "hit_rate": hit_rates(rows),
        "traffic": {"storage_bytes": io["bytes_read"], "storage_io_ops": io["io_ops"], "device_exchange_bytes": 0,
                    "host_to_device_bytes": int(host_to_device_bytes)},
        "time": time_m, "source": source, "accelerator": acc, "memory": memory, "throughput": throughput(acc),
        "ranks": {str(rank): {"rows": rows, "time": {**times, "per_iteration": dict(time_m["per_iteration"])},
                              "storage_bytes": io["bytes_read"], "accelerator": acc}},
    }


WINDOW_KEYS = ("iterations", "seeds", "input_rows", "edges", "busy_s", "wall_s")


def batch_window(shapes: list, walls: list) -> dict:
    """One timed window of a worker: seeds, input rows, edges and accelerator busy seconds summed
    over its batches (`shapes`: one (seeds, input rows, edges, busy s) per batch), its wall time."""
    seeds, rows, edges, busy = (sum(x) for x in zip(*shapes)) if shapes else (0, 0, 0, 0.0)
    return {"iterations": len(shapes), "seeds": int(seeds), "input_rows": int(rows), "edges": int(edges),
            "busy_s": float(busy), "wall_s": float(sum(walls))}


def accelerator_block(emulated: dict | None, device: str, windows: list[dict], overshoot_s: float | None = None) -> dict:
    """metrics.accelerator of one worker: real or emulated (`emulated`: the accelerator's own record:
    profile, constants), AU over its timed windows (busy time / wall time, MLPerf Storage's
    definition; null for real compute) and the mean batch shape."""
    from lsm_gnn.accelerator import utilisation

    tot = {k: sum(w[k] for w in windows) for k in WINDOW_KEYS}
    n = max(1, tot["iterations"])
    out = {"mode": "real", "device": device} if emulated is None else dict(emulated)
    out.update({"busy_s": tot["busy_s"] if emulated is not None else None, "wall_s": tot["wall_s"],
                "au": utilisation(tot["busy_s"], tot["wall_s"]) if emulated is not None else None,
                "iterations": tot["iterations"], "seeds": tot["seeds"],
                "seeds_per_iteration": tot["seeds"] / n, "input_rows_per_iteration": tot["input_rows"] / n,
                "edges_per_iteration": tot["edges"] / n})
    if emulated is not None and overshoot_s is not None:
        out["overshoot_s"] = overshoot_s
    return out


def merge_accelerators(blocks: list[dict]) -> dict:
    """metrics.accelerator over workers: AU = all busy time / all wall time (the accelerators' share
    of the run), each worker's AU and the lowest, batch shape per worker and iteration."""
    from lsm_gnn.accelerator import utilisation

    out = dict(blocks[0])
    if out.get("mode") == "emulated":
        busy, wall = sum(b["busy_s"] for b in blocks), sum(b["wall_s"] for b in blocks)
        out.update({"busy_s": busy, "wall_s": wall, "au": utilisation(busy, wall),
                    "au_per_worker": [b["au"] for b in blocks], "au_min": min(b["au"] for b in blocks)})
    else:
        out["wall_s"] = sum(b["wall_s"] for b in blocks)
    n = max(1, sum(b["iterations"] for b in blocks))
    out["iterations"] = sum(b["iterations"] for b in blocks)
    out["seeds"] = sum(b["seeds"] for b in blocks)
    for k in ("seeds_per_iteration", "input_rows_per_iteration", "edges_per_iteration"):
        out[k] = sum(b[k] * b["iterations"] for b in blocks) / n
    out["workers"] = len(blocks)
    return out


def throughput(acc: dict, per_worker: list[dict] | None = None) -> dict:
    """Samples (seed nodes) and iterations per second over the timed windows: one worker's, or the
    sum over workers that run side by side."""
    if per_worker:
        parts = [throughput(b) for b in per_worker]
        return {k: sum(p[k] for p in parts) if all(p[k] is not None for p in parts) else None
                for k in ("samples_per_s", "iterations_per_s")}
    wall = acc.get("wall_s") or 0.0
    return {"samples_per_s": acc["seeds"] / wall if wall > 0 else None,
            "iterations_per_s": acc["iterations"] / wall if wall > 0 else None}


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(resources.files("lsm_gnn.schemas").joinpath("run_record.schema.json").read_text())


def new_record(kind: str, system: str, config: dict) -> dict:
    """A record skeleton with provenance filled in; callers fill `metrics` (and `epochs`)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "system": system,
        "status": "complete",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "config": config,
        "metrics": {},
        "epochs": [],
        "versions": versions(),
        "git_commit": git_commit(),
        "hardware": hardware(),
        "failure": None,
    }


def validate_record(record: dict, source: str = "<record>") -> None:
    try:
        jsonschema.validate(record, schema())
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise DataError(source, f"run record field {where}: {e.message}") from None


@contextlib.contextmanager
def claim_record(path: str | os.PathLike | None) -> Iterator[Path | None]:
    """Before a run starts: make sure its record can be written at `path`, and hold the record's
    writer lock until the block ends (a second run on the same path is refused with a BusyError,
    not left to overwrite the first one's record). Checked: `path` is not a folder, its folder
    exists or can be made, and a file can be created and removed in it (a read-only or full file
    system fails here, before the run, with an OutputError naming the path). Leftovers of a killed
    writer of the record are removed. `None`: no record, nothing to claim."""
    if path is None:
        yield None
        return
    checked = check_output(path, "dir" if os.path.isdir(path) and not os.path.islink(path) else "file", "run record")
    if checked.is_dir():
        raise OutputError(path, "the run record's path is a folder; give a file name (e.g. run.json)")
    path = checked
    folder = make_parent(path)
    with exclusive(path, "run record"):
        with refused(path, "the run record cannot be written here"), \
                tempfile.NamedTemporaryFile(prefix=f".{path.name}.", suffix=".probe.partial", dir=folder) as f:
            f.write(b"{}\n")
            f.flush()
            os.fsync(f.fileno())
        remove_leftovers(path)
        yield path


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Validate and write atomically (a reader never sees a half-written record)."""
    validate_record(record, os.fspath(path))
    write_json(path, record)
    return Path(path)


def read_record(path: str | os.PathLike) -> dict:
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(path, f"cannot read run record: {e}") from None
    validate_record(rec, os.fspath(path))
    return rec


# ---- emulation: the storage device and the time scale ---------------------------------------------
def emulation_label(time_scale: float) -> str:
    """How every time of a dilated run is labelled once divided back by its scale."""
    return f"emulated at scale {time_scale:g}"


def storage_block(rec: dict, device: str, profile: dict | None, time_scale: float) -> dict:
    """metrics.storage: which storage device the run read (real or emulated, with its profile) and,
    emulated, the pacing over every rank's store (lsm_gnn.storage.emulated.emulation_summary:
    storage time, lateness total / p99, valid or the cause)."""
    m = rec.get("metrics") or {}
    src = m.get("source") or {}
    raws = src.get("emulation_per_rank")
    if raws is None:
        one = (src.get("storage_path") or {}).get("emulation")
        raws = (one or {}).get("raw")
    out = {"device": device}
    if device == "emulated":
        out["profile"] = profile
        if raws:
            from lsm_gnn.storage.emulated import emulation_summary

            out["emulation"] = emulation_summary(raws, time_scale)
        else:  # mmap's page faults, memory's RAM, Dist-DGL's KVStore: nothing went through the device
            out["emulation"] = None
            out["note"] = "this system's reads do not go through the emulated device (its storage is real or none)"
    return out


def emulation_records(rec: dict, cfg: "RunConfig", cpu: dict) -> None:
    """metrics.storage (the device the run read, real or emulated, and its pacing) and
    metrics.emulation (the time scale, every time divided back by it, the CPU share, valid or why
    not) of a finished run's record, whoever ran it (`lsm-gnn train`, a rank launch, the baselines'
    harness); `cpu`: lsm_gnn.utils.machine.cpu_time_around's figures. Written again by a caller
    that measured a wider span (the harness: the whole run, its preprocessing included)."""
    st = cfg.storage
    profile = None
    if st.device == "emulated":
        from lsm_gnn.storage.device_model import load_device_profile

        profile = load_device_profile(st.device_profile).as_record(cfg.emulation.time_scale)
    m = rec.setdefault("metrics", {})
    m["storage"] = storage_block(rec, st.device, profile, cfg.emulation.time_scale)
    m["emulation"] = emulation_block(rec, cfg.emulation.time_scale, cpu.get("cpu_s"), cpu.get("wall_s"))


def emulation_block(rec: dict, time_scale: float, cpu_s: float | None, wall_s: float | None) -> dict:
    """metrics.emulation: the time scale S, every time of the record divided back by S (epochs,
    stages per iteration, samples per second multiplied), labelled; the CPU share (the run's CPU
    seconds over its wall time, all processes: how much of the run was real CPU work, which
    dilation makes look S times faster); valid unless the storage pacing was late (metrics.storage)."""
    m = rec.get("metrics") or {}
    t = m.get("time") or {}
    S = float(time_scale)

    def div(v):
        return None if v is None else v / S

    out = {"time_scale": S, "label": emulation_label(S),
           "epoch_steady_s": div(t.get("epoch_steady_s")), "epoch_cold_s": div(t.get("epoch_cold_s")),
           "per_iteration": {k: div(v) for k, v in (t.get("per_iteration") or {}).items()},
           "per_iteration_wall": div(t.get("per_iteration_wall")),
           "samples_per_s": None if (m.get("throughput") or {}).get("samples_per_s") is None
           else m["throughput"]["samples_per_s"] * S,
           "cpu_s": cpu_s, "wall_s": wall_s,
           "cpu_share": (cpu_s / wall_s) if (cpu_s is not None and wall_s) else None}
    emu = (m.get("storage") or {}).get("emulation") or {}
    causes = [emu["invalid_cause"]] if emu.get("valid") is False else []
    tb = m.get("testbed") or {}  # the stages charged at their parts (lsm_gnn.storage.charge)
    causes += list(tb.get("invalid_causes") or []) if tb.get("valid") is False else []
    out["valid"], out["invalid_causes"] = not causes, causes
    return out

"""Run records: one JSON document per run, in the schema of schemas/run_record.schema.json.

Every system (lsm-gnn, isolated caches, plain loaders, Dist-DGL, the in-memory ideal) and every
simulator or benchmark run writes one, so the reports compare like with like. Every rule about a
record is written here once (docs/results-schema.md, "Rules"): the row keys and stages, the system
name, the hit rates, the cold and steady epochs, a training worker's metrics block and the merge
over ranks; the loop, the integrations, the merge, the harness and the simulator call them.
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

from lsm_gnn.utils.atomic import make_parent, refused, remove_leftovers, write_json
from lsm_gnn.utils.errors import DataError, OutputError
from lsm_gnn.utils.locks import exclusive
from lsm_gnn.utils.machine import git_commit, hardware, versions

if TYPE_CHECKING:
    from lsm_gnn.config import RunConfig

SCHEMA_VERSION = 1

HIT_KEYS = ("local_hits", "peer_hits", "victim_hits")
"""metrics.rows' rows served from a cache tier: the device caches (local, a peer's) and the victim buffer."""
ROW_KEYS = ("requests", "distinct") + HIT_KEYS + ("storage_rows",)
"""metrics.rows: what every feature source counts per batch (docs/results-schema.md)."""
IO_KEYS = ("bytes_read", "io_ops")
"""An epoch's `io`: storage bytes read (read amplification included) and read operations."""
STAGES = ("sample", "exchange_ids", "fetch_cache", "fetch_victim", "fetch_storage",
          "exchange_rows", "train", "sync", "other")
"""An iteration's stages. `train` is the accelerator's step (forward, backward, optimiser: real or
emulated); `sync` the ranks' gradient all-reduce after it, i.e. the wait for the peers
(lsm_gnn.train.sync). A record written before `sync` existed has none: read as 0, its all-reduce
inside `train`."""
FETCH_STAGES = ("fetch_cache", "fetch_victim", "fetch_storage")
"""A fetch's stages at the cache that serves it: its lookup and the loop's work around the fetch
(`fetch_cache`), the victim buffer, the storage reads."""
EXCHANGE_STAGES = tuple(s for s in STAGES if s.startswith("exchange_"))
"""The shared cache's exchange between devices (lsm_gnn.sources.shared): `exchange_ids`, the ids sent
to their owners (the fetch's and the lookahead's), and `exchange_rows`, the rows sent back. Sources
name them so in `stage_seconds()` (lsm_gnn.sources.contract); 0 where nothing is exchanged. Dist-DGL's
records put their KVStore pull in `exchange_rows`."""
FETCH_BUSY_STAGES = tuple(s for s in STAGES if s in FETCH_STAGES + EXCHANGE_STAGES)
"""The stages one fetch's wall time splits into (lsm_gnn.train.loader.fetch_split): the exchange is
fetch work the train step waits on like the cache's, so it counts with the loading side wherever a
fetch or load total is taken (the exposed view, the hidden fetch fraction)."""
ITERATION_KEYS = STAGES + ("wall", "wait")
"""One iteration's times: the stages, its wall time and how long the train step waited for inputs."""


# ---- the system ---------------------------------------------------------------------------------------
def system_name(cfg) -> str:
    """The record's `system` for a run config: memory (the ideal), the plain reader's name without a
    cache, isolated (per-device caches on several devices), else lsm."""
    if not cfg.cache.enabled:
        return cfg.storage.reader
    if cfg.distributed.devices > 1 and cfg.distributed.mode == "isolated":
        return "isolated"
    return "lsm"


# ---- hit rates: one definition per name ---------------------------------------------------------------
def served_rows(rows: dict) -> int:
    """Rows served from a cache tier (device caches and the victim buffer), not from storage: in a
    record's names local_hits + peer_hits + victim_hits; in a cache engine's (one owner's cache,
    whoever asked) hits + victim_hits."""
    if "hits" in rows:
        return int(rows["hits"]) + int(rows.get("victim_hits", 0))
    return sum(int(rows.get(k, 0)) for k in HIT_KEYS)


def hit_rates(rows: dict) -> dict:
    """metrics.hit_rate: each tier's rows as a share of the requests (duplicates in a batch
    included): local, peer, victim, storage; empty without requests."""
    req = rows.get("requests", 0)
    if not req:
        return {}
    return {"local": rows["local_hits"] / req, "peer": rows["peer_hits"] / req,
            "victim": rows["victim_hits"] / req, "storage": rows["storage_rows"] / req}


def hit_rate(rows: dict) -> float:
    """`hit_rate`: rows served from a cache tier / requests (0 without requests): the sum of
    metrics.hit_rate's local, peer and victim; the simulator's column."""
    req = int(rows.get("requests", 0))
    return served_rows(rows) / req if req else 0.0


def distinct_hit_rate(rows: dict) -> float:
    """`distinct_hit_rate`: rows served from a cache tier / distinct rows (each batch's duplicates
    coalesced first; 0 without any): a replay's and `bench cache`'s rate."""
    distinct = int(rows.get("distinct", 0))
    return served_rows(rows) / distinct if distinct else 0.0


def sum_counts(parts, keys) -> dict:
    """`keys` summed over `parts` (count dicts: batches, epochs or ranks; a missing key is 0)."""
    parts = list(parts)
    return {k: int(sum(int(p.get(k, 0)) for p in parts)) for k in keys}


# ---- the timed window ----------------------------------------------------------------------------
TIMED_WINDOW = "timed_window"
"""metrics.time's block that says what was timed (full_epoch, warmup_iters, timed_iters, ...)."""
OLD_TIMED_WINDOW = "timing_window"
"""Its name in records written before the window names were told apart (docs/architecture.md)."""


def timed_window(time_block: dict | None) -> dict:
    """The timed-window block of a record's metrics.time, under its name or its old one ({} if none)."""
    t = time_block or {}
    return t.get(TIMED_WINDOW) or t.get(OLD_TIMED_WINDOW) or {}


# ---- epochs: cold and steady ------------------------------------------------------------------------
def steady_epochs(n_epochs: int, *, timed: bool = False, warmup_iters: int = 0) -> list[int]:
    """The steady epochs: every epoch after the first (the cold one). A run of one epoch has none,
    unless that epoch is a timed window after warm-up iterations: then the window is steady."""
    if n_epochs > 1:
        return list(range(1, n_epochs))
    return [0] if n_epochs == 1 and timed and warmup_iters > 0 else []


def measured_epochs(n_epochs: int, *, timed: bool = False, warmup_iters: int = 0) -> list[int]:
    """The epochs a record's per-iteration means, AU and throughput cover: the steady ones, or every
    epoch where there is none."""
    return steady_epochs(n_epochs, timed=timed, warmup_iters=warmup_iters) or list(range(n_epochs))


def record_measured_epochs(rec: dict) -> list[int]:
    """`measured_epochs` of a written record: the steady epochs its timing window names (those
    within its epochs[]), or every epoch where it names none."""
    n = len(rec.get("epochs") or [])
    win = timed_window((rec.get("metrics") or {}).get("time"))
    steady = [int(i) for i in (win.get("steady_epochs") or []) if 0 <= int(i) < n]
    return steady or list(range(n))


def epoch_times(epochs: list[dict], *, timed: bool = False, warmup_iters: int = 0, key: str = "epoch_s") -> dict:
    """`epoch_cold_s`, `epoch_steady_s` of a record from its epochs' times (`key`): cold = the first
    epoch (where that epoch is also the steady one, its estimate over all its iterations,
    `cold_estimate_s`, warm-up included), steady = the mean over the steady epochs (None without)."""
    steady = steady_epochs(len(epochs), timed=timed, warmup_iters=warmup_iters)
    if not epochs:
        cold = None
    else:
        cold = epochs[0]["cold_estimate_s"] if steady == [0] else epochs[0][key]
    mean = sum(epochs[i][key] for i in steady) / len(steady) if steady else None
    return {"epoch_cold_s": cold, "epoch_steady_s": None if mean is None else float(mean)}


def slowest(values):
    """Over ranks that step together: the slowest one's value (None if a rank has none)."""
    values = list(values)
    return max(values) if values and all(v is not None for v in values) else None


def timed_iterations(rec: dict) -> int:
    """Timed iterations of one worker over every epoch of a record: what metrics.rows and traffic
    sum over (the iterations run per epoch less the warm-up; at least 1)."""
    win = timed_window(rec["metrics"].get("time"))
    warm = int(win.get("warmup_iters") or 0)
    run = win.get("iterations_run_per_epoch")
    if isinstance(run, list):  # an integration's record: each epoch's own count
        return max(1, sum(max(0, int(n) - warm) for n in run))
    per_epoch = run or ((win.get("timed_iters") or 0) + warm) or win.get("iterations_per_epoch") or 0
    return max(1, len(rec.get("epochs") or []) * (int(per_epoch) - warm))


def bound_stage(rec: dict) -> str | None:
    """The stage on the iteration's critical path that costs most (exposed times where the record
    has them; Dist-DGL's stages run one after another)."""
    t = rec["metrics"].get("time") or {}
    stages = t.get("per_iteration_exposed") or t.get("per_iteration") or {}
    stages = {k: v for k, v in stages.items() if v}
    return max(stages, key=stages.get) if stages else None


# ---- a training worker's metrics (lsm-gnn train and the integrations' loaders) ------------------------
def mean_times(items) -> dict:
    """The mean of iterations' times per key (ITERATION_KEYS at least; zeros without iterations)."""
    items = list(items)
    total = dict.fromkeys(ITERATION_KEYS, 0.0)
    for it in items:
        for k, v in it.items():
            total[k] = total.get(k, 0.0) + float(v)
    return {k: v / len(items) for k, v in total.items()} if items else total


def exposed_times(mean: dict) -> dict:
    """Critical-path view of one iteration: train + sync + other + the wait, split over the loading
    stages in proportion to their busy time (sums to the iteration's wall time)."""
    # the exchange is loading work (FETCH_BUSY_STAGES): it gets its share of the wait like the fetch
    load = ("sample",) + FETCH_BUSY_STAGES
    busy = sum(mean.get(k, 0.0) for k in load)
    out = {k: (mean["wait"] * mean.get(k, 0.0) / busy if busy > 0 else 0.0) for k in load}
    out["train"], out["sync"], out["other"] = mean["train"], mean.get("sync", 0.0), mean["other"]
    return out


def hidden_fetch_fraction(items) -> float | None:
    """1 - (time the train step waited for inputs) / (fetch busy time): the share of fetch time
    hidden behind compute (waits for sampling count against it: a lower bound); None without fetches."""
    items = list(items)
    # the whole fetch: the cache's stages and the exchange's (one fetch's wall time, fetch_split)
    fetch = sum(sum(it.get(k, 0.0) for k in FETCH_BUSY_STAGES) for it in items)
    wait = sum(it["wait"] for it in items)
    return None if fetch <= 0 else max(0.0, min(1.0, 1.0 - wait / fetch))


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


# ---- merging over ranks -------------------------------------------------------------------------------
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
    path = Path(path)
    if path.is_dir():
        raise OutputError(path, "the run record's path is a folder; give a file name (e.g. run.json)")
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


# ---- one run record from the ranks' results (was lsm_gnn/multidevice/merge.py) ----------------
# Rows and traffic are summed over ranks, epoch times are the slowest rank's (the ranks step
# together), exchange figures come from the shared sources' stats, and the memory block is the one
# the ranks' feature sources state (`FeatureSource.memory()`), counted over the G devices. The
# config and the process group are imported on first use, so that reading a record stays light.

def failed_record(cfg: RunConfig, failure: dict, worker: str) -> dict:
    """The record of a multi-device run that failed, naming the failed rank."""
    from lsm_gnn.config import config_to_dict

    rec = new_record("train" if worker == "train" else "bench", system_name(cfg), config_to_dict(cfg))
    rec["status"] = "failed"
    rec["failure"] = {"rank": failure["rank"], "message": failure["message"], "ranks": failure.get("ranks", [])}
    return rec


def merge_records(cfg: RunConfig, results: list[dict], worker: str, wall_s: float) -> dict:
    """One record for the run: rows and traffic summed over ranks, epoch times the slowest rank's."""
    from lsm_gnn.cache.budget import for_devices
    from lsm_gnn.config import config_to_dict
    from lsm_gnn.ranks.group import resolve_backend

    G = len(results)
    base = results[0].get("record")
    if base is not None:
        rec = json.loads(json.dumps(base))  # rank 0's record carries config, accuracy and epoch times
        rec["system"] = system_name(cfg)
        rec["config"] = config_to_dict(cfg)
        # training: each rank's record counts the timed windows
        merge_rank_records(rec, [r["record"] for r in results])
    else:
        rec = new_record("bench", system_name(cfg), config_to_dict(cfg))
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
    # why `row_transport: auto` fell back to the collective (each rank's own reason)
    notes = [res["source"]["row_transport_note"] for res in results if res["source"].get("row_transport_note")]
    if notes:
        metrics["multidevice"]["row_transport_note"] = "; ".join(dict.fromkeys(notes))
    return rec

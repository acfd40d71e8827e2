"""What a run record counted, per worker and iteration: the hardware-independent input of the
projection (docs/projection.md).

A *worker* is one device of `lsm`, `isolated`, `mmap`, `direct`, `memory` (G of them) or one
trainer of `distdgl` (machines x trainers). An *iteration* is one mini-batch of every worker.

How each count is normalised (the record's own windows, lsm_gnn/train/loop.py and
baselines/harness.py):
- `metrics.rows` and the storage traffic are sums over devices and over the timed iterations of
  every epoch. The projection compares with the steady epoch's time, so it takes the steady
  epochs' part (their share in `epochs[i].rows` / `.io`) divided by G x sum over the steady
  epochs of (iterations - warmup_iters);
- `metrics.multidevice.exchange_bytes_per_iteration` is already per iteration (all devices):
  divided by G; `rows.peer_rows` counts every iteration run (warm-up included): divided by
  G x `multidevice.iterations`;
- Dist-DGL: `rows.requests` sums every iteration of every epoch and trainer; `kvstore_feature_bytes`
  every iteration of the measured (steady) epochs and trainers; `network_bytes` the bytes every
  machine sent during the steady epochs (all their iterations).
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lsm_gnn.metrics import record_measured_epochs, timed_window
from lsm_gnn.utils.errors import DataError

PAGE = 4096  # page size of the mmap loader's faults
STRAGGLER_DEFAULT = 1.0
"""The slowest worker's iteration before the all-reduce over the mean, for a record without per-worker
times: none assumed (the projection then waits for no straggler and says so)."""


@dataclass
class Counts:
    """Per worker and iteration unless the name says otherwise."""

    system: str
    source: str = "<record>"
    workers: int = 1                 # devices (G), or machines x trainers for distdgl
    machines: int = 1                # nodes the workers run on
    iterations_per_epoch: int = 0    # iterations of one worker in a full epoch
    batch_size: int = 1024
    fanouts: tuple = (10, 15)
    model: str = "sage"
    hidden: int = 256
    row_bytes: int = 4096
    num_rows: int = 0
    rows: float = 0.0                # input rows requested (distinct per batch), R
    local_hits: float = 0.0          # rows served by the worker's own cache
    peer_hits: float = 0.0           # rows served by another device's cache
    victim_hits: float = 0.0         # rows served by the pinned-memory victim buffer (PVP)
    storage_rows: float = 0.0
    storage_io_ops: float = 0.0
    storage_bytes: float = 0.0       # read amplification included (mmap: kernel bytes)
    peer_rows: float = 0.0           # rows received from other owners (all-to-all)
    exchange_bytes: float = 0.0      # device exchange bytes of this worker (ids + rows)
    row_transport: str = "collective"  # CPU ranks: shm (owners' shared-memory outboxes) or the gloo collective
    network_bytes_per_machine: float | None = None  # Dist-DGL: bytes one machine sent per iteration
    kvstore_bytes: float = 0.0       # Dist-DGL: feature bytes one trainer pulled
    overlap_fetch: bool = True       # the fetch of t+1 overlaps the train step of t
    readahead: bool = False          # lsm/isolated on the CPU: batch t+1's reads run beside batch t (cache.readahead)
    sample_ahead: int = 2            # batches sampled ahead in a thread (0: inline)
    distdgl_samplers: int = 0        # Dist-DGL sampler processes per trainer (0: sampling inline)
    servers: int = 0                 # Dist-DGL server processes over all machines
    edges: float | None = None       # edges of the batch's blocks, E (None: not recorded)
    emulated_step: dict | None = None  # the StepModel constants an emulated accelerator waited (None: real)
    accelerator_profile: str | None = None  # its profile
    straggler: float = STRAGGLER_DEFAULT  # W > 1: the slowest worker's iteration before the all-reduce / the mean
    straggler_from: str = "default"  # where it came from (straggler_of)
    measured: dict = field(default_factory=dict)  # epoch_steady_s, per_iteration, ... (for validation)

    @property
    def h2d_bytes(self) -> float:
        """Bytes one worker's batch moves host -> device when its rows land in host memory first."""
        return self.rows * self.row_bytes

    @property
    def epoch_iterations(self) -> int:
        return self.iterations_per_epoch

    def as_dict(self) -> dict:
        d = asdict(self)
        d["fanouts"] = list(self.fanouts)
        return d


def read_json_object(path: str | os.PathLike, what: str) -> dict:
    """The JSON object in `path`; a DataError naming the file (and `what` it should hold) otherwise."""
    try:
        obj = json.loads(Path(path).read_text())
    except OSError as e:
        raise DataError(path, f"cannot read {what}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise DataError(path, f"not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise DataError(path, what, expected="a JSON object", found=type(obj).__name__)
    return obj


def read_json_record(path: str | os.PathLike) -> dict:
    """A run record as JSON (schema-checked with lsm_gnn.records.validate_record)."""
    from lsm_gnn.records import validate_record

    rec = read_json_object(path, "a run record")
    validate_record(rec, os.fspath(path))
    return rec


def _counted_iterations(rec: dict, source: str, epochs: list[int]) -> int:
    """Timed iterations per worker of `epochs` in the record's timed window."""
    win = timed_window(rec["metrics"].get("time"))
    warm = int(win.get("warmup_iters") or 0)
    eps = rec.get("epochs") or []
    n = sum(max(0, int(eps[i].get("iterations", 0)) - warm) for i in epochs)
    if n <= 0:
        raise DataError(source, "the record has no timed iterations to count over "
                                "(epochs[].iterations minus timed_window.warmup_iters)")
    return n


def _steady_shares(rec: dict) -> tuple[list[int], dict]:
    """The steady epochs' share of every row and I/O count, from the per-epoch timed-window counts
    (`epochs[i].rows`, `.io`): the measured epoch time is the steady epochs', and a steady epoch
    can read more than the cold epoch's timed window (the workflow's LSM-GNN run: 25 % more storage
    rows). On several devices the epochs hold every device's counts; in records written before
    they did, rank 0's: their ratio stands for all. Without per-epoch counts: every epoch, share 1."""
    eps = rec.get("epochs") or []
    steady = record_measured_epochs(rec)
    if len(steady) == len(eps) or not all("rows" in e and "io" in e for e in eps):
        return list(range(len(eps))), {}
    shares = {}
    for key in ("rows", "io"):
        for k in eps[0][key]:
            total = sum(e[key].get(k, 0) for e in eps)
            shares[k] = sum(eps[i][key].get(k, 0) for i in steady) / total if total else 0.0
    return steady, shares


def _run_cpu_index(metrics: dict) -> list[float]:
    """The CPU speed index measured before the workers started and after they ended
    (baselines.harness); empty in records without it."""
    ci = metrics.get("cpu_index_s") or {}
    return [float(ci[k]) for k in ("before", "after") if ci.get(k) is not None]


def _work(per_iteration: dict) -> float:
    """A worker's seconds per iteration before the all-reduce: every stage but `sync` (the wait for
    the others and the all-reduce itself)."""
    return sum(float(v or 0.0) for k, v in per_iteration.items() if k != "sync")


def straggler_of(rec: dict) -> tuple[float, str]:
    """How much longer the slowest worker's iteration before the all-reduce is than the mean, and
    where that came from, in this order:

    - Dist-DGL: `metrics.distdgl.trainer_work_s.slowest_over_mean` (baselines.harness: per timed
      step, each trainer's total less its sync; the mean over the steps of the slowest over the
      mean over the steps of the mean);
    - Dist-DGL records without it, whose train step was an emulated wait (its all-reduce is then
      only the trainers' meeting): the record's `sync` stage is the wait for the slowest, so
      (work + sync) / work, work = the other stages' mean;
    - the devices of lsm-gnn's loop: `metrics.ranks` (per rank, its stages' means): the slowest
      rank's work over the mean (the per-step collectives keep them close: 1.001 in an emulated
      LSM-GNN run, 2026-12-05);
    - else STRAGGLER_DEFAULT.
    """
    m = rec.get("metrics") or {}
    d = m.get("distdgl") or {}
    tw = d.get("trainer_work_s") or {}
    if tw.get("slowest_over_mean"):
        return float(tw["slowest_over_mean"]), "metrics.distdgl.trainer_work_s (per step, slowest / mean)"
    pi = (m.get("time") or {}).get("per_iteration") or {}
    if rec.get("system") == "distdgl" and (m.get("accelerator") or {}).get("mode") == "emulated" and pi:
        w = _work(pi)
        if w > 0:
            return (w + float(pi.get("sync") or 0.0)) / w, "metrics.time.per_iteration: (work + sync) / work"
    ranks = [r for r in (m.get("ranks") or {}).values() if ((r or {}).get("time") or {}).get("per_iteration")]
    if len(ranks) > 1:
        ws = [_work(r["time"]["per_iteration"]) for r in ranks]
        mean = sum(ws) / len(ws)
        if mean > 0:
            return max(ws) / mean, "metrics.ranks (slowest rank's stages / the mean)"
    return STRAGGLER_DEFAULT, "default (no per-worker times in the record)"


def counts_from_record(rec: dict, source: str = "<record>") -> Counts:
    """The per-worker, per-iteration counts of a complete training record of any system."""
    if rec.get("status") != "complete":
        raise DataError(source, f"record status is {rec.get('status')!r}: only complete runs can be projected")
    if rec.get("kind") != "train":
        raise DataError(source, f"record kind is {rec.get('kind')!r}: the projection needs a training record "
                                "(lsm-gnn run / train / bench compare --records)")
    m, cfg = rec["metrics"], rec.get("config") or {}
    system = rec["system"]
    sampler, model, train = cfg.get("sampler", {}), cfg.get("model", {}), cfg.get("train", {})
    t = m.get("time", {})
    win = timed_window(t)
    rows, traffic = m.get("rows", {}), m.get("traffic", {})
    mem = m.get("memory") or {}
    ds = m.get("dataset") or {}
    row_bytes = 4096
    num_rows = int(ds.get("nodes") or 0)
    if ds.get("feature_bytes") and ds.get("nodes"):
        row_bytes = int(round(ds["feature_bytes"] / ds["nodes"]))
    c = Counts(system=system, source=source, batch_size=int(sampler.get("batch_size", 1024)),
               fanouts=tuple(sampler.get("fanouts", (10, 15))), model=str(model.get("name", "sage")),
               hidden=int(model.get("hidden", 256)), row_bytes=row_bytes, num_rows=num_rows,
               iterations_per_epoch=int(win.get("iterations_per_epoch") or 0),
               overlap_fetch=bool(train.get("overlap_fetch", True)),
               sample_ahead=int(sampler.get("prefetch_batches", 2)),
               # records from before the read-ahead have no such key: their reads did not run ahead
               readahead=bool((cfg.get("cache") or {}).get("readahead", False)) and system in ("lsm", "isolated"))
    c.measured = {"epoch_steady_s": t.get("epoch_steady_s"), "epoch_cold_s": t.get("epoch_cold_s"),
                  "per_iteration": dict(t.get("per_iteration") or {}),
                  "per_iteration_wall": t.get("per_iteration_wall"),
                  "preprocessing_s": t.get("preprocessing_s"), "first_epoch_s": t.get("first_epoch_s"),
                  "cpu_index_s": _run_cpu_index(m)}
    if c.iterations_per_epoch <= 0:
        raise DataError(source, "metrics.time.timed_window.iterations_per_epoch is missing")
    acc = m.get("accelerator") or {}
    if acc.get("edges_per_iteration") is not None:
        c.edges = float(acc["edges_per_iteration"])
    if acc.get("mode") == "emulated":
        c.emulated_step, c.accelerator_profile = dict(acc["step"]), acc.get("profile")
    c.measured["au"] = acc.get("au")

    c.straggler, c.straggler_from = straggler_of(rec)
    if system == "distdgl":
        d = m.get("distdgl") or {}
        M, T = int(d.get("machines", 2)), int(d.get("trainers_per_machine", 2))
        c.workers, c.machines = M * T, M
        c.distdgl_samplers = int(d.get("samplers_per_trainer", (cfg.get("baseline") or {}).get("samplers", 0)) or 0)
        c.servers = int(d.get("servers_per_machine", 1)) * M
        c.overlap_fetch = False
        run_iters = len(rec.get("epochs") or []) and int(rec["epochs"][0].get("iterations", 0))
        E = len(rec.get("epochs") or [])
        if not run_iters or not E:
            raise DataError(source, "a Dist-DGL record needs epochs[] with their iterations")
        c.rows = rows.get("requests", 0) / (c.workers * E * run_iters)
        steady = record_measured_epochs(rec)
        c.kvstore_bytes = traffic.get("kvstore_feature_bytes", c.rows * row_bytes * c.workers * len(steady) * run_iters) \
            / (c.workers * len(steady) * run_iters)
        if traffic.get("network_bytes") is not None:
            c.network_bytes_per_machine = traffic["network_bytes"] / (len(steady) * run_iters * M)
        if ds.get("nodes") is None and mem.get("fraction_of_features"):
            c.num_rows = int(mem.get("all_devices_bytes", 0) / row_bytes)
        return c

    G = int((m.get("multidevice") or {}).get("devices") or mem.get("devices") or
            (cfg.get("distributed") or {}).get("devices") or 1)
    c.workers, c.machines = G, 1
    steady, share = _steady_shares(rec)
    n = _counted_iterations(rec, source, steady) * G

    def per_it(total: dict, key: str, share_key: str | None = None) -> float:
        """A summed count's steady-epoch part per worker and iteration."""
        return total.get(key, 0) * share.get(share_key or key, 1.0) / n

    c.rows = per_it(rows, "requests")
    c.local_hits = per_it(rows, "local_hits")
    c.peer_hits = per_it(rows, "peer_hits")
    c.victim_hits = per_it(rows, "victim_hits")
    c.storage_rows = per_it(rows, "storage_rows")
    md = m.get("multidevice") or {}
    # peer_rows (and the exchange) come from the sources' counters over every iteration run,
    # warm-up included: per iteration = / (G x exchange calls of one rank)
    ex_iters = int(md.get("iterations") or 0)
    c.peer_rows = rows.get("peer_rows", 0) / (G * ex_iters if ex_iters > 0 else n)
    c.storage_io_ops = per_it(traffic, "storage_io_ops", "io_ops")
    c.storage_bytes = per_it(traffic, "storage_bytes", "bytes_read")
    c.row_transport = md.get("row_transport") or "collective"
    if md.get("exchange_bytes_per_iteration") is not None:
        c.exchange_bytes = float(md["exchange_bytes_per_iteration"]) / G
    elif traffic.get("device_exchange_bytes"):
        c.exchange_bytes = traffic["device_exchange_bytes"] / n
    if system == "mmap":
        # page faults, not store calls: the kernel's bytes (readahead included) in 4 KiB pages
        c.storage_io_ops = c.storage_bytes / PAGE
    return c


def load_counts(path: str | os.PathLike) -> Counts:
    return counts_from_record(read_json_record(path), os.fspath(path))


# what must agree for records to be repeats of one run (the measured time is what may differ)
_SAME_RUN = ("workers", "machines", "iterations_per_epoch", "batch_size", "fanouts", "model", "hidden", "row_bytes",
             "num_rows", "overlap_fetch", "readahead", "distdgl_samplers", "servers", "emulated_step")


def merge_repeats(runs: list[Counts]) -> Counts:
    """Records of one system and configuration run again: their counts averaged, their measured
    steady epochs' median taken (what the projection is checked against, as the benchmarks report
    the median of their runs; every run's time is kept in `measured["runs_epoch_steady_s"]`). On a VM shared with other work repeat runs of one
    command differ by up to 40 %: one run is not a measurement to check a model against."""
    first = runs[0]
    if len(runs) == 1:
        return first
    for c in runs[1:]:
        diff = [k for k in _SAME_RUN if getattr(c, k) != getattr(first, k)]
        if diff:
            raise DataError(c.source, f"not a repeat of {first.source} (system {first.system!r}): "
                                      f"{diff[0]} is {getattr(c, diff[0])!r} there and {getattr(first, diff[0])!r} here")
    merged = Counts(**{k: v for k, v in asdict(first).items() if k != "measured"})
    merged.source = " + ".join(c.source for c in runs)
    for k in ("rows", "local_hits", "peer_hits", "victim_hits", "storage_rows", "storage_io_ops", "storage_bytes",
              "peer_rows", "exchange_bytes", "kvstore_bytes", "straggler"):
        setattr(merged, k, sum(getattr(c, k) for c in runs) / len(runs))
    if all(c.edges is not None for c in runs):
        merged.edges = sum(c.edges for c in runs) / len(runs)
    if all(c.network_bytes_per_machine is not None for c in runs):
        merged.network_bytes_per_machine = sum(c.network_bytes_per_machine for c in runs) / len(runs)
    times = [c.measured.get("epoch_steady_s") for c in runs]
    merged.measured = {k: v for k, v in first.measured.items() if k != "cpu_index_s"}  # per record only
    merged.measured["runs_epoch_steady_s"] = times
    merged.measured["epoch_steady_s"] = None if None in times else float(statistics.median(times))
    return merged

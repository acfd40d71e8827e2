"""The metric vocabulary: one name and one rule per figure, for every system (docs/results-schema.md).

The row keys every feature source counts and the hit rates computed from them (from rows, never
from thread accesses), the I/O keys, an iteration's stages, the timed window, the cold and steady
epochs, and an iteration's mean, exposed and hidden times. Pure functions of counts and times: a
leaf that the cache's replay, the simulator, the run record (lsm_gnn.records), the loop and the
reports read alike.
"""

from __future__ import annotations

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
name them so in `stage_seconds()` (lsm_gnn.contract); 0 where nothing is exchanged. Dist-DGL's
records put their KVStore pull in `exchange_rows`."""
FETCH_BUSY_STAGES = tuple(s for s in STAGES if s in FETCH_STAGES + EXCHANGE_STAGES)
"""The stages one fetch's wall time splits into (lsm_gnn.train.loader.fetch_split): the exchange is
fetch work the train step waits on like the cache's, so it counts with the loading side wherever a
fetch or load total is taken (the exposed view, the hidden fetch fraction)."""
ITERATION_KEYS = STAGES + ("wall", "wait")
"""One iteration's times: the stages, its wall time and how long the train step waited for inputs."""


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


# ---- one iteration's times ------------------------------------------------------------------------
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

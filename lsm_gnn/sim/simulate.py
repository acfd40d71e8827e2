"""Replay a request trace through cache configurations and put the result next to the bounds.

A trace of G devices is cut into the request streams of the caches that serve it:

* **shared** (LSM-GNN): owner o caches only rows with `v % G == o` and, in iteration b, serves
  them for every device, the devices' lists concatenated in device order;
* **isolated** (multi-GPU GIDS): device d caches what it requests itself.

Each stream is replayed with the cache engine's decision replay
(`lsm_gnn.cache.replay.replay`) under one device's memory budget (`lsm_gnn.cache.budget`: cache
lines + victim queues + landing buffer = T rows). The bounds are computed per stream at the same
memory (`lsm_gnn.sim.bounds`) and summed over streams: `min_rows` is MIN at T, a strict floor of
every policy with or without the victim buffer; `min_cache_rows` is MIN at the cache lines alone;
`min_total_rows` is MIN at G*T over the interleaved trace of all devices (the floor of any way of
using G devices' memory). `lookahead` is the number of future batches the policy read (K for
horizon, else W) and `lookahead_bytes` their host memory per device (ids and the engine's ring;
not feature memory: lsm_gnn.cache.budget.lookahead_bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from tqdm import tqdm

from lsm_gnn.cache.budget import MemoryBudget, memory_budget
from lsm_gnn.ownership import local_rows
from lsm_gnn.config import CacheConfig
from lsm_gnn.metrics import hit_rate
from lsm_gnn.sim import bounds as B
from lsm_gnn.sim.trace import Trace
from lsm_gnn.utils.errors import InputError

MODES = ("shared", "isolated")
RESULT_KEYS = ("requests", "distinct", "hits", "victim_hits", "storage_rows", "evictions", "spills",
               "spill_dropped", "prefetched")
"""Counts every replay reports (lsm_gnn.cache.replay): spills = evicted lines with a known reuse put
in their victim queue, spill_dropped = such lines whose queue was full (re-read from storage at
their reuse), prefetched = lines the PVP moved to the landing buffer."""
BOUND_KEYS = ("compulsory", "min_rows", "min_cache_rows", "min_set_rows", "opt_static_rows", "min_total_rows")


@dataclass
class CacheStream:
    """What one cache serves: per iteration, the ids (duplicates kept) in arrival order."""

    label: str
    batches: list[np.ndarray]
    num_owners: int
    owner: int


def cache_streams(trace: Trace, mode: str) -> list[CacheStream]:
    if mode not in MODES:
        raise InputError(f"mode must be one of {MODES}, found {mode!r}")
    g = trace.num_devices
    if mode == "isolated" or g == 1:
        return [CacheStream(f"device {d}", trace.device(d), 1, 0) for d in range(g)]
    streams = []
    for o in range(g):
        per_iter = [np.concatenate([x[x % g == o] for x in it]) if it else np.zeros(0, np.int64)
                    for it in trace.batches]
        streams.append(CacheStream(f"owner {o}", per_iter, g, o))
    return streams


def interleaved(trace: Trace) -> list[np.ndarray]:
    """Per iteration, every device's requests in device order (the system-wide stream)."""
    return [np.concatenate(it) if it else np.zeros(0, np.int64) for it in trace.batches]


def stream_budget(cfg: CacheConfig, trace: Trace, mode: str, row_bytes: int | None) -> MemoryBudget:
    """One device's budget; a shared-cache owner can hold only its own rows."""
    owned = local_rows(trace.num_rows, trace.num_devices) if mode == "shared" else trace.num_rows
    return memory_budget(cfg, trace.num_rows, row_bytes or 1, owned_rows=owned)


def set_geometry(capacity_rows: int, ways: int) -> tuple[int, int]:
    """(sets, ways) of a set-associative cache of `capacity_rows` rows."""
    if capacity_rows < ways:
        return 1, capacity_rows
    return capacity_rows // ways, ways


class BoundsCalculator:
    """Bounds of one trace, cached per capacity (MIN costs about one policy replay)."""

    def __init__(self, trace: Trace, mode: str):
        self.trace, self.mode = trace, mode
        self.streams = cache_streams(trace, mode)
        self.seqs = [B.RequestSequence.from_batches(s.batches, trace.num_rows) for s in self.streams]
        self._global = None
        self._memo: dict = {}

    def _memoised(self, key, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    @property
    def global_sequence(self) -> B.RequestSequence:
        if self._global is None:
            self._global = B.RequestSequence.from_batches(interleaved(self.trace), self.trace.num_rows)
        return self._global

    def compulsory(self) -> int:
        return self._memoised("compulsory", lambda: sum(B.compulsory_misses(s) for s in self.seqs))

    def distinct_requests(self) -> int:
        return sum(len(s) for s in self.seqs)

    def min_rows(self, capacity: int) -> int:
        return self._memoised(("min", capacity), lambda: sum(B.belady_min(s, capacity) for s in self.seqs))

    def min_set_rows(self, capacity: int, ways: int) -> int:
        sets, w = set_geometry(capacity, ways)
        g = self.streams[0].num_owners
        return self._memoised(("set", sets, w), lambda: sum(
            B.belady_min_per_set(s, w, sets, num_owners=g) for s in self.seqs))

    def opt_static_rows(self, capacity: int) -> int:
        return self._memoised(("static", capacity), lambda: sum(B.optimal_static(s, capacity) for s in self.seqs))

    def min_total_rows(self, capacity: int) -> int:
        g = self.trace.num_devices
        if g == 1:
            return self.min_rows(capacity)
        return self._memoised(("total", capacity), lambda: B.belady_min(self.global_sequence, g * capacity))

    def all(self, budget: MemoryBudget, ways: int) -> dict:
        """Bounds at one device's budget: MIN, optimal static and the global MIN at its total
        rows; MIN and set-associative MIN at its cache lines alone."""
        total, cache = budget.total_rows, budget.cache_rows
        return {"compulsory": self.compulsory(), "min_rows": self.min_rows(total),
                "min_cache_rows": self.min_rows(cache),
                "min_set_rows": self.min_set_rows(cache, ways) if cache else self.min_rows(0),
                "opt_static_rows": self.opt_static_rows(total),
                "min_total_rows": self.min_total_rows(total)}


def default_replay() -> Callable:
    from lsm_gnn.cache.replay import replay

    return replay


def simulate(trace: Trace, configs: Sequence[CacheConfig], *, static_scores: np.ndarray, mode: str = "shared",
             row_bytes: int | None = None, replay_fn: Callable | None = None, engine: str = "cpu",
             progress: bool = False) -> pd.DataFrame:
    """One row per configuration: counts summed over the trace's caches, bounds and ratios.

    `replay_fn` has the signature of `lsm_gnn.cache.replay.replay` (the default).
    """
    static_scores = np.asarray(static_scores)
    if static_scores.shape != (trace.num_rows,) or static_scores.dtype != np.uint8:
        raise InputError(f"static_scores: expected uint8 array of shape ({trace.num_rows},), "
                         f"found {static_scores.dtype} {static_scores.shape}")
    replay_fn = replay_fn or default_replay()
    calc = BoundsCalculator(trace, mode)
    epochs = max(len(trace.meta.get("batches_per_epoch", [])), 1)
    rows = []
    bar = tqdm(total=len(configs) * len(calc.streams), desc="replaying", unit="cache",
               disable=not progress, leave=False)
    for cfg in configs:
        budget = stream_budget(cfg, trace, mode, row_bytes)
        cap = budget.cache_rows
        counts = dict.fromkeys(RESULT_KEYS, 0)
        bypassed, la = 0, {}
        for stream in calc.streams:
            res = replay_fn(stream.batches, cfg, trace.num_rows, static_scores, budget=budget,
                            num_owners=stream.num_owners, owner=stream.owner, engine=engine)
            totals = res.totals
            missing = [k for k in RESULT_KEYS if k not in totals]
            if missing:  # a replay that does not count something must not read as zero
                raise InputError(f"replay result lacks counts {missing}")
            for k in RESULT_KEYS:
                counts[k] += int(totals[k])
            bypassed += int(totals.get("bypassed", 0))
            # the lookahead's host memory (not feature memory): the largest of the caches'
            for k, v in (getattr(res, "lookahead", None) or {}).items():
                la[k] = max(la.get(k, 0), v)
            bar.update(1)
        bnd = calc.all(budget, cfg.ways)
        fraction = cfg.capacity_fraction if cfg.capacity_bytes is None else budget.total_rows / trace.num_rows
        row = {"policy": cfg.policy, "cache_fraction": fraction, "total_rows": budget.total_rows,
               "capacity_rows": cap, "ways": cfg.ways, "window": cfg.window,
               "victim_depth": budget.victim_depth, "victim_capacity": budget.host_rows,
               "lookahead": int(la.get("lookahead_batches", cfg.window)),
               "lookahead_bytes": int(la.get("lookahead_bytes", 0)),
               "mode": mode, "devices": trace.num_devices,
               "batches": trace.num_batches, "epochs": epochs, **counts, "bypassed": bypassed, **bnd}
        row["storage_rows_per_epoch"] = counts["storage_rows"] / epochs
        # the victim buffer's regime per iteration and cache: spill attempts against its queue depth
        per_it = max(1, trace.num_batches * max(1, len(calc.streams)))
        row["spill_attempts_per_iteration"] = (counts["spills"] + counts["spill_dropped"]) / per_it
        row["spill_dropped_per_iteration"] = counts["spill_dropped"] / per_it
        row["prefetched_per_iteration"] = counts["prefetched"] / per_it
        row["victim_hits_per_iteration"] = counts["victim_hits"] / per_it
        row["hit_rate"] = hit_rate(counts)
        for name, key in (("min", "min_rows"), ("min_cache", "min_cache_rows"), ("min_set", "min_set_rows"),
                          ("opt_static", "opt_static_rows"), ("compulsory", "compulsory")):
            row[f"storage_rows_vs_{name}"] = _ratio(counts["storage_rows"], bnd[key])
        rows.append(row)
    bar.close()
    return pd.DataFrame(rows)


def bounds_table(df: pd.DataFrame) -> pd.DataFrame:
    """The bounds per memory split (one row per distinct budget, cache size and victim capacity)."""
    cols = ["cache_fraction", "total_rows", "capacity_rows", "victim_capacity", *BOUND_KEYS]
    return df[cols].drop_duplicates().sort_values(["total_rows", "capacity_rows"]).reset_index(drop=True)


def headline(df: pd.DataFrame, fraction: float = 0.10) -> pd.DataFrame:
    """Per policy, the row at the cache fraction nearest `fraction` and the largest window."""
    if df.empty:
        return df
    fr = df["cache_fraction"].astype(float)
    near = df[(fr - fraction).abs() == (fr - fraction).abs().min()]
    near = near[near["window"] == near["window"].max()]
    return near.drop_duplicates("policy").reset_index(drop=True)


def _ratio(num: float, den: float) -> float:
    if den == 0:
        return 1.0 if num == 0 else float("inf")
    return num / den

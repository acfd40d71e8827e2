"""The loader: sampler -> lookahead window -> feature source -> (input_nodes, seeds, blocks, features).

    loader = FeatureLoader(sampler, source, window=8)
    for input_nodes, seeds, blocks, features in loader.epoch(e):   # the shape DGL/GIDS users know
        ...

Three stages, each in its own thread when that helps:
1. sampling runs `sample_ahead` + W batches ahead in a background thread (numba kernels release
   the GIL, so it overlaps the train step);
2. the lookahead keeps the next W batches; for batch t the fetch stage calls
   `source.advance(ids of batches t+1..t+W)` then `source.fetch(ids of t)` - in that order, one
   batch after another, so the cache makes the same decisions whether or not stages overlap;
3. with `overlap_fetch`, the fetch of batch t+1 runs in a thread while batch t trains.
The window stays inside the epoch (like a per-epoch DataLoader, and like the trace replay).

Each yielded batch (a 4-tuple) also carries `.labels` (tensor), `.minibatch`, `.times`: seconds of
sample, fetch_cache, fetch_victim, fetch_storage and, from a source that exchanges rows between
devices, exchange_ids and exchange_rows (busy time of those stages for this batch; the fetch's
stages sum to its wall time: `fetch_split`) and wait (how long the consumer waited for it: the
part of loading not hidden behind training), and `.counts`: the source's row and storage I/O
counters for this batch alone (taken in the fetch stage, so they do not depend on how far ahead
it runs), and `.h2d_bytes`: the bytes this loader copied to the device (0 when the source's rows
are already there: a source on a CUDA device returns torch tensors, which are used as they are).

The source is anything with the FeatureSource contract (lsm_gnn.contract); an object with only
advance/fetch/counters is wrapped in a ForeignSource.

Whoever consumes the batches adds their `.times` up per iteration with the stage timers at the end
of this module, in the run-record vocabulary (`lsm_gnn.metrics.STAGES`): `StageTimes` is a plain
dict-like accumulator; `StageTimer.stage(name)` times a `with` block into it (the loop's `train` and
`sync`). Each iteration's times are kept so a run can report means over any window (the timed
window after warm-up) and epoch totals.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from typing import Iterator

import numpy as np
import torch

from lsm_gnn.contract import STAGES as SOURCE_STAGES
from lsm_gnn.contract import FeatureSource, as_source
from lsm_gnn.metrics import EXCHANGE_STAGES, ITERATION_KEYS, ROW_KEYS, mean_times
from lsm_gnn.sampling import Background, Lookahead, MiniBatch, NeighborSampler
from lsm_gnn.sources.cached_device import hand_over
from lsm_gnn.utils.errors import InputError


def loader_horizon(cache_cfg, source=None) -> int:
    """Batches the loader samples ahead and hands `source.advance`: the cache's horizon
    (`CacheConfig.horizon`: W, or K for a long-lookahead policy) when something reads it, else 0.
    Something reads it when the cache is on, or when `source` is a caller's own (an object that is
    no lsm_gnn FeatureSource, such as a cache of its own: it gets `advance(window)` and the config's
    horizon). With the cache off a source of lsm_gnn's (the ideal, the plain store) reads nothing
    ahead: the window is 0 (docs/integrations.md)."""
    own = source is not None and not isinstance(source, FeatureSource)
    return cache_cfg.horizon if (cache_cfg.enabled or own) else 0


def counts(source) -> dict:
    """Row counters and storage I/O counters of `source` now (for per-batch deltas)."""
    c = source.counters
    out = {k: int(getattr(c, k, 0)) for k in ROW_KEYS}
    io = source.io_counters()
    if io is not None:
        out["bytes_read"], out["io_ops"] = int(io.bytes_read), int(io.io_ops)
    return out


def fetch_split(source, seconds: float, before: dict | None, after: dict | None) -> dict:
    """One fetch's wall time (`seconds`, advance included) split into the record's stages, from the
    source's per-stage timers (`stage_seconds()` before and after): a cache's victim and storage
    stages as fetch_victim / fetch_storage, a shared cache's exchange as exchange_ids /
    exchange_rows, and the rest of the wall time as fetch_cache (the lookup and the work around
    it), so that the stages sum to the wall time. Without the cache's stages the rest is the
    source's one stage (`fetch_stage`); without timers at all, the whole fetch is."""
    if before is None or after is None:
        return {source.fetch_stage: seconds}

    def delta(k):
        return max(0.0, after.get(k, 0.0) - before.get(k, 0.0))

    cache = any(k in after for k in SOURCE_STAGES)
    # the cache's own "cache" timer is not used: fetch_cache is what the other stages leave
    timed = {f"fetch_{k}": delta(k) for k in SOURCE_STAGES if k != "cache"} if cache else {}
    timed.update({k: delta(k) for k in EXCHANGE_STAGES if k in after})
    total = sum(timed.values())
    if total > seconds:  # the source's timers overlap ours; keep the sum = our wall time
        f = seconds / total
        timed = {k: v * f for k, v in timed.items()}
    rest = seconds
    for v in timed.values():  # one at a time, in order: the numbers of a cache without exchange stay
        rest -= v
    return {("fetch_cache" if cache else source.fetch_stage): rest, **timed}


class LoadedBatch(tuple):
    """(input_nodes, seeds, blocks, features) with .labels, .minibatch and .times attached."""

    def __new__(cls, minibatch: MiniBatch, blocks, features: torch.Tensor, labels: torch.Tensor, times: dict):
        obj = super().__new__(cls, (minibatch.input_nodes, minibatch.seeds, blocks, features))
        obj.minibatch, obj.labels, obj.times = minibatch, labels, times
        return obj

    @property
    def input_nodes(self):
        return self[0]

    @property
    def seeds(self):
        return self[1]

    @property
    def blocks(self):
        return self[2]

    @property
    def features(self):
        return self[3]


def _timed(it: Iterator[MiniBatch]) -> Iterator[MiniBatch]:
    while True:
        t0 = time.perf_counter()
        try:
            mb = next(it)
        except StopIteration:
            return
        mb.sample_s = time.perf_counter() - t0
        yield mb


class FeatureLoader:
    def __init__(self, sampler: NeighborSampler, source, *, window: int = 0, sample_ahead: int = 2,
                 overlap_fetch: bool = True, device: str | torch.device = "cpu", max_iters: int | None = None):
        if window < 0 or sample_ahead < 0:
            raise InputError(f"window and sample_ahead must be >= 0, found {window}, {sample_ahead}")
        self.sampler, self.source, self.window = sampler, as_source(source), int(window)
        self.sample_ahead, self.overlap_fetch = int(sample_ahead), bool(overlap_fetch)
        self.device = torch.device(device)
        self.max_iters = max_iters
        self.row_dim = None

    def __len__(self) -> int:
        n = len(self.sampler)
        return min(n, self.max_iters) if self.max_iters else n

    def _fetch(self, mb: MiniBatch, window: list) -> LoadedBatch:
        src = self.source
        c0 = counts(src)
        t0 = time.perf_counter()
        before = src.stage_seconds()
        src.advance(window)
        rows = src.fetch(mb.input_nodes)
        seconds = time.perf_counter() - t0
        c1 = counts(src)
        times = {"sample": getattr(mb, "sample_s", 0.0)}
        times.update(fetch_split(src, seconds, before, src.stage_seconds()))
        if isinstance(rows, torch.Tensor):  # rows on the source's device (or the CPU)
            feats = rows
        else:
            rows = np.asarray(rows)
            if not rows.flags.writeable:
                rows = rows.copy()
            feats = torch.from_numpy(rows) if rows.ndim == 2 else None
        if feats is None or feats.ndim != 2 or feats.shape[0] != len(mb.input_nodes):
            raise InputError(f"feature source returned shape {tuple(np.shape(rows))} for {len(mb.input_nodes)} ids")
        h2d = 0
        labels = torch.from_numpy(mb.labels)
        blocks = mb.blocks
        if self.device.type != "cpu":
            if feats.device.type == "cpu":
                h2d = feats.numel() * feats.element_size()
                feats = feats.pin_memory().to(self.device, non_blocking=True)
            elif self.device.index is not None and feats.device != self.device:
                # the copy is queued on this thread's stream: after the fetch's own
                feats = hand_over(feats).to(self.device, non_blocking=True)
            labels = labels.to(self.device, non_blocking=True)
            blocks = [b.to(self.device, non_blocking=True) for b in blocks]
        elif feats.device.type != "cpu":
            feats = hand_over(feats).cpu()
        item = LoadedBatch(mb, blocks, feats, labels, times)
        item.counts = {k: c1[k] - c0.get(k, 0) for k in c1}   # rows and I/O of this batch alone
        item.h2d_bytes = h2d
        return item

    def epoch(self, epoch: int) -> Iterator[LoadedBatch]:
        threads = []
        batches = _timed(iter(self.sampler.epoch(epoch)))
        if self.max_iters:
            batches = itertools.islice(batches, self.max_iters)
        if self.sample_ahead > 0:
            batches = Background(batches, depth=self.sample_ahead + self.window, name="lsm-gnn-sampler")
            threads.append(batches)
        fetched = (self._fetch(mb, win) for mb, win in Lookahead(batches, self.window))
        # a device source's fetch runs on its own stream; fetched in a thread, its rows are handed
        # to this (the trainer's) thread's stream here rather than to the fetch thread's (on the
        # legacy default stream, which the train step shares, that wait would hold the step back)
        defer = getattr(self.source, "hand_off_later", None) if self.overlap_fetch else None
        if defer is not None:
            defer(True)
        if self.overlap_fetch:
            fetched = Background(fetched, depth=1, name="lsm-gnn-fetch")
            threads.insert(0, fetched)
        try:
            while True:
                t0 = time.perf_counter()
                try:
                    item = next(fetched)
                except StopIteration:
                    return
                if getattr(item.features, "ready_event", None) is not None:   # a device source's rows
                    hand_over(item.features)
                item.times["wait"] = time.perf_counter() - t0
                yield item
        finally:
            for t in threads:
                t.close()
            if defer is not None:
                defer(False)

    def __iter__(self):
        return self.epoch(0)


# ---- stage timers: seconds per stage accumulated per iteration ----------------------------------
class StageTimes(dict):
    def __init__(self, *args, **kw):
        super().__init__(dict.fromkeys(ITERATION_KEYS, 0.0))
        self.update(*args, **kw)

    def add(self, other: dict) -> "StageTimes":
        for k, v in other.items():
            self[k] = self.get(k, 0.0) + float(v)
        return self

    def scaled(self, f: float) -> "StageTimes":
        return StageTimes({k: v * f for k, v in self.items()})


class StageTimer:
    """Collects one `StageTimes` per iteration."""

    def __init__(self):
        self.iterations: list[StageTimes] = []
        self.current = StageTimes()

    @contextlib.contextmanager
    def stage(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.current[name] = self.current.get(name, 0.0) + time.perf_counter() - t0

    def add(self, times: dict) -> None:
        self.current.add(times)

    def end_iteration(self) -> StageTimes:
        done, self.current = self.current, StageTimes()
        self.iterations.append(done)
        return done

    @staticmethod
    def total(items) -> StageTimes:
        out = StageTimes()
        for it in items:
            out.add(it)
        return out

    @staticmethod
    def mean(items) -> StageTimes:
        return StageTimes(mean_times(items))

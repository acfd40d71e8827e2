"""`DeviceCachedFeatureSource`: the LSM-GNN cache of one owner, serving rows as torch tensors.

lsm_gnn.sources.cached.CachedFeatureSource with its rows on a torch device
(lsm_gnn.cache.device_pool): cache lines and landing buffer on `device`, victim queues in pinned
host memory, every tier move a real copy. The same code runs on the CPU (device="cpu", the CI
check) and on a GPU (device="cuda").

Per fetch: the engine decides (`cfg.engine`: "cpu" CpuCacheEngine, "gpu" GpuCacheEngine, or an
injected engine with their interface); the storage reads of the misses are issued at once on a
reader thread into the pool's pinned staging buffer; the decisions become index tensors on the
device (`_plan`: computed where the decisions live, host or device, then moved in one copy);
then the pool copies rows: every request from its line (the hits), spills, victim hits, storage
rows to the output and the last fill of each slot into its line, and at the end the PVP lands the
next batch's queue. `fetch` returns a [len(ids), dim] tensor on `device` in the dataset's dtype,
with no host round trip on CUDA (the copies are queued on the current stream).

The decisions, counters and stats equal CachedFeatureSource's on the same inputs; the stats also
count the bytes moved: `h2d_bytes` (storage rows and landing copies to the device) and
`d2h_bytes` (spills to the host queues).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import torch

from lsm_gnn.cache.budget import MemoryBudget
from lsm_gnn.cache.device_pool import DeviceRowPool
from lsm_gnn.cache.engine import STORAGE, VICTIM_HIT
from lsm_gnn.cache.engines import make_engine
from lsm_gnn.sources.cached import add_step_counts
from lsm_gnn.sources.shard import OwnerShard
from lsm_gnn.choices import ROW_ENGINES
from lsm_gnn.sources.contract import SourceStats
from lsm_gnn.utils.errors import ConfigError, InputError

STAT_KEYS = ("iterations", "bypassed", "evictions", "spilled", "spill_dropped", "prefetched", "prefetched_used",
             "victim_bytes", "prefetch_bytes", "h2d_bytes", "d2h_bytes")
# plan fields, in the order they are packed for the one host -> device copy
PLAN_FIELDS = ("req_slot", "vh_req", "vh_src", "st_req", "st_k", "fill_slot", "fill_k", "vfill_slot",
               "vfill_src", "spill_slot")


def _is_cupy(a) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


def _tensor(a) -> torch.Tensor:
    """An engine array as a tensor without a copy: NumPy (and the CUDA emulator's NumPy
    subclass) by from_numpy, CuPy by DLPack."""
    if isinstance(a, torch.Tensor):
        return a
    if isinstance(a, np.ndarray):
        return torch.from_numpy(np.asarray(a))
    return torch.from_dlpack(a)


def _host(t: torch.Tensor) -> np.ndarray:
    return t.cpu().numpy()


def _plan(res, keys: torch.Tensor, depth: int) -> tuple[dict, list]:
    """Index tensors (on the decisions' device) that say which row goes where in one batch, and
    the spill runs (host) as DeviceRowPool.spill takes them, each inside one queue of `depth` rows.

    Every request is first served from the line of its id (right for the hits; the misses are
    overwritten). A miss fills its slot only if it is the slot's last fill of the batch
    (keys[slot] == id), as lsm_gnn.cache.rowpool does.
    """
    distinct, inverse, status = _tensor(res.distinct), _tensor(res.inverse), _tensor(res.status)
    slot, src = _tensor(res.slot), _tensor(res.src)
    req_status = status[inverse]
    storage, victim = status == STORAGE, status == VICTIM_HIT
    kpos = torch.cumsum(storage, 0) - 1  # staged row of each storage read
    last = (slot >= 0) & (keys[slot] == distinct)  # slot -1: a miss the policy did not cache
    vh_req = torch.nonzero(req_status == VICTIM_HIT).flatten()
    st_req = torch.nonzero(req_status == STORAGE).flatten()
    fill = torch.nonzero(storage & last).flatten()
    vfill = torch.nonzero(victim & last).flatten()
    # (a miss the policy did not cache has slot -1: it reads line 0 and is overwritten like any miss)
    plan = dict(req_slot=slot[inverse].clamp(min=0), vh_req=vh_req, vh_src=src[inverse[vh_req]], st_req=st_req,
                st_k=kpos[inverse[st_req]], fill_slot=slot[fill], fill_k=kpos[fill], vfill_slot=slot[vfill],
                vfill_src=src[vfill])
    # spills in queue-position order: one copy per queue they append to
    dst = _host(_tensor(res.spill_dst))
    order = np.argsort(dst, kind="stable")
    dst = dst[order]
    cut = np.flatnonzero((np.diff(dst) != 1) | (np.diff(dst // max(depth, 1)) != 0)) + 1
    starts, ends = np.concatenate([[0], cut]), np.concatenate([cut, [len(dst)]])
    runs = [(int(i), int(j), int(dst[i])) for i, j in zip(starts, ends) if j > i]
    spill_slot = _tensor(res.spill_slot)
    plan["spill_slot"] = spill_slot[torch.from_numpy(order).to(spill_slot.device)]
    return plan, runs


class DeviceCachedFeatureSource(OwnerShard):
    """A FeatureSource (lsm_gnn.sources.contract) backed by a FeatureStore, a cache engine and a
    DeviceRowPool on `device`; `fetch` returns a tensor there.

    As CachedFeatureSource: `budget` splits the device's memory between cache lines, victim
    queues and landing buffer (None: the budget `cfg` gives this owner); only ids owned by
    `owner` (v % num_owners == owner) may be requested; `close()` releases the pool, the store
    stays open unless `owns_store`. `engine`: an engine object to use instead of the one
    `cfg.engine` names (tests).
    """

    def __init__(self, store, num_rows: int, row_dim: int, dtype, cfg, static_scores: np.ndarray, *,
                 num_owners: int = 1, owner: int = 0, budget: MemoryBudget | None = None, device="cpu",
                 engine=None, owns_store: bool = False):
        self._init_shard(store, num_rows, row_dim, dtype, cfg, num_owners, owner, budget)
        self._owns_store = owns_store
        try:
            self.torch_dtype = torch.from_numpy(np.empty(0, self.dtype)).dtype
        except TypeError as e:
            raise InputError(f"feature dtype {self.dtype} has no torch equivalent") from e
        self.stats = SourceStats(dict.fromkeys(STAT_KEYS, 0))
        # host time of fetch's segments (on CUDA: issuing the copies), plus the reads' own duration
        self.stats.update(time_cache_s=0.0, time_victim_s=0.0, time_storage_s=0.0, time_storage_busy_s=0.0)
        # cache.readahead is the host data plane's (fetcher.py, step 6): this plane reads a batch's
        # misses when the batch is served, and the record says so rather than the config
        self.stats["readahead"] = False
        self.engine, self._reader = None, None
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if not self.enabled:
            self.pvp = False
            self.pool = DeviceRowPool(0, self.row_bytes, device=self.device)  # staging and uploads only
            self.stats["victim_buffer_bytes"] = 0
            return
        self.engine = engine if engine is not None else self._make_engine(cfg, static_scores)
        self.pvp = bool(self.engine.pvp)
        lines = self.engine.geometry.lines
        if lines > self.capacity_rows:
            raise InputError(f"the engine has {lines} cache lines, the budget {self.capacity_rows}")
        self.pool = DeviceRowPool(lines, self.row_bytes, window=self.engine.window, depth=self.engine.depth,
                                  pvp=self.pvp, device=self.device)
        self._queued = np.zeros(max(self.pool.window, 1), np.int64)  # rows in each victim queue
        self.stats["victim_buffer_bytes"] = self.pool.victim_bytes
        self.stats["policy"] = self.engine.policy_name

    def _make_engine(self, cfg, static_scores):
        kind = cfg.engine
        if kind not in ROW_ENGINES:
            raise ConfigError("<config>", "cache.engine", f"rows are served through the "
                              f"{' or '.join(map(repr, ROW_ENGINES))} engine; "
                              f"found {kind!r} (the reference engine replays traces: lsm-gnn simulate)")
        with self._engine_stream(kind == "gpu"):
            return make_engine(cfg, self.budget, self.num_rows, static_scores, num_owners=self.num_owners,
                               owner=self.owner, kind=kind)

    @contextmanager
    def _engine_stream(self, gpu_engine: bool | None = None):
        """Run a CuPy engine's kernels on torch's current stream and device, so the decisions and
        the copies that read them are ordered on the device with no host sync."""
        if gpu_engine is None:
            gpu_engine = self.engine is not None and _is_cupy(self.engine.keys)
        if not (gpu_engine and self.device.type == "cuda"):
            yield
            return
        import cupy

        ptr = torch.cuda.current_stream(self.device).cuda_stream
        stream = cupy.cuda.ExternalStream(ptr) if ptr else cupy.cuda.Stream.null
        with cupy.cuda.Device(self.device.index), stream:
            yield

    def _last_on_host(self) -> tuple[np.ndarray, np.ndarray]:
        return tuple(_host(_tensor(a)) for a in self._last)

    # ---- FeatureSource contract (ids, window and reports: lsm_gnn.sources.shard) ---------------
    def _fetch(self, ids: np.ndarray) -> torch.Tensor:
        self._last = None
        if not self.enabled:
            return self._fetch_uncached(ids)
        st, pool, rb = self.stats, self.pool, self.row_bytes
        t0 = time.perf_counter()
        with self._engine_stream():
            res = self.engine.step(ids, *self.window.flat)
            status, distinct = _tensor(res.status), _tensor(res.distinct)
            # the storage reads go out first and run (without the GIL) while the rows move
            storage_ids = _host(distinct[status == STORAGE])
            staged, reading = self._read_async(storage_ids)
            plan, runs = _plan(res, _tensor(self.engine.keys), pool.depth)
        plan = self._to_device(plan)
        out = torch.empty((len(ids), pool.row_words), dtype=pool.word, device=self.device)
        pool.gather_lines(plan["req_slot"], out)
        t1 = time.perf_counter()
        pool.spill(plan["spill_slot"], runs)
        pool.gather_landed(plan["vh_src"], plan["vh_req"], out)
        t2 = time.perf_counter()
        if reading is not None:
            st["time_storage_busy_s"] += reading.result()
        staged = pool.upload(staged)
        t3 = time.perf_counter()
        pool.place_misses(staged, plan["st_req"], plan["st_k"], plan["fill_slot"], plan["fill_k"],
                          plan["vfill_slot"], plan["vfill_src"], out)
        self._last = (res.status, res.inverse)
        t4 = time.perf_counter()
        for i, j, dst in runs:  # spills append to their queue
            self._queued[dst // pool.depth] = dst % pool.depth + j - i
        with self._engine_stream():
            q = self.engine.end_iteration()
        landed = 0
        if q >= 0:
            # the queue's length is known on the host: no read of the engine's (device) count
            landed, self._queued[q] = int(self._queued[q]), 0
            pool.land(q, landed)
        t5 = time.perf_counter()
        self.window.clear()
        c = res.counts
        add_step_counts(self.counters, st, c, rb)
        st["prefetched"] += landed
        st["prefetch_bytes"] += landed * rb
        st["d2h_bytes"] += c["spills"] * rb
        st["h2d_bytes"] += (len(storage_ids) + landed) * rb
        st["time_cache_s"] += (t1 - t0) + (t4 - t3)
        st["time_victim_s"] += (t2 - t1) + (t5 - t4)
        st["time_storage_s"] += t3 - t2
        return out.view(self.torch_dtype)

    def _to_device(self, plan: dict) -> dict:
        """The plan's index tensors on the pool's device: one copy for all (from pinned memory
        on CUDA, so it does not wait for the device), none if they are there already."""
        parts = [plan[k] for k in PLAN_FIELDS]
        if parts[0].device == self.device:
            return plan
        if parts[0].device.type != "cpu":  # decisions on a device, rows elsewhere (not a real setup)
            return {k: p.to(self.device) for k, p in zip(PLAN_FIELDS, parts)}
        sizes = [len(p) for p in parts]
        packed = torch.empty(sum(sizes), dtype=torch.int64, pin_memory=self.device.type == "cuda")
        torch.cat([p.to(torch.int64) for p in parts], out=packed)
        return dict(zip(PLAN_FIELDS, packed.to(self.device, non_blocking=True).split(sizes)))

    def _read_async(self, ids: np.ndarray):
        """Start reading `ids` into the pool's staging rows on the reader thread: (staged rows,
        a future giving the read's seconds, or None when there is nothing to read)."""
        staged = self.pool.staging(len(ids))
        if not len(ids):
            return staged, None
        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="lsm-gnn-cache-read")
        out = staged.numpy().view(self.dtype).reshape(len(ids), self.dim)

        def read():
            t0 = time.perf_counter()
            self.store.read_rows(ids, out=out)
            return time.perf_counter() - t0

        return staged, self._reader.submit(read)

    def _fetch_uncached(self, ids: np.ndarray) -> torch.Tensor:
        t0 = time.perf_counter()
        uniq, inverse = np.unique(ids, return_inverse=True)
        staged, reading = self._read_async(uniq)
        if reading is not None:
            self.stats["time_storage_busy_s"] += reading.result()
        rows = self.pool.upload(staged)
        inv = torch.from_numpy(inverse.astype(np.int64).ravel()).to(self.device)
        out = torch.empty((len(ids), self.pool.row_words), dtype=self.pool.word, device=self.device)
        if len(ids):
            torch.index_select(rows, 0, inv, out=out)
        self.stats["time_storage_s"] += time.perf_counter() - t0
        self.stats["iterations"] += 1
        self.stats["h2d_bytes"] += len(uniq) * self.row_bytes
        self.counters.requests += len(ids)
        self.counters.distinct += len(uniq)
        self.counters.storage_rows += len(uniq)
        self.window.clear()
        return out.view(self.torch_dtype)

    def close(self) -> None:
        if self._reader is not None:
            self._reader.shutdown(wait=True)
            self._reader = None
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self._close_store()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

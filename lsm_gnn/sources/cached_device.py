"""`DeviceCachedFeatureSource`: the LSM-GNN cache of one owner, serving rows as torch tensors.

lsm_gnn.sources.cached.CachedFeatureSource with its rows on a torch device
(lsm_gnn.cache.device_pool): cache lines and landing buffer on `device`, victim queues in pinned
host memory, every tier move a real copy. The same code runs on the CPU (device="cpu", the CI
check) and on a GPU (device="cuda").

The fetch order, read-ahead included, is the one both data planes share (lsm_gnn.sources.shard);
this plane says where rows land. The engine decides (`cfg.engine`: "cpu" CpuCacheEngine, "gpu"
GpuCacheEngine, or an injected engine with their interface); the storage reads of the misses go
on the reader thread into host buffers (pinned on CUDA); the decisions become index tensors on
the device (`_plan`: computed where the decisions live, host or device, then moved in one copy);
then the pool copies rows: every request from its line (the hits), spills, victim hits, the read
rows uploaded, storage rows to the output and the last fill of each slot into its line, and at
the end the PVP lands the next batch's queue. `fetch` returns a [len(ids), dim] tensor on
`device` in the dataset's dtype, with no host round trip on CUDA (the copies are queued on the
current stream). Read-ahead (`cache.readahead`) runs with an engine that answers
`storage_misses` (the CPU engine); with the GPU engine a batch's misses are read when it is served
and the stats say `readahead: False`.

The decisions, counters and stats equal CachedFeatureSource's on the same inputs; the stats also
count the bytes moved: `h2d_bytes` (storage rows and landing copies to the device) and
`d2h_bytes` (spills to the host queues).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np
import torch

from lsm_gnn.cache.budget import MemoryBudget
from lsm_gnn.cache.device_pool import DeviceRowPool
from lsm_gnn.cache.engine import STORAGE, VICTIM_HIT
from lsm_gnn.cache.engines import make_engine
from lsm_gnn.sources.shard import OwnerShard
from lsm_gnn.choices import ROW_ENGINES
from lsm_gnn.contract import SourceStats
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
    """A FeatureSource (lsm_gnn.contract) backed by a FeatureStore, a cache engine and a
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
        self.engine = None
        self._init_readahead(False)
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
        # read-ahead asks the engine for the next batch's misses: the CPU engine answers (a GPU
        # engine's state lives on the device, where the question would cost a sync per batch)
        self._init_readahead(bool(getattr(cfg, "readahead", False)) and hasattr(self.engine, "storage_misses"))

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

    # ---- where rows land: the torch pool (the fetch order: lsm_gnn.sources.shard) --------------
    def _decide(self, ids: np.ndarray):
        with self._engine_stream():
            return self.engine.step(ids, *self.window.flat)

    def _storage_ids(self, res) -> np.ndarray:
        with self._engine_stream():
            return _host(_tensor(res.distinct)[_tensor(res.status) == STORAGE])

    def _end_iteration(self) -> int:
        with self._engine_stream():
            return self.engine.end_iteration()

    def _prepare(self, res) -> None:
        with self._engine_stream():
            plan, runs = _plan(res, _tensor(self.engine.keys), self.pool.depth)
        self._batch = (self._to_device(plan), runs)

    def _output(self, n: int) -> torch.Tensor:
        return torch.empty((n, self.pool.row_words), dtype=self.pool.word, device=self.device)

    def _copy_hits(self, res, out) -> None:
        self.pool.gather_lines(self._batch[0]["req_slot"], out)

    def _copy_victims(self, res, out) -> None:
        plan, runs = self._batch
        self.pool.spill(plan["spill_slot"], runs)
        self.pool.gather_landed(plan["vh_src"], plan["vh_req"], out)

    def _arrived(self, staged: np.ndarray) -> torch.Tensor:
        word = torch.empty(0, dtype=self.pool.word).numpy().dtype
        return self.pool.upload(torch.from_numpy(staged.view(word)))

    def _place_misses(self, res, staged, kmap, out) -> None:
        plan = self._batch[0]
        st_k, fill_k = plan["st_k"], plan["fill_k"]
        if kmap is not None:   # storage read k lies at row kmap[k] of the read-ahead's rows
            k = torch.from_numpy(kmap).to(st_k.device)
            st_k, fill_k = k[st_k], k[fill_k]
        self.pool.place_misses(staged, plan["st_req"], st_k, plan["fill_slot"], fill_k,
                               plan["vfill_slot"], plan["vfill_src"], out)

    def _land(self, q: int) -> int:
        depth = self.pool.depth
        for i, j, dst in self._batch[1]:  # spills append to their queue
            self._queued[dst // depth] = dst % depth + j - i
        # the queue's length is known on the host: no read of the engine's (device) count
        landed, self._queued[q] = int(self._queued[q]), 0
        self.pool.land(q, landed)
        return landed

    def _served(self, res, out, storage_rows: int, landed: int) -> torch.Tensor:
        self._batch = None
        rb, st = self.row_bytes, self.stats
        st["d2h_bytes"] += res.counts["spills"] * rb
        st["h2d_bytes"] += (storage_rows + landed) * rb
        return out.view(self.torch_dtype)

    def _grown(self, buf: np.ndarray | None, n: int) -> np.ndarray:
        """`buf` if it holds n rows, else a new host buffer of at least twice its rows (pinned on
        CUDA, page-aligned on the CPU); first waits until the last upload has left the buffers."""
        self.pool.wait_uploaded()
        if buf is not None and len(buf) >= n:
            return buf
        size = max(n, 2 * (0 if buf is None else len(buf)), 1024)
        return self.pool.host_rows(size).numpy().view(self.dtype).reshape(size, self.dim)

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

    def _fetch_uncached(self, ids: np.ndarray) -> torch.Tensor:
        t0 = time.perf_counter()
        uniq, inverse = np.unique(ids, return_inverse=True)
        staged = self._staging(len(uniq))
        if len(uniq):
            self.stats["time_storage_busy_s"] += self._read_async(uniq, staged).result()
        rows = self._arrived(staged)
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

    def _release_pool(self) -> None:
        """Close the pool (it waits for its queued copies, then drops its tensors) in the shard's `close`."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None

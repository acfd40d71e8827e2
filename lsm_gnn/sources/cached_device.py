"""`DeviceCachedFeatureSource`: the LSM-GNN cache of one owner, serving rows as torch tensors.

lsm_gnn.sources.cached.CachedFeatureSource with its rows on a torch device
(lsm_gnn.cache.device_pool): cache lines and landing buffer on `device`, victim queues in pinned
host memory, every tier move a real copy. The same code runs on the CPU (device="cpu", the CI
check) and on a GPU (device="cuda").

The fetch order, read-ahead included, is the one both data planes share (lsm_gnn.sources.shard);
this plane says where rows land. The engine decides (`cfg.engine`: "cpu" CpuCacheEngine, "gpu"
GpuCacheEngine, or an injected engine with their interface); the plan of the batch's row moves
(lsm_gnn.cache.serve.plan_batch: one source descriptor per request, the fills as fixed-size masks)
is computed where the decisions live with no host sync; the storage ids the reader needs and the
spill destinations are its one device -> host copy (none where the decisions are on the host);
the storage reads of the misses go on the reader thread into host buffers (pinned on CUDA); then
the pool moves rows (lsm_gnn.cache.device_pool): every hit from its line, spills into the queues,
victim hits from the landing buffer, storage rows from the staging (on CUDA with CuPy read in place
by cuda/cache_serve.cu, as mapped pinned memory), the last fill of each slot from the batch tensor
into its line, and at the end the PVP lands the next batch's queue. `fetch` returns a
[len(ids), dim] tensor on `device` in the dataset's dtype. On CUDA the fetch runs on the source's
own stream (`StreamHandoff`), so its reads and copies overlap whatever the caller queued before
(the previous batch's train step); the returned tensor carries the event that ends its work
(`ready_event`), on which the consumer's stream waits (`hand_over`: at return, on the calling
thread's current stream, unless the consumer asked to do it itself, `hand_off_later`, as the
loader's fetch thread does). Read-ahead (`cache.readahead`) runs with an engine that answers
`storage_misses` (the CPU engine); with the GPU engine a batch's misses are read when it is served
and the stats say `readahead: False`.

Host syncs a fetch, as the code reads (docs/cache-gpu.md "The fetch path"): with the GPU engine,
the one copy of the storage ids (as many as the batch's distinct ids: the bound, so the copy does
not wait for the step's count first) and spill destinations, after which the step's counts are
already on the host, and the wait before the reader refills a staging buffer until the device has
read it (two buffers in turn on CUDA: the wait is on the batch before the last); with the CPU
engine only the last.

The decisions, counters and stats equal CachedFeatureSource's on the same inputs; the stats also
count the bytes moved: `h2d_bytes` (storage rows and landing copies to the device) and
`d2h_bytes` (spills to the host queues).
"""

from __future__ import annotations

import time
from contextlib import contextmanager, nullcontext

import numpy as np
import torch

from lsm_gnn.cache.budget import MemoryBudget
from lsm_gnn.cache.device_pool import DeviceRowPool
from lsm_gnn.cache.engines import make_engine
from lsm_gnn.cache.serve import LANDING, LINE, STAGED, bits, plan_batch, remap_staged, storage_ids
from lsm_gnn.sources.shard import OwnerShard
from lsm_gnn.choices import ROW_ENGINES
from lsm_gnn.contract import SourceStats
from lsm_gnn.utils.errors import ConfigError, InputError

STAT_KEYS = ("iterations", "bypassed", "evictions", "spilled", "spill_dropped", "prefetched", "prefetched_used",
             "victim_bytes", "prefetch_bytes", "h2d_bytes", "d2h_bytes")
# plan fields, in the order they are packed for the one host -> device copy (decisions on the host)
PLAN_FIELDS = ("src", "fill_slot", "fill_req", "spill_slot", "spill_dst")


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


def _plan(res, keys: torch.Tensor) -> dict:
    """The batch's row moves (lsm_gnn.cache.serve.plan_batch) as int64 tensors on the decisions'
    device, the spill records beside them; no host sync (no `nonzero`, no boolean indexing).

    It replaces a plan of 4 `torch.nonzero` (each a host sync with the GPU engine), a copy of the
    spill destinations to the host and a blocking upload of their order, and index lists per tier
    that the pool then gathered and scattered 2-4 times: now one descriptor per request, the fills
    as masks (slot -1: none) and every spill record as the engine wrote it."""
    plan = plan_batch(_tensor(res.distinct), _tensor(res.inverse), _tensor(res.status), _tensor(res.slot),
                      _tensor(res.src), keys)
    # copies: the engine's result arrays are its scratch, valid until it moves on
    plan["spill_slot"] = _tensor(res.spill_slot).to(torch.int64, copy=True)
    plan["spill_dst"] = _tensor(res.spill_dst).to(torch.int64, copy=True)
    return plan


class InPlaceRows:
    """A batch's storage rows read in place: `rows[k]` is the row of the store's array that holds
    storage read k (lsm_gnn.storage.memory.MemoryStore.read_in_place)."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)


class StreamHandoff:
    """The fetch's own CUDA stream, and the event that hands its rows to the consumer.

    Why: the fetch thread and the trainer shared the legacy default stream, so a batch's reads and
    copies queued behind the previous batch's train step (and its train step behind them). Now the
    fetch runs on `stream`; at the end an event is recorded there and attached to the returned
    tensor (`ready_event`); `hand_over` makes the consumer's stream wait for it (a device-side wait,
    no host sync) and `record_stream`s the tensor there, so the caching allocator does not reuse its
    memory until the consumer's work is done. `deferred`: the consumer calls `hand_over` itself
    (from its own thread); else it is done at return on the calling thread's current stream.
    `cuda`: torch.cuda, or an object with its Stream / Event / stream / current_stream (tests)."""

    def __init__(self, device, cuda=None):
        self.cuda = cuda if cuda is not None else torch.cuda
        self.device = device
        self.stream = self.cuda.Stream(device)
        self.deferred = False

    def run(self):
        """The context in which the fetch's work is queued on its own stream."""
        return self.cuda.stream(self.stream)

    def ready(self, rows):
        """`rows` with the event that ends the fetch's work; handed over now unless deferred."""
        ev = self.cuda.Event()
        ev.record(self.stream)
        rows.ready_event = ev
        if self.cuda is not torch.cuda:
            rows.ready_cuda = self.cuda   # a stand-in: hand_over finds it here
        return rows if self.deferred else hand_over(rows)


def hand_over(rows, stream=None, cuda=None):
    """Make `stream` (the current one of rows' device by default) wait for the fetch that produced
    `rows` and keep their memory from reuse until the work queued there is done; a tensor without
    a pending event (the CPU, or handed over already) is returned as it is."""
    ev = getattr(rows, "ready_event", None)
    if ev is None:
        return rows
    cuda = cuda if cuda is not None else getattr(rows, "ready_cuda", torch.cuda)
    stream = stream if stream is not None else cuda.current_stream(rows.device)
    stream.wait_event(ev)
    if cuda is torch.cuda:
        rows.record_stream(stream)
    else:   # a stand-in (tests) records it itself
        cuda.record_stream(rows, stream)
    rows.ready_event = None
    return rows


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
                 engine=None, owns_store: bool = False, rows_engine=None, cuda=None):
        self._init_shard(store, num_rows, row_dim, dtype, cfg, num_owners, owner, budget)
        self._owns_store = owns_store
        try:
            self.torch_dtype = torch.from_numpy(np.empty(0, self.dtype)).dtype
        except TypeError as e:
            raise InputError(f"feature dtype {self.dtype} has no torch equivalent") from e
        self.stats = SourceStats(dict.fromkeys(STAT_KEYS, 0))
        self._stage_bufs, self._stage_turn = [None, None], 1   # CUDA: the staging used in turn (_staging)
        # host time of fetch's segments (on CUDA: issuing the copies), plus the reads' own duration
        self.stats.update(time_cache_s=0.0, time_victim_s=0.0, time_storage_s=0.0, time_storage_busy_s=0.0)
        self.engine = None
        self._init_readahead(False)
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        # on CUDA the fetch runs on its own stream (`cuda`: a stand-in for torch.cuda, tests)
        self._handoff = StreamHandoff(self.device, cuda) if self.device.type == "cuda" or cuda is not None else None
        self._planned = None
        if not self.enabled:
            self.pvp = False
            self.pool = DeviceRowPool(0, self.row_bytes, device=self.device, rows_engine=rows_engine)  # staging only
            self.stats["victim_buffer_bytes"] = 0
            return
        self.engine = engine if engine is not None else self._make_engine(cfg, static_scores)
        self.pvp = bool(self.engine.pvp)
        lines = self.engine.geometry.lines
        if lines > self.capacity_rows:
            raise InputError(f"the engine has {lines} cache lines, the budget {self.capacity_rows}")
        self.pool = DeviceRowPool(lines, self.row_bytes, window=self.engine.window, depth=self.engine.depth,
                                  pvp=self.pvp, device=self.device, rows_engine=rows_engine)
        self._queued = np.zeros(max(self.pool.window, 1), np.int64)  # rows in each victim queue
        self.stats["victim_buffer_bytes"] = self.pool.victim_bytes
        self.stats["policy"] = self.engine.policy_name
        self._in_place = self._map_store()
        # read-ahead asks the engine for the next batch's misses: the CPU engine answers (a GPU
        # engine's state lives on the device, where the question would cost a sync per batch);
        # rows read in place are not read ahead (nothing to wait for)
        self._init_readahead(bool(getattr(cfg, "readahead", False)) and hasattr(self.engine, "storage_misses")
                             and self._in_place is None)
        self.stats["in_place"] = self._in_place is not None

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

    # ---- the in-memory feature array read in place (zero-copy) ---------------------------------
    _mapped_store = None

    def _map_store(self) -> torch.Tensor | None:
        """The store's rows as a tensor the serve kernels read in place, or None (read into the
        staging buffer): only a MemoryStore (every row in RAM, verified when it was loaded) whose
        pool runs the kernels; on CUDA its array is registered as mapped pinned memory
        (lsm_gnn.utils.mapped). Then a storage read is no read at all: no reader thread, no gather
        into the staging, no wait before reusing it; the kernel reads each missed row over PCIe
        from where it lies. A registration that fails leaves the staging path on and says why
        (stats `in_place_error`, and a warning)."""
        from lsm_gnn.storage.memory import MemoryStore

        store = self.store
        if not (self.pool.zero_copy and type(store) is MemoryStore and store.row_checksums is None):
            return None
        feats = store.features
        word = torch.empty(0, dtype=self.pool.word).numpy().dtype
        if not feats.flags.c_contiguous or feats.dtype != self.dtype:
            return None
        rows = torch.from_numpy(feats.view(word).reshape(len(feats), self.pool.row_words))
        if self.pool.cuda:
            from lsm_gnn.utils.mapped import MappedHost

            try:
                self._mapped_store = MappedHost(feats.ctypes.data, feats.nbytes, pinned=False,
                                                what=f"in-memory feature array of {store.path}")
            except InputError as e:
                import warnings

                self.stats["in_place_error"] = str(e)
                warnings.warn(f"reading the misses through the staging buffer: {e}", stacklevel=3)
                return None
            self.pool._mapped[feats.ctypes.data] = self._mapped_store.device_ptr
        return rows

    def _read_in_place(self, ids: np.ndarray) -> "InPlaceRows":
        # counted as a read of the store only where there is one (as the staging path reads)
        return InPlaceRows(self.store.read_in_place(ids) if len(ids) else np.zeros(0, np.int64))

    def _last_on_host(self) -> tuple[np.ndarray, np.ndarray]:
        with self._on_fetch_stream():   # ordered after the fetch that wrote them
            return tuple(_host(_tensor(a)) for a in self._last)

    # ---- the fetch on its own stream (CUDA) ---------------------------------------------------
    def _on_fetch_stream(self):
        return self._handoff.run() if self._handoff is not None else nullcontext()

    def _fetch(self, ids: np.ndarray):
        if self._handoff is None:
            return super()._fetch(ids)
        with self._handoff.run():
            rows = super()._fetch(ids)
        return self._handoff.ready(rows)

    def hand_off_later(self, deferred: bool = True) -> None:
        """The consumer hands each fetched tensor over itself (`hand_over(rows)` on its stream,
        e.g. from another thread than the fetch's); False: at return (the default). No-op on the CPU."""
        if self._handoff is not None:
            self._handoff.deferred = bool(deferred)

    # ---- where rows land: the torch pool (the fetch order: lsm_gnn.sources.shard) --------------
    def _decide(self, ids: np.ndarray):
        with self._engine_stream():
            return self.engine.step(ids, *self.window.flat)

    def _storage_ids(self, res) -> np.ndarray:
        """The storage reads' ids on the host, and the batch's plan (kept for `_prepare`): the plan
        is computed where the decisions are; the storage ids and the spill destinations come to the
        host in one copy (a no-op where the decisions are on the host)."""
        with self._engine_stream():
            plan = _plan(res, _tensor(self.engine.keys))
            distinct = _tensor(res.distinct)
            # every distinct id is the bound on the reads, so the ids need not wait for the count:
            # one device -> host copy (a bound's worth of int64, ~0.5 MB at 60k distinct ids, where
            # a second round trip would cost a sync) and the count read after it, when the copy
            # has waited for the step on the same stream (GPU engine: its counts event is done)
            sid = storage_ids(distinct, plan.pop("storage_pos"), len(distinct))
            host = _host(torch.cat([sid, plan["spill_dst"]]))   # the batch's one device -> host copy
            count = int(res.counts["storage_rows"])
        self._planned = (plan, host[len(distinct):])
        return host[:count]

    def _end_iteration(self) -> int:
        with self._engine_stream():
            return self.engine.end_iteration()

    def _prepare(self, res) -> None:
        plan, dst_host = self._planned
        self._planned = None
        self._batch = (self._to_device(plan), dst_host)

    def _output(self, n: int) -> torch.Tensor:
        return torch.empty((n, self.pool.row_words), dtype=self.pool.word, device=self.device)

    def _copy_hits(self, res, out) -> None:
        self.pool.serve(self._batch[0]["src"], out, bits(LINE))

    def _copy_victims(self, res, out) -> None:
        plan, dst_host = self._batch
        self.pool.spill_records(plan["spill_slot"], plan["spill_dst"], dst_host)
        self.pool.serve(plan["src"], out, bits(LANDING))

    def _arrived(self, staged):
        if isinstance(staged, InPlaceRows):
            return staged
        word = torch.empty(0, dtype=self.pool.word).numpy().dtype
        return self.pool.arrived(torch.from_numpy(staged.view(word)))

    def _place_misses(self, res, staged, kmap, out) -> None:
        plan = self._batch[0]
        src = plan["src"]
        if isinstance(staged, InPlaceRows):   # storage read k is row rows[k] of the store's array
            kmap, staged = staged.rows, self._in_place
        if kmap is not None:   # storage read k lies at row kmap[k] of the read-ahead's rows
            src = remap_staged(src, self._index_to_device(kmap))
        self.pool.serve(src, out, bits(STAGED), staged=staged)
        self.pool.fill(plan["fill_slot"], plan["fill_req"], out)

    def _land(self, q: int) -> int:
        depth, dst = self.pool.depth, self._batch[1]
        if len(dst):   # spills append to their queue: its length is its last row + 1
            np.maximum.at(self._queued, dst // depth, dst % depth + 1)
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

    def _staging(self, n: int) -> np.ndarray:
        """On CUDA, two staging buffers used in turn: the reader fills one while the device may still
        read the other (the previous batch's upload or in-place serve), so its wait (`_grown`) is
        for the batch before that, whose reads are done. On the CPU one buffer (its rows are read
        before the fetch returns: nothing to overlap), as the host plane."""
        if not self.pool.cuda:
            return super()._staging(n)
        k = self._stage_turn = 1 - self._stage_turn
        self._stage_bufs[k] = self._grown(self._stage_bufs[k], n)
        return self._stage_bufs[k][:n]

    def _grown(self, buf: np.ndarray | None, n: int) -> np.ndarray:
        """`buf` if it holds n rows, else a new host buffer of at least twice its rows (pinned on
        CUDA, page-aligned on the CPU); first waits until the device's last read of `buf` is done
        (an upload, or the serve kernel reading it in place)."""
        if buf is not None:
            self.pool.wait_uploaded(buf)
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

    def _index_to_device(self, a: np.ndarray) -> torch.Tensor:
        """A host index array on the pool's device without a host wait (pinned, asynchronous)."""
        t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64))
        if self.device.type != "cuda":
            return t.to(self.device)
        return t.pin_memory().to(self.device, non_blocking=True)

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
        """Close the pool (it waits for its queued copies, then drops its tensors) in the shard's
        `close`; then the store's array is unregistered (no kernel reads it any more)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        self._stage_bufs = [None, None]
        if self._mapped_store is not None:
            self._mapped_store.close()
            self._mapped_store = None
        self._in_place = None

"""The GPU cache engine: the CPU engine's decisions with CuPy kernels (sources in cuda/cache_*.cu).

`GpuCacheEngine` has the interface of `lsm_gnn.cache.engine.CpuCacheEngine` (same constructor,
`step`, `end_iteration`, `replay`, `resident_keys`, `occupancy`, state arrays of the same names)
and makes identical decisions on the same inputs (docs/cache-semantics.md); its arrays live on
the device as CuPy arrays, and a `StepResult` holds CuPy views. How one step maps to kernels:

1. dedupe (`cache_dedupe_*`): first occurrence per id by atomicMin on a per-row position, an
   inclusive scan numbers the distinct ids in batch order;
2. lookup (`cache_lookup`): O(1) through a per-owned-row slot map (as the CPU engine);
3. misses (`cache_miss_keys`, a sort, `cache_segment_flags`, `cache_fill`): misses grouped by
   set in order of first occurrence; one warp serves one set's misses one by one, choosing
   victims with a warp reduction that has the CPU engine's tie-breaks;
4. spill (`cache_spill_*`): a stable counting sort by queue puts spilled lines into the victim
   queues in the CPU engine's global order (first occurrence) and drops the ones that overflow;
5. tags (`cache_tags_*`) and PVP (`cache_land_*`), as the CPU engine's refresh and prefetch;
   a long-lookahead policy (horizon) recomputes its tags from the K window batches every
   iteration instead (`cache_hz_*`: the next request of every window row, which also tags the
   lines the step fills), the tags the CPU engine keeps incrementally in its lookahead ring.

Every policy decision in the kernels is a `policy_*` hook and every trait a `policy_*` predicate
of the dispatch generated from the registry; the one translation unit the engine compiles
(`_module`), the constants, the `PolicyState` struct and that dispatch included, is written by
lsm_gnn.cache.gpu_codegen.

The module imports without CuPy; constructing an engine without CuPy and a usable GPU raises
`InputError`. cuda/README.md lists every kernel and its launch shape.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from lsm_gnn.cache import engine as _cpu, gpu_codegen
from lsm_gnn.cache.engine import COUNT_NAMES, StepResult
from lsm_gnn.cache.gpu_codegen import CORRUPT_COUNT
from lsm_gnn.cache.policies import STATE_ORDER, state_arrays
from lsm_gnn.ownership import local_rows
from lsm_gnn.cache.window import NO_REUSE, TAG_DTYPE
from lsm_gnn.utils import cuda_sources, rowcopy
from lsm_gnn.utils.errors import InputError

NONE_POS = 2**31 - 1   # "no position" in row_first / row_land (cache_common.cuh)
THREADS = 256          # elementwise kernels
FILL_THREADS = 128     # cache_fill: 4 warps per block, one set per warp
SPILL_CHUNK = 256      # misses per thread in the spill counting sort
COUNT_BLOCKS_MAX = 1024

# every kernel this module launches (tests check each is defined in cuda/cache_*.cu)
KERNELS = (
    "cache_dedupe_first", "cache_dedupe_flag", "cache_dedupe_scatter", "cache_dedupe_reset",
    "cache_lookup", "cache_count", "cache_miss_keys", "cache_segment_flags",
    "cache_compact_positions", "cache_fill", "cache_tags_reset", "cache_tags_window",
    "cache_spill_count", "cache_spill_assign", "cache_spill_commit", "cache_spill_advance",
    "cache_land_clear", "cache_land_gather", "cache_land_finish", "cache_hz_next", "cache_hz_tags",
    "cache_hz_clear",
) + rowcopy.kernel_names("cache_copy_rows")
# threads per block of every kernel, as launched (the compile check's occupancy reads this)
LAUNCH_THREADS = {**dict.fromkeys(KERNELS, THREADS), "cache_fill": FILL_THREADS, "cache_land_finish": 1,
                  **dict.fromkeys(rowcopy.kernel_names("cache_copy_rows"), rowcopy.THREADS)}


def available() -> bool:
    """True when CuPy imports and sees a usable CUDA device."""
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:
        return False


def _cupy():
    if not available():
        raise InputError("the GPU cache engine needs CuPy with a usable GPU "
                         "(cupy is not installed or cupy.is_available() is False); use engine='cpu'")
    import cupy

    return cupy


@lru_cache(maxsize=None)
def _module():
    cp = _cupy()
    return cp.RawModule(code=gpu_codegen.module_source(), options=cuda_sources.COMPILE_OPTIONS)


def _blocks(n: int, threads: int = THREADS) -> int:
    return -(-int(n) // threads)


_i32, _i64 = np.int32, np.int64


class DeviceVictimQueues:
    """Victim-queue ids on the device: W queues of `depth` lines (as victim.VictimQueues)."""

    def __init__(self, window: int, depth: int):
        cp = _cupy()
        self.window, self.depth = int(window), int(depth)
        self.ids = cp.full(max(self.window, 1) * self.depth, -1, dtype=cp.int64)
        self.count = cp.zeros(max(self.window, 1), dtype=cp.int64)

    def queue(self, q: int):
        start = q * self.depth
        return self.ids[start: start + int(self.count[q])]

    def resident_ids(self):
        cp = _cupy()
        if not self.window:
            return self.ids[:0]
        return cp.concatenate([self.queue(q) for q in range(self.window)])


class DeviceLandingBuffer:
    """The PVP landing buffer's ids on the device (as victim.LandingBuffer)."""

    def __init__(self, depth: int):
        cp = _cupy()
        self.ids = cp.full(int(depth), -1, dtype=cp.int64)
        self.n = cp.zeros(1, dtype=cp.int64)

    @property
    def current(self):
        return self.ids[: int(self.n[0])]


class GpuCacheEngine:
    """Decisions of one owner's cache on a GPU; identical to CpuCacheEngine's."""

    def __init__(self, capacity_rows: int, num_rows: int, static_scores, *, ways: int, policy: str, window: int,
                 refresh_every: int, pvp: bool, victim_depth: int, lookahead: int, num_owners: int = 1,
                 owner: int = 0, victims: DeviceVictimQueues | None = None,
                 landing: DeviceLandingBuffer | None = None):
        cp = _cupy()
        self._cp = cp
        host = cp.asnumpy(static_scores) if isinstance(static_scores, cp.ndarray) else static_scores
        self.static = cp.asarray(_cpu.configure_engine(
            self, capacity_rows, num_rows, host, ways, policy, window, refresh_every, pvp, victim_depth,
            num_owners, owner, lookahead, kind="GPU", max_ways=2047))
        if self.code not in gpu_codegen.gpu_codes():
            raise InputError(f"policy {self.policy_name!r} has no CUDA hooks (cuda/policies/<its module>.cuh); "
                             f"the GPU engine runs {sorted(cls.name for cls in gpu_codegen.gpu_policies())}")
        for name, obj in (("victims", victims), ("landing", landing)):
            if obj is not None and not isinstance(obj.ids, cp.ndarray):
                raise InputError(f"{name}: the GPU engine needs device buffers "
                                 f"(DeviceVictimQueues / DeviceLandingBuffer), found {type(obj).__name__}")
        self.victims = victims or DeviceVictimQueues(self.window, self.depth)
        self.landing = landing or DeviceLandingBuffer(self.depth)
        if self.victims.depth != self.depth or int(self.landing.ids.size) != self.depth:
            raise InputError("victim queues and landing buffer must have victim_depth lines")
        self.t = 0
        self._mod = _module()
        self._alloc_state()
        self._scratch_size = 0

    def _alloc_state(self) -> None:
        cp, g = self._cp, self.geometry
        lines, sets, nloc = g.lines, g.sets, local_rows(self.num_rows, self.num_owners)
        if lines >= 2**31:
            raise InputError(f"at most 2**31 - 1 cache lines per owner, found {lines}")
        self.keys = cp.full(lines, -1, dtype=cp.int64)
        self.pagerank = cp.zeros(lines, dtype=cp.uint8)
        self.tag = cp.full(lines, int(NO_REUSE), dtype=TAG_DTYPE)
        self.set_fill = cp.zeros(sets, dtype=cp.int32)
        # the policy's own state (empty arrays for what it does not keep), as the CPU engine
        self.policy_state = state_arrays(self.policy_name, lines, sets, xp=cp)
        for name, arr in self.policy_state.items():
            setattr(self, name, arr)
        self._ps = tuple(self.policy_state[name] for name in STATE_ORDER)  # the kernels' state parameters
        # a long-lookahead policy: each owned row's next request in the window (NO_REUSE between steps)
        self.row_next = cp.full(nloc if self.long_lookahead else 0, int(NO_REUSE), dtype=cp.int32)
        self._window = None  # the window ids and host offsets of the current step (horizon)
        # per owned row v // G: its slot (-1), its first position in the batch being deduped and
        # its position in the landing buffer (NONE_POS between uses)
        self.row_slot = cp.full(nloc, -1, dtype=cp.int32)
        self.row_first = cp.full(nloc, NONE_POS, dtype=cp.int32)
        self.row_land = cp.full(nloc, NONE_POS, dtype=cp.int32)
        self._counts_dev = cp.zeros(CORRUPT_COUNT + 1, dtype=cp.int64)

    def _ensure_scratch(self, n: int) -> None:
        if n <= self._scratch_size:
            return
        cp = self._cp
        size = max(n, 2 * self._scratch_size, 1024)
        i64 = cp.int64
        self._distinct, self._inverse = cp.empty(size, i64), cp.empty(size, i64)
        self._status = cp.empty(size, cp.int8)
        self._slot, self._src = cp.empty(size, i64), cp.empty(size, i64)
        self._evicted, self._spill = cp.empty(size, i64), cp.empty(size, i64)
        self._spill_slot, self._spill_dst = cp.empty(size, i64), cp.empty(size, i64)
        self._flag, self._keys = cp.empty(size, i64), cp.empty(size, i64)
        self._seg_begin, self._dst_of = cp.empty(size, i64), cp.empty(size, i64)
        self._scratch_size = size

    def _launch(self, name: str, n: int, args: tuple) -> None:
        """Kernel `name` over n threads, LAUNCH_THREADS[name] per block."""
        threads = LAUNCH_THREADS[name]
        if n > 0:
            self._mod.get_function(name)((_blocks(n, threads),), (threads,), args)

    # ---- one iteration ------------------------------------------------------------------------
    def refresh_due(self) -> bool:
        return self.t % self.refresh_every == 0

    def step(self, batch, window_ids=None, window_offsets=None) -> StepResult:
        """Iteration self.t: refresh tags (if due) from the window, then serve `batch`.

        As CpuCacheEngine.step: owned, in-range int64 ids (validate with
        geometry.check_owned_ids: the kernels do not bounds-check); window batch k is
        window_ids[window_offsets[k]:window_offsets[k+1]] (NumPy or CuPy arrays).
        """
        cp = self._cp
        batch = cp.ascontiguousarray(cp.asarray(batch, dtype=cp.int64).ravel())
        if self.long_lookahead or self.refresh_due():
            offsets = None
            if window_offsets is not None:
                offsets = (cp.asnumpy(window_offsets) if isinstance(window_offsets, cp.ndarray)
                           else np.asarray(window_offsets)).astype(np.int64)[: self.lookahead + 1]
            self._refresh(window_ids, offsets)
        try:
            return self._serve(batch)
        finally:
            self._clear_window()

    def _refresh(self, window_ids, offsets: np.ndarray | None) -> None:
        """Tags for iteration t from window batches ids[offsets[k]:offsets[k+1]] (host offsets)."""
        if self.long_lookahead:
            return self._lookahead(window_ids, offsets)
        cp, lines = self._cp, self.geometry.lines
        self._launch("cache_tags_reset", lines, (self.tag, _i64(lines)))
        if window_ids is None or offsets is None or len(offsets) < 2:
            return
        lo, hi = int(offsets[0]), int(offsets[-1])
        if hi <= lo:
            return
        ids = cp.ascontiguousarray(cp.asarray(window_ids, dtype=cp.int64))
        self._launch("cache_tags_window", hi - lo,
                     (ids, cp.asarray(offsets), _i32(len(offsets) - 1), _i64(self.t),
                      _i64(self.num_owners), self.row_slot, self.tag))

    def _lookahead(self, window_ids, offsets: np.ndarray | None) -> None:
        """Horizon: row_next := each window row's next request, line tags := their row's (the
        window is cleared again after the step, `_clear_window`)."""
        cp, lines, G = self._cp, self.geometry.lines, _i64(self.num_owners)
        self._window = None
        if window_ids is not None and offsets is not None and len(offsets) >= 2 and offsets[-1] > offsets[0]:
            ids = cp.ascontiguousarray(cp.asarray(window_ids, dtype=cp.int64))
            lo, hi = int(offsets[0]), int(offsets[-1])
            self._launch("cache_hz_next", hi - lo, (ids, cp.asarray(offsets), _i32(len(offsets) - 1), _i64(self.t),
                                                    G, self.row_next))
            self._window = (ids, lo, hi)
        self._launch("cache_hz_tags", lines, (self.keys, _i64(lines), G, self.row_next, self.tag))

    def _clear_window(self) -> None:
        if self._window is not None:
            ids, lo, hi = self._window
            self._launch("cache_hz_clear", hi - lo, (ids, _i64(lo), _i64(hi), _i64(self.num_owners), self.row_next))
            self._window = None

    def _serve(self, batch) -> StepResult:
        cp = self._cp
        n = int(batch.size)
        if n >= NONE_POS:
            raise InputError(f"a batch holds at most {NONE_POS - 1} requests, found {n}")
        self._ensure_scratch(max(n, 1))
        G, sets, t = _i64(self.num_owners), _i64(self.geometry.sets), self.t
        counts = dict.fromkeys(COUNT_NAMES, 0)
        counts["requests"] = n
        nd = nsp = 0
        if n:
            # 1. dedupe in order of first occurrence
            self._launch("cache_dedupe_first", n, (batch, _i64(n), G, self.row_first))
            self._launch("cache_dedupe_flag", n, (batch, _i64(n), G, self.row_first, self._flag))
            scan = cp.cumsum(self._flag[:n])
            nd = int(scan[n - 1])
            self._launch("cache_dedupe_scatter", n, (batch, _i64(n), G, self.row_first, scan,
                                                     self._distinct, self._inverse))
            # 2. lookup every distinct id against the state at the start of the batch
            self._launch("cache_lookup", nd, (self._distinct, _i64(nd), G, _i32(self.code),
                                              self.row_slot, self.row_land, _i64(t + 1)) + self._ps
                         + (self._status, self._slot, self._src, self._evicted, self._spill))
            # 3. misses grouped by set, in order of first occurrence inside each set
            self._launch("cache_miss_keys", nd, (self._distinct, self._status, _i64(nd), G, sets,
                                                 self._keys))
            order = cp.sort(self._keys[:nd])
            self._launch("cache_segment_flags", nd, (order, _i64(nd), sets, self._flag))
            seg_scan = cp.cumsum(self._flag[:nd])
            nseg = int(seg_scan[nd - 1])
            self._launch("cache_compact_positions", nd, (self._flag, seg_scan, _i64(nd), self._seg_begin))
            self._counts_dev.fill(0)  # cache_fill counts corrupt sets in it, cache_count the rest
            self._launch("cache_fill", nseg * 32, (
                order, _i64(nd), self._seg_begin, _i64(nseg), self._distinct, G, sets,
                _i32(self.geometry.ways), _i32(self.code), _i64(t), _i64(self.window), _i32(self.pvp),
                self.keys, self.pagerank, self.tag) + self._ps + (self.set_fill, self.row_slot, self.static,
                self.row_next, self.row_first, self._inverse, self._status, self._slot, self._evicted,
                self._spill, self._counts_dev))
            # row_first served cache_fill (a line filled in this batch is not spilled); reset it
            self._launch("cache_dedupe_reset", nd, (self._distinct, _i64(nd), G, self.row_first))
            # 4. spill candidates into the victim queues, in order of first occurrence
            if self.pvp and nseg:
                self._spill_to_queues(nd)
            # counts (integer sums: exact whatever the order)
            blocks = min(_blocks(nd), COUNT_BLOCKS_MAX)
            self._mod.get_function("cache_count")((blocks,), (LAUNCH_THREADS["cache_count"],), (
                self._status, self._evicted, self._spill, self._slot, _i64(nd), self._counts_dev))
            h = self._counts_dev.get().tolist()
            if h[CORRUPT_COUNT]:
                raise _cpu.corrupt_state(t, f"{h[CORRUPT_COUNT]} set(s)")
            counts.update(distinct=nd, hits=h[0], victim_hits=h[1], storage_rows=h[2], evictions=h[3],
                          spills=h[4], spill_dropped=h[5], bypassed=h[6])
            nsp = h[4]
        return StepResult(self._distinct[:nd], self._inverse[:n], self._status[:nd], self._slot[:nd],
                          self._src[:nd], self._evicted[:nd], self._spill[:nd],
                          self._spill_slot[:nsp], self._spill_dst[:nsp], counts)

    def _spill_to_queues(self, nd: int) -> None:
        cp = self._cp
        n_chunks = -(-nd // SPILL_CHUNK)
        W = max(self.window, 1)
        table = cp.zeros(W * n_chunks, dtype=cp.int64)
        chunk_args = (_i64(nd), _i64(SPILL_CHUNK), _i64(n_chunks))
        self._launch("cache_spill_count", n_chunks, (self._spill,) + chunk_args + (table,))
        starts = cp.cumsum(table) - table   # exclusive, queue-major
        cursor = starts.copy()
        self._launch("cache_spill_assign", n_chunks, (self._spill, self._evicted) + chunk_args + (
            _i64(self.depth), starts, cursor, self.victims.count, self.victims.ids, self._dst_of,
            self._flag))
        ok_scan = cp.cumsum(self._flag[:nd])
        self._launch("cache_spill_commit", nd, (self._flag, ok_scan, self._dst_of, self._slot, _i64(nd),
                                                self._spill_slot, self._spill_dst))
        self._launch("cache_spill_advance", W, (table, _i64(n_chunks), _i64(W), _i64(self.depth),
                                                self.victims.count))

    def end_iteration(self) -> int:
        """PVP: move queue (t+1) % W into the landing buffer; returns that queue (-1: PVP off).
        Runs on the device without a host sync."""
        q = -1
        if self.pvp:
            q = (self.t + 1) % self.window
            G, land = _i64(self.num_owners), self.landing
            self._launch("cache_land_clear", self.depth, (land.ids, land.n, G, self.row_land))
            self._launch("cache_land_gather", self.depth, (self.victims.ids, self.victims.count, _i64(q),
                                                           _i64(self.depth), G, land.ids, self.row_land))
            self._launch("cache_land_finish", 1, (self.victims.count, _i64(q), land.n))
        self.t += 1
        return q

    # ---- a whole trace ------------------------------------------------------------------------
    def replay(self, flat, offsets) -> np.ndarray:
        """Run batches flat[offsets[b]:offsets[b+1]] from a fresh engine; one row of COUNT_NAMES
        counts per batch (a host array), as CpuCacheEngine.replay."""
        cp = self._cp
        if self.t != 0:
            raise InputError("replay starts from a fresh engine (t = 0)")
        offsets = np.ascontiguousarray(cp.asnumpy(offsets) if isinstance(offsets, cp.ndarray)
                                       else offsets, dtype=np.int64)
        flat = cp.ascontiguousarray(cp.asarray(flat, dtype=cp.int64))
        nb = len(offsets) - 1
        out = np.zeros((nb, len(COUNT_NAMES)), np.int64)
        prefetched = cp.zeros(max(nb, 1), dtype=cp.int64)
        for t in range(nb):
            if self.long_lookahead or self.refresh_due():
                e = min(t + 1 + self.lookahead, nb)
                self._refresh(flat, offsets[min(t + 1, nb): e + 1])
            res = self._serve(flat[offsets[t]: offsets[t + 1]])
            self._clear_window()
            out[t] = [res.counts[k] for k in COUNT_NAMES]
            self.end_iteration()
            if self.pvp:
                prefetched[t] = self.landing.n[0]
        if self.pvp and nb:
            out[:, COUNT_NAMES.index("prefetched")] = prefetched[:nb].get()
        return out

    # ---- inspection (tests, stats) ------------------------------------------------------------
    def resident_keys(self) -> np.ndarray:
        keys = self.keys.get()
        return keys[keys >= 0]

    def occupancy(self) -> int:
        return int(self.set_fill.sum())

    def lookahead_bytes(self) -> int:
        """Device bytes of the lookahead state (horizon: one int32 next request per owned row;
        the K window batches' ids are the caller's)."""
        return int(self.row_next.nbytes)

    def host_state(self) -> dict[str, np.ndarray]:
        """Every piece of state as host arrays under the CPU engine's meanings (row_land -1 for
        'not in the landing buffer'), for comparisons with CpuCacheEngine."""
        st = {name: getattr(self, name).get() for name in
              ("keys", "pagerank", "tag", "set_fill", "row_slot") + STATE_ORDER}
        land = self.row_land.get()
        st["row_land"] = np.where(land == NONE_POS, -1, land).astype(np.int32)
        st["q_ids"], st["q_count"] = self.victims.ids.get(), self.victims.count.get()
        st["land_ids"], st["land_n"] = self.landing.ids.get(), self.landing.n.get()
        return st


def copy_rows(src, src_idx, dst, dst_idx) -> None:
    """dst[dst_idx[k]] = src[src_idx[k]] for 2-D CuPy arrays of the same row size and dtype
    (row moves of a fetcher: spill, PVP, victim-hit re-insert). Either side may be a CuPy view
    of pinned host memory mapped into the device. The unit (16, 8, 4 or 1 bytes) and the rows
    per block follow lsm_gnn.utils.rowcopy.plan."""
    cp = _cupy()
    if src.ndim != 2 or dst.ndim != 2 or src.shape[1:] != dst.shape[1:] or src.dtype != dst.dtype:
        raise InputError(f"copy_rows: expected 2-D arrays of one row shape and dtype, found "
                         f"{src.shape} {src.dtype} and {dst.shape} {dst.dtype}")
    src_idx = cp.ascontiguousarray(cp.asarray(src_idx, dtype=cp.int64))
    dst_idx = cp.ascontiguousarray(cp.asarray(dst_idx, dtype=cp.int64))
    if src_idx.shape != dst_idx.shape:
        raise InputError(f"copy_rows: index lengths differ ({src_idx.size} and {dst_idx.size})")
    n = int(src_idx.size)
    if n == 0:
        return
    if not (src.flags.c_contiguous and dst.flags.c_contiguous):
        raise InputError("copy_rows: src and dst must be C-contiguous")
    p = rowcopy.plan(n, src.shape[1] * src.dtype.itemsize, rowcopy.address(src), rowcopy.address(dst))
    fn = _module().get_function(p.kernel("cache_copy_rows"))
    fn((p.blocks,), (rowcopy.THREADS,), (src, src_idx, dst, dst_idx, _i64(n), _i64(p.row_units), _i32(p.shift)))

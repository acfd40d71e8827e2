"""The GPU cache engine: the CPU engine's decisions with CuPy kernels (sources in cuda/cache_*.cu).

`GpuCacheEngine` has the interface of `lsm_gnn.cache.engine.CpuCacheEngine` (same constructor,
`step`, `end_iteration`, `replay`, `resident_keys`, `occupancy`, state arrays of the same names)
and makes identical decisions on the same inputs (docs/cache-semantics.md); its arrays live on
the device as CuPy arrays, and a `StepResult` holds CuPy views. How one step maps to kernels:

1. dedupe (`cache_dedupe_*`): first occurrence per id by atomicMin on a per-row position, an
   inclusive scan (`cache_scan_*`) numbers the distinct ids in batch order;
2. lookup (`cache_lookup`): O(1) through a per-owned-row slot map (as the CPU engine);
3. misses (`cache_miss_keys`, `cache_digit_*`, `cache_segment_flags`, `cache_fill`): misses
   grouped by set in order of first occurrence by a stable counting sort on the set's bits (8 a
   pass, ranked with warp ballots); one warp serves one set's misses one by one, choosing
   victims with a warp reduction that has the CPU engine's tie-breaks;
4. spill (`cache_spill_*`): a stable counting sort by queue (warp ballots) puts spilled lines
   into the victim queues in the CPU engine's global order (first occurrence) and drops the ones
   that overflow;
5. tags (`cache_tags_*`) and PVP (`cache_land_*`), as the CPU engine's refresh and prefetch;
   a long-lookahead policy (horizon) recomputes its tags from the K window batches every
   iteration instead (`cache_hz_*`: the next request of every window row, which also tags the
   lines the step fills), the tags the CPU engine keeps incrementally in its lookahead ring.

No host sync inside a step. Every count a step computes (distinct ids, sets with misses, spill
records, the counters and the corrupt-state flag) stays in the step's parameter block on the
device (gpu_codegen.PARAMS); every kernel launches over an upper bound (the batch's requests)
and reads the true count there; scans and the sort are the engine's own kernels over scratch
allocated once for the largest batch (grown only for a larger one), so nothing allocates or
waits inside a step. The host uploads t, n and the window's offsets with one asynchronous copy
from pinned memory before the step and copies the counts back asynchronously after it; it reads
them one step late (`collect`, at the start of the next step, or when the caller reads a result:
`GpuStepResult`), so a corrupt state is raised at most one batch late. With `graph=True` the
step is captured once as a CUDA graph (CuPy's stream capture; one per upper bound and kind of
step) and replayed with one launch; without it (or when capture fails) the same kernels launch
one by one. Unverified on a real GPU as written: speed, the graph capture, the memory model
(the CPU stand-in tests/cuda_emu.py checks the logic and that no host read happens in a step).

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
from lsm_gnn.cache.gpu_codegen import CORRUPT_COUNT, PARAMS, RANK_TILE, SCAN_TILE
from lsm_gnn.cache.policies import REGISTRY, STATE_ORDER, resolve_policy, state_arrays
from lsm_gnn.ownership import local_rows
from lsm_gnn.cache.window import NO_REUSE, TAG_DTYPE
from lsm_gnn.utils import cuda_sources, rowcopy
from lsm_gnn.utils.errors import InputError

NONE_POS = 2**31 - 1   # "no position" in row_first / row_land (cache_common.cuh)
THREADS = 256          # elementwise kernels
FILL_THREADS = 128     # cache_fill: 4 warps per block, one set per warp
COUNT_BLOCKS_MAX = 1024
DIGIT_BITS = 8         # bits of the set a counting-sort pass takes (256 buckets)
P_COMPUTED, P_T, P_N, P_NWIN, P_WOFF = (PARAMS[k] for k in ("P_COMPUTED", "P_T", "P_N", "P_NWIN", "P_WOFF"))
P_ND, P_NSP, P_COUNTS = PARAMS["P_ND"], PARAMS["P_NSP"], PARAMS["P_COUNTS"]
_MEMCPY_H2D, _MEMCPY_D2H, _MEMCPY_D2D = 1, 2, 3   # cudaMemcpyKind

# every kernel this module launches (tests check each is defined in cuda/cache_*.cu)
KERNELS = (
    "cache_step_begin", "cache_dedupe_first", "cache_dedupe_flag", "cache_dedupe_scatter", "cache_dedupe_reset",
    "cache_scan_tiles", "cache_scan_totals", "cache_scan_add", "cache_zero", "cache_digit_count",
    "cache_digit_scatter", "cache_lookup", "cache_count", "cache_miss_keys", "cache_segment_flags",
    "cache_compact_positions", "cache_fill", "cache_tags_reset", "cache_tags_window",
    "cache_spill_assign", "cache_spill_commit", "cache_spill_advance",
    "cache_land_clear", "cache_land_gather", "cache_land_finish", "cache_hz_next", "cache_hz_tags",
    "cache_hz_clear",
) + rowcopy.kernel_names("cache_copy_rows")
# the device data plane's serve step (cuda/cache_serve.cu, in this module's program; launched by
# lsm_gnn.cache.serve.KernelRows for lsm_gnn.cache.device_pool): every request's row into the batch
# tensor from its line, the landing buffer or the mapped staging; fills and spills
SERVE_PREFIX, PUT_PREFIX = "cache_serve_rows", "cache_put_rows"
SERVE_KERNELS = rowcopy.kernel_names(SERVE_PREFIX) + rowcopy.kernel_names(PUT_PREFIX)
# threads per block of every kernel, as launched (the compile check's occupancy reads this)
LAUNCH_THREADS = {**dict.fromkeys(KERNELS, THREADS), "cache_fill": FILL_THREADS, "cache_land_finish": 1,
                  "cache_scan_totals": 32, "cache_step_begin": 32,
                  **dict.fromkeys(rowcopy.kernel_names("cache_copy_rows") + SERVE_KERNELS, rowcopy.THREADS)}


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


def _module():
    """The compiled cache module of the registry as it is now: a policy registered since (one with
    CUDA hooks of its own changes the source) is a new key, compiled once; the key is read from the
    registry alone, no file, since copy_rows asks for the module on every call."""
    return _compiled(tuple((cls.code, cls.kernel_key, cls.cuda_source) for cls in REGISTRY.values()))


@lru_cache(maxsize=None)
def _compiled(registry_key):
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


class GpuStepResult:
    """A step's decisions (StepResult's fields) as views of the engine's device scratch, sized when
    first read: reading a field or `counts` waits for the step's counts (copied back after the step
    without a host sync) and raises StateError if the step found a corrupt state. Valid until the
    next step, as StepResult."""

    def __init__(self, engine, t: int, n: int):
        self._engine, self.t, self.n = engine, t, n
        self._host = None   # the step's counts block P[0, P_COMPUTED) once read

    def _h(self) -> np.ndarray:
        if self._host is None:
            self._engine.collect()
        return self._host

    @property
    def counts(self) -> dict:
        h = self._h()
        c = dict.fromkeys(COUNT_NAMES, 0)
        c["requests"] = self.n
        if self.n:
            k = h[P_COUNTS: P_COUNTS + CORRUPT_COUNT].tolist()
            c.update(distinct=int(h[P_ND]), hits=k[0], victim_hits=k[1], storage_rows=k[2], evictions=k[3],
                     spills=k[4], spill_dropped=k[5], bypassed=k[6])
        return c

    def _view(self, name: str, size: int):
        return getattr(self._engine, name)[:size]

    nd = property(lambda self: int(self._h()[P_ND]) if self.n else 0)
    nsp = property(lambda self: int(self._h()[P_NSP]) if self.n else 0)
    distinct = property(lambda self: self._view("_distinct", self.nd))
    inverse = property(lambda self: self._view("_inverse", self.n))
    status = property(lambda self: self._view("_status", self.nd))
    slot = property(lambda self: self._view("_slot", self.nd))
    src = property(lambda self: self._view("_src", self.nd))
    evicted = property(lambda self: self._view("_evicted", self.nd))
    spill = property(lambda self: self._view("_spill", self.nd))
    spill_slot = property(lambda self: self._view("_spill_slot", self.nsp))
    spill_dst = property(lambda self: self._view("_spill_dst", self.nsp))


class GpuCacheEngine:
    """Decisions of one owner's cache on a GPU; identical to CpuCacheEngine's.

    `graph`: capture the step as a CUDA graph and replay it (falls back to plain launches where
    capture fails: `graph_error` says why). Counters of the host's work: `host_waits` (waits for
    a step's counts, at most one a step, outside the step's device work), `host_syncs_in_steps`
    (reads of device memory while a step is being enqueued: 0 by construction; the emulator test
    and a graph capture check it), `steps`, `graph_steps`."""

    def __init__(self, capacity_rows: int, num_rows: int, static_scores, *, ways: int, policy: str, window: int,
                 refresh_every: int, pvp: bool, victim_depth: int, lookahead: int, num_owners: int = 1,
                 owner: int = 0, victims: DeviceVictimQueues | None = None,
                 landing: DeviceLandingBuffer | None = None, graph: bool = False):
        # what the policy lacks for this engine is said before CUDA is touched (no CuPy needed)
        gpu_codegen.check_gpu_policy(resolve_policy(policy, bool(pvp) and window > 0))
        cp = _cupy()
        self._cp = cp
        host = cp.asnumpy(static_scores) if isinstance(static_scores, cp.ndarray) else static_scores
        self.static = cp.asarray(_cpu.configure_engine(
            self, capacity_rows, num_rows, host, ways, policy, window, refresh_every, pvp, victim_depth,
            num_owners, owner, lookahead, kind="GPU", max_ways=2047))
        for name, obj in (("victims", victims), ("landing", landing)):
            if obj is not None and not isinstance(obj.ids, cp.ndarray):
                raise InputError(f"{name}: the GPU engine needs device buffers "
                                 f"(DeviceVictimQueues / DeviceLandingBuffer), found {type(obj).__name__}")
        self.victims = victims or DeviceVictimQueues(self.window, self.depth)
        self.landing = landing or DeviceLandingBuffer(self.depth)
        if self.victims.depth != self.depth or int(self.landing.ids.size) != self.depth:
            raise InputError("victim queues and landing buffer must have victim_depth lines")
        self.t = 0
        # the registry as the module was generated from it: its state layout is the kernels' parameters
        self._gpu_classes = tuple(gpu_codegen.gpu_policies())
        self._mod = _module()
        self._alloc_state()
        self._scratch_size = 0
        self.graph, self.graph_error = bool(graph), None
        self._graphs: dict = {}
        self._pending = None   # (result, event) of the step whose counts are not read yet
        self._in_step = False
        self.steps = self.graph_steps = self.host_waits = self.host_syncs_in_steps = 0

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
        # (the layout of the GPU policies, the kernels' state parameters: STATE_ORDER, then their slots)
        self.policy_state = state_arrays(self.policy_name, lines, sets, xp=cp, classes=self._gpu_classes)
        for name in STATE_ORDER:
            setattr(self, name, self.policy_state[name])
        self._ps = tuple(self.policy_state.values())  # the kernels' state parameters
        # a long-lookahead policy: each owned row's next request in the window (NO_REUSE between steps)
        self.row_next = cp.full(nloc if self.long_lookahead else 0, int(NO_REUSE), dtype=cp.int32)
        # per owned row v // G: its slot (-1), its first position in the batch being deduped and
        # its position in the landing buffer (NONE_POS between uses)
        self.row_slot = cp.full(nloc, -1, dtype=cp.int32)
        self.row_first = cp.full(nloc, NONE_POS, dtype=cp.int32)
        self.row_land = cp.full(nloc, NONE_POS, dtype=cp.int32)
        # the step's parameter block (gpu_codegen.PARAMS) and its pinned host halves: what the host
        # uploads before a step (t, n, window offsets) and the counts it reads back after
        self._n_upload = P_WOFF - P_T + self.lookahead + 2
        self._P = cp.zeros(P_T + self._n_upload, dtype=cp.int64)
        self._up_mem = cp.cuda.alloc_pinned_memory(8 * self._n_upload)
        self._up = np.frombuffer(self._up_mem, np.int64, self._n_upload)
        self._down_mem = cp.cuda.alloc_pinned_memory(8 * P_COMPUTED)
        self._down = np.frombuffer(self._down_mem, np.int64, P_COMPUTED)
        self._event = cp.cuda.Event(disable_timing=True)   # the last step's counts are on the host
        self._sort_bits = int(sets).bit_length()   # buckets 0..sets (sets: the hits)
        self._no_window = cp.zeros(1, dtype=cp.int64)
        self._win_buf = cp.zeros(1, dtype=cp.int64)   # the window's ids where a captured graph reads them
        self._spill_bits = max(1, (max(self.window, 1) - 1).bit_length())

    def _ensure_scratch(self, n: int) -> None:
        """Scratch for batches of up to n requests, allocated once (grown only for a larger batch):
        nothing allocates inside a step, and a captured graph keeps valid pointers."""
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
        self._flag, self._scanbuf = cp.empty(size, i64), cp.empty(size, i64)
        self._seg_begin, self._dst_of = cp.empty(size, i64), cp.empty(size, i64)
        self._sort = [(cp.empty(size, i64), cp.empty(size, i64)) for _ in range(2)]  # (set, d) ping-pong
        self._batch_buf = cp.empty(size, i64)   # the batch, where a captured graph reads it
        ntiles = -(-size // RANK_TILE)
        table = max(1 << DIGIT_BITS, max(self.window, 1)) * ntiles
        self._hist, self._hist_scan = cp.empty(table, i64), cp.empty(table, i64)   # digit tables, their scans
        self._tile_sums = cp.empty(-(-max(size, table) // SCAN_TILE) + 1, i64)
        self._scratch_size = size
        self._graphs.clear()   # captured pointers are stale

    def _launch(self, name: str, n: int, args: tuple) -> None:
        """Kernel `name` over n threads, LAUNCH_THREADS[name] per block."""
        threads = LAUNCH_THREADS[name]
        if n > 0:
            self._mod.get_function(name)((_blocks(n, threads),), (threads,), args)

    def _scan(self, src, dst, bound: int, *, len_at: int = -1, len_fixed: int = 0, total_at: int = -1) -> None:
        """dst := inclusive scan of src over len = P[len_at] (or len_fixed), launched over `bound`;
        P[total_at] := the total. Three launches, the tile sums in preallocated scratch."""
        tiles = -(-bound // SCAN_TILE)
        args = (self._P, _i32(len_at), _i64(len_fixed))
        self._launch("cache_scan_tiles", tiles * 32, (src, dst) + args + (self._tile_sums,))
        self._launch("cache_scan_totals", 32, (self._tile_sums,) + args + (_i32(total_at),))
        self._launch("cache_scan_add", bound, (dst, self._tile_sums) + args)

    # ---- reading a step's counts (one step late) ---------------------------------------------
    def collect(self) -> None:
        """Wait for the last step's counts (copied back asynchronously), hand them to its result,
        and raise StateError if it found a corrupt state. Called at the start of every step (so a
        corrupt state is raised at most one batch late) and when a result is read."""
        if self._pending is None:
            return
        res, event = self._pending
        self._pending = None
        self._wait(event)
        res._host = self._down.copy()
        bad = int(res._host[P_COUNTS + CORRUPT_COUNT])
        if bad:
            raise _cpu.corrupt_state(res.t, f"{bad} set(s)")

    def _wait(self, event) -> None:
        if self._in_step:
            self.host_syncs_in_steps += 1
        self.host_waits += 1
        event.synchronize()

    # ---- one iteration ------------------------------------------------------------------------
    def refresh_due(self) -> bool:
        return self.t % self.refresh_every == 0

    def step(self, batch, window_ids=None, window_offsets=None) -> GpuStepResult:
        """Iteration self.t: refresh tags (if due) from the window, then serve `batch`.

        As CpuCacheEngine.step: owned, in-range int64 ids (validate with
        geometry.check_owned_ids: the kernels do not bounds-check); window batch k is
        window_ids[window_offsets[k]:window_offsets[k+1]] (NumPy or CuPy arrays; the offsets are
        best on the host: device offsets are read back). Returns at once: the result's fields
        and counts are read when first used (GpuStepResult).
        """
        cp = self._cp
        offsets = None
        if window_offsets is not None and (self.long_lookahead or self.refresh_due()):
            offsets = (cp.asnumpy(window_offsets) if isinstance(window_offsets, cp.ndarray)
                       else np.asarray(window_offsets)).astype(np.int64)[: self.lookahead + 1]
        self.collect()
        batch = cp.ascontiguousarray(cp.asarray(batch, dtype=cp.int64).ravel())
        return self._enqueue(batch, window_ids, offsets)

    def _window(self, window_ids, offsets):
        """(ids, host offsets absolute into ids) of the window batches to read this step, or None
        when no refresh is due. With graphs the ids are copied into a buffer of the engine's (a
        captured graph reads fixed addresses), which grows only for a larger window."""
        cp = self._cp
        if not (self.long_lookahead or self.refresh_due()):
            return None
        if window_ids is None or offsets is None or len(offsets) < 2 or offsets[-1] <= offsets[0]:
            return self._no_window, np.zeros(1, np.int64)
        ids = cp.ascontiguousarray(cp.asarray(window_ids, dtype=cp.int64))
        if not self.graph:
            return ids, offsets
        lo, hi = int(offsets[0]), int(offsets[-1])
        if self._win_buf.size < hi - lo:
            self._win_buf = cp.empty(max(hi - lo, 2 * int(self._win_buf.size)), dtype=cp.int64)
        self._win_buf[: hi - lo] = ids[lo:hi]
        return self._win_buf, offsets - lo

    def _enqueue(self, batch, window_ids, offsets) -> GpuStepResult:
        """Upload t, n and the window offsets, run the step (a graph replay or plain launches),
        copy its counts back; no host read of device memory in between."""
        cp = self._cp
        n = int(batch.size)
        if n >= NONE_POS:
            raise InputError(f"a batch holds at most {NONE_POS - 1} requests, found {n}")
        self._ensure_scratch(max(n, 1))
        win = self._window(window_ids, offsets)
        nwin = len(win[1]) - 1 if win is not None else 0
        up = self._up
        up[0], up[1], up[2] = self.t, n, nwin
        if win is not None:
            up[3: 3 + nwin + 1] = win[1]
        stream = cp.cuda.get_current_stream()
        self._in_step = True
        try:
            cp.cuda.runtime.memcpyAsync(self._P.data.ptr + 8 * P_T, self._up_mem.ptr, 8 * (3 + nwin + 1),
                                        _MEMCPY_H2D, stream.ptr)
            span = int(win[1][-1] - win[1][0]) if win is not None else 0
            if self.graph and n:
                self._replay_graph(batch, n, win, span, stream)
            else:
                self._step_kernels(batch, n, win, span)
            cp.cuda.runtime.memcpyAsync(self._down_mem.ptr, self._P.data.ptr, 8 * P_COMPUTED, _MEMCPY_D2H,
                                        stream.ptr)
            event = self._event   # reused: the previous step's record was waited for (collect)
            event.record(stream)
        finally:
            self._in_step = False
        res = GpuStepResult(self, self.t, n)
        self._pending = (res, event)
        self.steps += 1
        return res

    def _replay_graph(self, batch, n: int, win, span: int, stream) -> None:
        """The step as one graph launch: the batch goes to the scratch buffer the graph reads, and
        the graph is captured once per (scratch size, kind of step, window array)."""
        cp = self._cp
        if batch.data.ptr != self._batch_buf.data.ptr:
            cp.cuda.runtime.memcpyAsync(self._batch_buf.data.ptr, batch.data.ptr, 8 * n, _MEMCPY_D2D, stream.ptr)
        wspan = 0 if win is None else int(win[0].size)   # an upper bound of every window in this buffer
        key = (self._scratch_size, win is None, None if win is None else (win[0].data.ptr, wspan))
        g = self._graphs.get(key)
        if g is None:
            for name in KERNELS:   # load the module before capturing (a load inside a capture may fail)
                self._mod.get_function(name)
            cap = cp.cuda.Stream(non_blocking=True)
            try:
                with cap:
                    # relaxed: another thread's CUDA calls (a trainer's) are not refused meanwhile
                    relaxed = getattr(cp.cuda.runtime, "streamCaptureModeRelaxed", None)
                    if relaxed is None:
                        cap.begin_capture()
                    else:
                        cap.begin_capture(relaxed)
                    try:
                        self._step_kernels(self._batch_buf, self._scratch_size, win, wspan)
                    finally:
                        g = cap.end_capture()
            except Exception as e:  # a capture the driver refuses: plain launches from now on
                self.graph, self.graph_error = False, f"{type(e).__name__}: {e}"
                return self._step_kernels(batch, n, win, span)
            self._graphs[key] = g
        g.launch(stream)
        self.graph_steps += 1

    def _step_kernels(self, batch, bound: int, win, span: int) -> None:
        """Every kernel of a step, launched over upper bounds (bound >= the batch's requests, span
        >= the window's ids): tags from the window (if due), then the batch served."""
        self._launch("cache_step_begin", 32, (self._P,))
        if win is not None:
            self._refresh(win[0], span)
        if bound:
            self._serve(batch, bound)
        if win is not None and self.long_lookahead:
            self._launch("cache_hz_clear", span, (win[0], self._P, _i64(self.num_owners), self.row_next))

    def _refresh(self, ids, span: int) -> None:
        """Tags for iteration t from the window batches (offsets in P, absolute into ids)."""
        lines, G = self.geometry.lines, _i64(self.num_owners)
        if self.long_lookahead:
            # horizon: row_next := each window row's next request, line tags := their row's (row_next
            # is cleared again after the step: cache_hz_clear)
            self._launch("cache_hz_next", span, (ids, self._P, G, self.row_next))
            self._launch("cache_hz_tags", lines, (self.keys, _i64(lines), G, self.row_next, self.tag))
            return
        self._launch("cache_tags_reset", lines, (self.tag, _i64(lines)))
        self._launch("cache_tags_window", span, (ids, self._P, G, self.row_slot, self.tag))

    def _serve(self, batch, n: int) -> None:
        """The batch's kernels over n >= its requests; every count stays in P."""
        G, sets, P = _i64(self.num_owners), _i64(self.geometry.sets), self._P
        # 1. dedupe in order of first occurrence; P[P_ND] := the distinct ids
        self._launch("cache_dedupe_first", n, (batch, P, G, self.row_first))
        self._launch("cache_dedupe_flag", n, (batch, P, G, self.row_first, self._flag))
        self._scan(self._flag, self._scanbuf, n, len_at=P_N, total_at=P_ND)
        self._launch("cache_dedupe_scatter", n, (batch, P, G, self.row_first, self._scanbuf, self._distinct,
                                                 self._inverse))
        # 2. lookup every distinct id against the state at the start of the batch
        self._launch("cache_lookup", n, (self._distinct, P, G, _i32(self.code), self.row_slot, self.row_land)
                     + self._ps + (self._status, self._slot, self._src, self._evicted, self._spill))
        # 3. misses grouped by set, in order of first occurrence inside each set: a stable counting
        # sort of the distinct ids by bucket (set; hits last), 8 bits a pass
        self._launch("cache_miss_keys", n, (self._distinct, self._status, P, G, sets) + self._sort[0])
        sset, sd = self._sort_by_bucket(n)
        self._launch("cache_segment_flags", n, (sset, P, sets, self._flag))
        self._scan(self._flag, self._scanbuf, n, len_at=P_ND, total_at=PARAMS["P_NSEG"])
        self._launch("cache_compact_positions", n, (self._flag, self._scanbuf, P, self._seg_begin))
        self._launch("cache_fill", min(n, self.geometry.sets) * 32, (   # a warp per set with misses
            sset, sd, P, self._seg_begin, self._distinct, G, sets, _i32(self.geometry.ways), _i32(self.code),
            _i64(self.window), _i32(self.pvp), self.keys, self.pagerank, self.tag) + self._ps + (
            self.set_fill, self.row_slot, self.static, self.row_next, self.row_first, self._inverse, self._status,
            self._slot, self._evicted, self._spill, P[P_COUNTS:]))
        # row_first served cache_fill (a line filled in this batch is not spilled); reset it
        self._launch("cache_dedupe_reset", n, (self._distinct, P, G, self.row_first))
        # 4. spill candidates into the victim queues, in order of first occurrence
        if self.pvp:
            self._spill_to_queues(n)
        # counts (integer sums: exact whatever the order)
        blocks = min(_blocks(n), COUNT_BLOCKS_MAX)
        self._mod.get_function("cache_count")((blocks,), (LAUNCH_THREADS["cache_count"],), (
            self._status, self._evicted, self._spill, self._slot, P, P[P_COUNTS:]))

    def _sort_by_bucket(self, n: int):
        """Stable counting sort of the P[P_ND] pairs (bucket, d) in self._sort[0] by bucket (0..sets),
        8 bits a pass over the bits of `sets` only; returns the sorted (buckets, d) buffers."""
        (key, val), (key_out, val_out) = self._sort
        for shift in range(0, self._sort_bits, DIGIT_BITS):
            self._count_sort_pass(key, val, key_out, val_out, n, shift, min(DIGIT_BITS, self._sort_bits - shift))
            (key, val), (key_out, val_out) = (key_out, val_out), (key, val)
        return key, val

    def _count_sort_pass(self, key, val, key_out, val_out, n: int, shift: int, bits: int) -> None:
        """One stable counting-sort pass of (key, val), nd = P[P_ND] of them, by bits [shift, shift
        + bits) of the key."""
        ntiles = -(-n // RANK_TILE)
        table = (1 << bits) * ntiles
        self._launch("cache_zero", table, (self._hist, _i64(table)))
        args = (self._P, _i32(P_ND), _i64(0), _i32(shift), _i32(bits), _i64(ntiles))
        self._launch("cache_digit_count", n, (key,) + args + (self._hist,))
        self._scan(self._hist, self._hist_scan, table, len_fixed=table)
        self._launch("cache_digit_scatter", ntiles * 32, (key, val, key_out, val_out) + args
                     + (self._hist, self._hist_scan))

    def _spill_to_queues(self, n: int) -> None:
        W, ntiles = max(self.window, 1), -(-n // RANK_TILE)
        table = W * ntiles
        bits, scan = self._spill_bits, self._hist_scan
        self._launch("cache_zero", table, (self._hist, _i64(table)))
        self._launch("cache_digit_count", n, (self._spill, self._P, _i32(P_ND), _i64(0), _i32(0), _i32(bits),
                                              _i64(ntiles), self._hist))
        self._scan(self._hist, scan, table, len_fixed=table)
        self._launch("cache_spill_assign", ntiles * 32, (
            self._spill, self._evicted, self._P, _i32(bits), _i64(ntiles), _i64(W), _i64(self.depth), self._hist,
            scan, self.victims.count, self.victims.ids, self._dst_of, self._flag))
        self._scan(self._flag, self._scanbuf, n, len_at=P_ND, total_at=P_NSP)
        self._launch("cache_spill_commit", n, (self._flag, self._scanbuf, self._dst_of, self._slot, self._P,
                                               self._spill_slot, self._spill_dst))
        self._launch("cache_spill_advance", W, (scan, _i64(ntiles), _i64(W), _i64(self.depth), self.victims.count))

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
        counts per batch (a host array), as CpuCacheEngine.replay. Batch t's counts are read at
        the start of batch t + 1 (no host sync inside a step)."""
        cp = self._cp
        if self.t != 0:
            raise InputError("replay starts from a fresh engine (t = 0)")
        offsets = np.ascontiguousarray(cp.asnumpy(offsets) if isinstance(offsets, cp.ndarray)
                                       else offsets, dtype=np.int64)
        flat = cp.ascontiguousarray(cp.asarray(flat, dtype=cp.int64))
        nb = len(offsets) - 1
        out = np.zeros((nb, len(COUNT_NAMES)), np.int64)
        prefetched = cp.zeros(max(nb, 1), dtype=cp.int64)
        results = []
        for t in range(nb):
            self.collect()
            win = None
            if self.long_lookahead or self.refresh_due():
                e = min(t + 1 + self.lookahead, nb)
                win = offsets[min(t + 1, nb): e + 1]
            results.append(self._enqueue(flat[offsets[t]: offsets[t + 1]], flat, win))
            self.end_iteration()
            if self.pvp:
                prefetched[t: t + 1] = self.landing.n[0:1]
        self.collect()
        for t, res in enumerate(results):
            out[t] = [res.counts[k] for k in COUNT_NAMES]
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

    def sync_stats(self) -> dict:
        """The host's work per step: waits for counts, host reads inside steps, graph replays."""
        steps = max(self.steps, 1)
        return {"steps": self.steps, "graph_steps": self.graph_steps, "graph_error": self.graph_error,
                "host_waits_per_step": self.host_waits / steps,
                "host_syncs_per_step": self.host_syncs_in_steps / steps}

    def host_state(self) -> dict[str, np.ndarray]:
        """Every piece of state as host arrays under the CPU engine's meanings (row_land -1 for
        'not in the landing buffer'), for comparisons with CpuCacheEngine."""
        self.collect()
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

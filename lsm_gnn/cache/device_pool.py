"""Row data of one owner's cache on a torch device: cache lines, victim queues, landing buffer.

The tiers of LSM-GNN, as tensors: the cache lines and the PVP landing buffer on `device`, the W
victim queues in host memory (pinned on CUDA, so that spills and prefetches are DMA copies run
by the copy engines beside the compute). Unlike the CPU engine's RowPool, which moves a row
between tiers by moving its index (all tiers are the same RAM there), this pool copies rows: the
bytes a spill or a prefetch moves are the bytes a GPU moves.

Rows are viewed as the widest integer word dividing the row size (int64, int32 or uint8): a
row gather then moves 512 words of a 4 KiB row rather than 4096 bytes.

One batch, in this order (the caller's plan, lsm_gnn.cache.serve.plan_batch, says which rows):
`serve(LINE)` (the hits' rows from their lines, before any line is written), `spill_records`
(evicted lines to their queue rows, read before any fill), `serve(LANDING)` (victim hits from the
landing buffer), `arrived` (the staged storage rows where the serve reads them), `serve(STAGED)`
(storage rows to the batch tensor), `fill` (the last fill of each slot: its row, from the batch
tensor, into the line), then `land` (PVP: queue q -> landing buffer). The moves run on one of two
engines (lsm_gnn.cache.serve): on CUDA with CuPy, the warp-per-row kernels of cuda/cache_serve.cu,
which read the staging buffer in place as mapped pinned memory (no upload) and write spills
straight into the pinned queues; otherwise (the CPU, or CUDA without CuPy) torch index ops of no
data-dependent size. The older moves (`gather_lines`, `spill` by runs, `gather_landed`, `upload`,
`place_misses`) stay for callers of their own and the torch engine on CUDA.

Streams on CUDA (on the CPU every copy is synchronous and the same code runs):
* the current stream runs the gathers, serves, spill kernels and fills, in the order above (the
  data plane makes it its own fetch stream: lsm_gnn.sources.cached_device);
* `h2d_stream` uploads storage rows (torch engine); the current stream waits for it, and the next
  `staging` waits (host) until the upload (kernel engine: the serve that read the staging in
  place) left the pinned buffer before the reader refills it;
* `d2h_stream` copies spilled rows (gathered into a scratch tensor on the current stream, so a
  later fill of the same line cannot change them) into the pinned queues; it waits for the last
  landing copy, which may still be reading the queue rows a spill overwrites;
* `land_stream` (the lowest priority) copies queue q into the landing buffer after the batch's
  reads of the landing buffer and its spills; the next batch's reads of the landing buffer wait
  for it, so it overlaps the train step in between.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext

import numpy as np
import torch

from lsm_gnn.cache import gpu_engine
from lsm_gnn.cache.rowpool import _available_memory
from lsm_gnn.cache.serve import LANDING, LINE, STAGED, KernelRows, TorchRows
from lsm_gnn.storage.base import aligned_empty
from lsm_gnn.utils.errors import ConfigError, InputError


ROWS_ENGINE_ENV = "LSM_GNN_ROWS_ENGINE"   # torch | kernel: which engine moves the rows (default: kernel on CUDA)


def word_dtype(row_bytes: int) -> torch.dtype:
    """The widest integer dtype whose size divides `row_bytes`."""
    row_bytes = int(row_bytes)
    if row_bytes < 1:
        raise InputError(f"rows must hold at least one byte, found {row_bytes}")
    return torch.int64 if row_bytes % 8 == 0 else torch.int32 if row_bytes % 4 == 0 else torch.uint8


def gather_rows(src: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out[k] = src[index[k]]: one index_select kernel on the device of `src` (the hit path)."""
    return torch.index_select(src, 0, index, out=out)


def spill_runs(dst: np.ndarray, depth: int) -> list[tuple[int, int, int]]:
    """(i, j, dst[i]) for each run of consecutive queue rows dst[i:j] (ascending) inside one queue
    of `depth` rows: one DMA copy each (DeviceRowPool.spill)."""
    dst = np.asarray(dst)
    if not len(dst):
        return []
    cut = np.flatnonzero((np.diff(dst) != 1) | (np.diff(dst // max(depth, 1)) != 0)) + 1
    starts, ends = np.concatenate([[0], cut]), np.concatenate([cut, [len(dst)]])
    return [(int(i), int(j), int(dst[i])) for i, j in zip(starts, ends) if j > i]


def _address(rows) -> int:
    """The host address of an array's or a tensor's first element (the key of a staging buffer)."""
    if isinstance(rows, torch.Tensor):
        return rows.data_ptr()
    return int(rows.__array_interface__["data"][0])


class DeviceRowPool:
    """`lines` cache lines of `row_bytes` on `device`; with `pvp`, `window` queues of `depth`
    rows in (pinned) host memory and a landing buffer of `depth` rows on `device`."""

    def __init__(self, lines: int, row_bytes: int, *, window: int = 0, depth: int = 0, pvp: bool = False,
                 device="cpu", rows_engine=None):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        if self.cuda and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.lines, self.row_bytes = int(lines), int(row_bytes)
        self.window, self.depth = (int(window), int(depth)) if pvp else (0, 0)
        self.word = word_dtype(self.row_bytes)
        self.row_words = self.row_bytes // torch.empty(0, dtype=self.word).element_size()
        host_rows = self.window * self.depth + (0 if self.cuda else self.lines + self.depth)
        avail = _available_memory()
        if avail is not None and host_rows * self.row_bytes > avail:
            raise ConfigError("<cache config>", "cache.capacity_fraction / cache.victim_buffer.depth",
                              f"the host tiers need {host_rows * self.row_bytes} bytes, {avail} are available")
        rows = (self.row_words,)
        # one scratch line past the last: the torch engine's masked fills land there (a fixed-size
        # index_copy_ instead of a compaction that would make the host wait); `cache` is the lines
        self._lines = torch.zeros((self.lines + 1,) + rows, dtype=self.word, device=self.device)
        self.cache = self._lines[: self.lines]
        self.queues = torch.zeros((self.window * self.depth,) + rows, dtype=self.word, pin_memory=self.cuda)
        self.landing = torch.zeros((self.depth,) + rows, dtype=self.word, device=self.device)
        self._stage = None
        # events: per staging buffer (its host address), the last device read of its rows (an upload,
        # or the serve kernel reading it in place); the last landing copy
        self._read_by: dict[int, object] = {}
        self._landed = None
        self.h2d_stream = self.d2h_stream = self.land_stream = None
        if self.cuda:
            least, greatest = torch.cuda.Stream.priority_range()
            # storage rows are on the fetch's critical path; the PVP copy is not (it has a whole
            # train step to finish) and must not take the device from it
            self.h2d_stream = torch.cuda.Stream(self.device, priority=greatest)
            self.d2h_stream = torch.cuda.Stream(self.device)
            self.land_stream = torch.cuda.Stream(self.device, priority=least)
        self._mapped = {}   # host address -> device address of mapped pinned rows (staging, queues)
        self.rows = rows_engine if rows_engine is not None else self._default_rows()

    def _default_rows(self):
        """The engine of the row moves: the serve kernels on CUDA where CuPy is there, else torch;
        $LSM_GNN_ROWS_ENGINE = torch | kernel overrides (e.g. to compare them on one GPU)."""
        want = os.environ.get(ROWS_ENGINE_ENV, "").strip().lower()
        if want not in ("", "kernel", "torch"):
            raise InputError(f"${ROWS_ENGINE_ENV}: expected 'kernel' or 'torch', found {want!r}")
        if want == "torch" or not self.cuda:
            return TorchRows()
        if not gpu_engine.available():
            if want == "kernel":
                raise InputError(f"${ROWS_ENGINE_ENV}=kernel: the serve kernels need CuPy with a usable GPU "
                                 f"(the `gpu` extra)")
            return TorchRows()
        return KernelRows(gpu_engine._module(), self._address, self._cupy_on_current)

    @property
    def zero_copy(self) -> bool:
        """True when the serve reads staged rows in place (mapped pinned memory) and spills are
        kernel writes into the queues: the kernel engine."""
        return bool(self.rows.zero_copy)

    def _address(self, t: torch.Tensor) -> int:
        """Where a kernel reads tensor t: its address on the device, or the device address of
        pinned host memory (looked up once per buffer: lsm_gnn.utils.mapped)."""
        if t.device.type != "cpu" or not self.cuda:
            return t.data_ptr()
        from lsm_gnn.utils.mapped import MappedHost

        ptr = t.data_ptr()
        got = self._mapped.get(ptr)
        if got is None:
            got = self._mapped[ptr] = MappedHost(ptr, t.numel() * t.element_size(), pinned=True,
                                                 what="row pool's pinned host rows").device_ptr
        return got

    @contextmanager
    def _cupy_on_current(self):
        """CuPy's launches on torch's current stream and device (ordered with the torch work)."""
        import cupy

        ptr = torch.cuda.current_stream(self.device).cuda_stream
        stream = cupy.cuda.ExternalStream(ptr) if ptr else cupy.cuda.Stream.null
        with cupy.cuda.Device(self.device.index), stream:
            yield

    @property
    def victim_bytes(self) -> int:
        """Bytes of the victim queues (pinned host memory on a device) and the landing buffer."""
        return (self.window + 1) * self.depth * self.row_bytes

    # ---- streams ------------------------------------------------------------------------------
    def _current(self):
        return torch.cuda.current_stream(self.device) if self.cuda else None

    def _on(self, stream):
        return torch.cuda.stream(stream) if stream is not None else nullcontext()

    def _event(self, stream):
        ev = torch.cuda.Event()
        ev.record(stream)
        return ev

    def _wait_landed(self, stream=None) -> None:
        if self._landed is not None:
            (stream or self._current()).wait_event(self._landed)

    def synchronize(self) -> None:
        """Wait until every copy issued so far has finished (tests, inspection, close)."""
        if self.cuda:
            torch.cuda.synchronize(self.device)

    # ---- storage rows -------------------------------------------------------------------------
    def host_rows(self, n: int) -> torch.Tensor:
        """New host rows [n, row_words] a storage read can fill and `upload` can copy from:
        pinned on CUDA (a DMA copy that does not wait for the device), page-aligned on the CPU."""
        if self.cuda:
            return torch.empty((n, self.row_words), dtype=self.word, pin_memory=True)
        np_word = torch.empty(0, dtype=self.word).numpy().dtype
        return torch.from_numpy(aligned_empty((n, self.row_words), np_word))

    def wait_uploaded(self, host_rows=None) -> None:
        """Wait (host) until the device has read the staging buffer `host_rows` (an array or tensor
        whose first row is the buffer's; None: every buffer) by its last `upload` or in-place
        `serve`, before a reader refills it. With two buffers used in turn, the wait is for the
        batch before the last, whose reads are long done: no wait on the batch just served."""
        if host_rows is None:
            events, self._read_by = list(self._read_by.values()), {}
        else:
            ev = self._read_by.pop(_address(host_rows), None)
            events = [] if ev is None else [ev]
        for ev in events:
            ev.synchronize()

    def _read_on(self, host_rows: torch.Tensor, stream) -> object:
        """Note that the work queued on `stream` so far reads `host_rows` (a staging buffer)."""
        ev = self._read_by[host_rows.data_ptr()] = self._event(stream)
        return ev

    def staging(self, n: int) -> torch.Tensor:
        """Host rows [n, row_words] (`host_rows`) for the next storage read, reused across
        batches: first waits until the last upload has left it."""
        self.wait_uploaded()
        if self._stage is None or len(self._stage) < n:
            self._stage = self.host_rows(max(n, 2 * (0 if self._stage is None else len(self._stage)), 1024))
        return self._stage[:n]

    def upload(self, host_rows: torch.Tensor) -> torch.Tensor:
        """Staged rows on the device (on the CPU: the same tensor). The current stream waits for
        the copy; the next `staging` waits until it has read the pinned rows."""
        if not self.cuda:
            return host_rows
        cur = self._current()
        with torch.cuda.stream(self.h2d_stream):
            rows = host_rows.to(self.device, non_blocking=True)
        cur.wait_event(self._read_on(host_rows, self.h2d_stream))
        rows.record_stream(cur)  # allocated on the copy stream, read on the current one
        return rows

    # ---- one batch, from the plan's descriptors (lsm_gnn.cache.serve) -------------------------
    def arrived(self, host_rows: torch.Tensor) -> torch.Tensor:
        """The staged storage rows where `serve` reads them: the pinned rows themselves with the
        kernel engine (read in place over PCIe), else uploaded (`upload`)."""
        return host_rows if self.zero_copy else self.upload(host_rows)

    def serve(self, src: torch.Tensor, out: torch.Tensor, kinds: int, staged: torch.Tensor | None = None) -> None:
        """out[i] := the row descriptor src[i] names (line, landing row or staged row), for the
        requests whose kind is in the bit set `kinds` (lsm_gnn.cache.serve.bits)."""
        if not len(src):
            return
        if self.cuda and kinds & (1 << LANDING):
            self._wait_landed()
        self.rows.serve({LINE: self.cache, LANDING: self.landing, STAGED: staged}, src, out, kinds)
        if self.cuda and self.zero_copy and staged is not None and kinds & (1 << STAGED):
            # the kernel read the pinned staging in place: the reader may refill it after this
            self._read_on(staged, self._current())

    def fill(self, fill_slot: torch.Tensor, fill_req: torch.Tensor, out: torch.Tensor) -> None:
        """Line fill_slot[d] := out[fill_req[d]] where fill_slot[d] >= 0 (the last fill of each
        slot: the miss's row, from the batch tensor already on the device)."""
        if len(fill_slot):
            self.rows.put(out, fill_req, self._lines, fill_slot, scratch=self.lines)

    def spill_records(self, slots: torch.Tensor, dst: torch.Tensor, dst_host: np.ndarray) -> None:
        """Line slots[k] -> queue row dst[k] (the engine's records, any order; `dst_host`: dst on
        the host). Kernel engine: warp writes into the mapped pinned queues; torch on the CPU: one
        index_copy_; torch on CUDA: DMA copies of the runs of consecutive queue rows (`spill`)."""
        if not len(slots):
            return
        if self.zero_copy:
            if self.cuda:
                self._wait_landed()   # the last landing copy may still read these queue rows
            self.rows.put(self.cache, slots, self.queues, dst)
        elif not self.cuda:
            self.queues.index_copy_(0, dst, self.cache.index_select(0, slots))
        else:
            order = np.argsort(dst_host, kind="stable")
            index = torch.from_numpy(order.astype(np.int64)).pin_memory().to(self.device, non_blocking=True)
            self.spill(slots.index_select(0, index), spill_runs(np.asarray(dst_host)[order], self.depth))

    # ---- one batch, the older moves (see the module docstring for the order) -------------------
    def gather_lines(self, slots: torch.Tensor, out: torch.Tensor) -> None:
        """out[i] = line slots[i]."""
        if len(slots):
            gather_rows(self.cache, slots, out)

    def spill(self, slots: torch.Tensor, runs) -> None:
        """The lines `slots` (device indices, in queue-position order) go to the victim queues:
        rows [i, j) of them to queue rows [dst, dst + j - i) for each (i, j, dst) in `runs`."""
        if not len(slots):
            return
        rows = self.cache.index_select(0, slots)  # now: the batch's fills come after
        stream = self.d2h_stream
        if stream is not None:
            stream.wait_stream(self._current())
            self._wait_landed(stream)  # the last landing copy may still read these queue rows
        with self._on(stream):
            for i, j, dst in runs:
                self.queues[dst: dst + j - i].copy_(rows[i:j], non_blocking=True)
        if stream is not None:
            rows.record_stream(stream)

    def gather_landed(self, src: torch.Tensor, req: torch.Tensor, out: torch.Tensor) -> None:
        """out[req[k]] = landing row src[k] (victim hits)."""
        if len(req):
            if self.cuda:
                self._wait_landed()
            out.index_copy_(0, req, self.landing.index_select(0, src))

    def place_misses(self, staged: torch.Tensor, st_req, st_k, fill_slot, fill_k, vfill_slot, vfill_src,
                     out: torch.Tensor) -> None:
        """Storage rows (staged[k]: the k-th storage read) to their requests out[st_req] and into
        lines fill_slot; victim hits' landing rows into lines vfill_slot. The fills are the last
        fill of each slot in the batch only, so every slot is written at most once."""
        if len(st_req):
            out.index_copy_(0, st_req, staged.index_select(0, st_k))
        if len(fill_slot):
            self.cache.index_copy_(0, fill_slot, staged.index_select(0, fill_k))
        if len(vfill_slot):
            if self.cuda:
                self._wait_landed()
            self.cache.index_copy_(0, vfill_slot, self.landing.index_select(0, vfill_src))

    def land(self, queue: int, n: int) -> None:
        """PVP: the first n rows of queue `queue` become the landing buffer (pinned host ->
        device, on the low-priority stream)."""
        if n > self.depth or not 0 <= queue < max(self.window, 1):
            raise InputError(f"row pool: cannot land {n} rows of queue {queue} ({self.window} queues x {self.depth})")
        if not n:
            return
        src = self.queues[queue * self.depth: queue * self.depth + n]
        stream = self.land_stream
        if stream is not None:
            stream.wait_stream(self._current())  # this batch's reads of the landing buffer
            stream.wait_stream(self.d2h_stream)  # this batch's spills into the queue
        with self._on(stream):
            self.landing[:n].copy_(src, non_blocking=True)
        if stream is not None:
            self._landed = self._event(stream)

    def close(self) -> None:
        self.synchronize()
        self.cache = self._lines = self.queues = self.landing = self._stage = None
        self._mapped = {}
        self._read_by, self._landed = {}, None

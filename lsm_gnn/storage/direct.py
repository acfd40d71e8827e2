"""The direct reader: O_DIRECT block reads issued in parallel with a deep queue.

A batch of consecutive rows whose file range starts and ends on block boundaries is read straight
into the caller's `out` when `out` is block-aligned (`FeatureStore.empty_rows` allocates such
buffers; any C-contiguous `out` for the buffered reader): the same 1 MiB reads, no staging buffer,
no copy. Sequential scans then cost the CPUs almost nothing besides the system calls. So is a batch
of distinct rows in increasing order whose rows are whole blocks (the cache's misses: 4 KiB rows of
float32 x 1024): each read lands where its rows belong in `out` (`sparse_in_place`).

For every other batch the distinct rows are turned into a read plan (`base.plan_reads`: one read per
distinct block, adjacent blocks merged), the reads land in one page-aligned staging buffer
(anonymous mmap, as O_DIRECT requires), and the rows are gathered out of it in the order asked for.

Three backends issue the reads:
- `aio` (storage/aio.py): one compiled loop keeps `queue_depth` reads in flight with Linux native
  AIO; the default (`auto`) for O_DIRECT, because it costs less than half the CPU time per read;
- `threads`: a pool of worker threads, each looping over its share of the plan with blocking
  `pread` calls in compiled code (numba, GIL released), so `threads` reads are in flight at once;
- `io_uring`: one ring of `queue_depth` entries through `liburing==2024.5.3` (optional; used
  only when that exact version imports, because newer wheels crash on CPUs without AVX-512).
Without AIO `auto` picks the thread pool: each worker runs a numba loop of `pread` calls without
the GIL, so Python pays nothing per read; through liburing's Python binding every read costs
several Python calls, and io_uring measured about half as fast here (docs/storage.md).

A short read is retried for the rest of its range; a read that returns nothing (the file ends
before its metadata says) or fails is a DataError naming the file, never zero-filled rows.
`BufferedStore` (buffered.py) is the same plan through the page cache (no O_DIRECT).
"""

from __future__ import annotations

import mmap
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from lsm_gnn.storage.aio import AioContext, aio_reads, aio_status
from lsm_gnn.storage.base import FeatureStore, ReadPlan, plan_reads
from lsm_gnn.utils.errors import DataError, InputError
from lsm_gnn.utils.native import copy_rows as _copy_rows

LIBURING_VERSION = "2024.5.3"
_preadv = os.preadv  # module attributes so tests can inject short reads and failures

# libc's pread, called from compiled code by symbol name (so the compiled loop can be cached)
_pread = numba.types.ExternalFunction(
    "pread", numba.types.int64(numba.types.int32, numba.types.uint64, numba.types.uint64, numba.types.int64))


@numba.njit(cache=True, nogil=True)
def _pread_gather(fd, base, buf, offs, boffs, lens, start, step, got, src, order, seg, row_bytes,
                  out):  # pragma: no cover - compiled
    """For reads i = start, start+step, ...: got[i] = pread(...), then copy that read's rows to `out`.

    Runs without the GIL, so each calling thread keeps one read in flight with no Python work per
    read, and the gather overlaps the other threads' reads. Failed (-1) and short reads are left
    for the caller to finish in Python (their rows are not copied here).
    """
    for i in range(start, offs.shape[0], step):
        g = _pread(fd, base + boffs[i], lens[i], offs[i])
        got[i] = g
        if g == lens[i]:
            _copy_rows(buf, src, order, seg[i], seg[i + 1], row_bytes, out)


_native_reads = _pread_gather


def liburing_status() -> tuple[bool, str]:
    """Whether the io_uring backend can run here, and why not."""
    try:
        import importlib.metadata as md

        version = md.version("liburing")
    except Exception:
        return False, "liburing is not installed"
    if version != LIBURING_VERSION:
        return False, f"liburing {version} installed; only {LIBURING_VERSION} is known to work here"
    try:
        import liburing  # noqa: F401
    except Exception as e:  # pragma: no cover - depends on the build
        return False, f"liburing does not import: {e}"
    return True, "ok"


class _Staging:
    """A page-aligned buffer (anonymous mmap) that grows to the largest batch seen."""

    def __init__(self):
        self.mm = None
        self.size = 0

    def ensure(self, nbytes: int) -> tuple[memoryview, np.ndarray]:
        if nbytes > self.size:
            self.mm = self.mv = self.arr = None  # the old buffer is freed once nothing refers to it
            self.size = max(nbytes, 2 * self.size, mmap.PAGESIZE)
            self.size = -(-self.size // mmap.PAGESIZE) * mmap.PAGESIZE
            self.mm = mmap.mmap(-1, self.size)
            self.mv = memoryview(self.mm)
            self.arr = np.frombuffer(self.mm, dtype=np.uint8)
        return self.mv, self.arr

    def close(self):
        if self.mm is not None:
            mm, self.mm, self.mv, self.arr, self.size = self.mm, None, None, None, 0
            try:
                mm.close()
            except BufferError:  # a view is still alive somewhere: garbage collection frees it
                pass


class BlockStore(FeatureStore):
    """Rows read in whole blocks with pread-style I/O; base of the direct and buffered readers."""

    reader_name = "block"
    o_direct = False
    sparse_in_place = True
    """Distinct rows in increasing order, each a whole number of blocks, read straight into `out` (the
    cache's storage reads: the misses of a batch, sorted); False: through the staging buffer (the
    baseline of `lsm-gnn bench inplace`)."""

    def __init__(self, path, num_rows: int, dim: int, dtype, row_stride: int, file_bytes: int | None = None,
                 *, backend: str = "auto", threads: int = 64, queue_depth: int = 128, block_size: int = 4096,
                 max_io_bytes: int = 1 << 20, row_map=None):
        super().__init__(num_rows, dim, dtype, path=path, row_map=row_map)
        if block_size <= 0 or block_size % 512:
            raise InputError(f"block_size must be a positive multiple of 512, found {block_size}")
        if max_io_bytes < block_size:
            raise InputError(f"max_io_bytes ({max_io_bytes}) must be at least block_size ({block_size})")
        if threads < 1 or queue_depth < 1:
            raise InputError(f"threads and queue_depth must be at least 1, found {threads}, {queue_depth}")
        self.row_stride, self.block, self.max_io_bytes = row_stride, block_size, max_io_bytes
        need = num_rows * row_stride if file_bytes is None else file_bytes
        self.fd = self._open()
        try:
            size = os.fstat(self.fd).st_size
            if size < need:
                raise DataError(self.path, "file is shorter than its metadata says", expected=f"{need} bytes",
                                found=f"{size} bytes")
            self.backend = self._pick_backend(backend)
        except BaseException:
            os.close(self.fd)
            raise
        self.threads, self.queue_depth = threads, queue_depth
        self._staging = _Staging()
        self._pool: ThreadPoolExecutor | None = None
        self._ring = None
        self._aio = None
        self._lock = threading.Lock()  # one batch at a time per store (the staging buffer is shared)
        self.in_place_batches = 0  # batches read straight into the caller's buffer (no staging)
        depth = threads if self.backend == "threads" else queue_depth
        self.path_info = {"reader": self.reader_name, "backend": self.backend, "queue_depth": depth,
                          "o_direct": self.o_direct, "block_size": block_size, "max_io_bytes": max_io_bytes,
                          "file": self.path}

    # ---- setup ---------------------------------------------------------------------------
    def _open(self) -> int:
        flags = os.O_RDONLY | (os.O_DIRECT if self.o_direct else 0)
        try:
            return os.open(self.path, flags)
        except FileNotFoundError:
            raise DataError(self.path, "feature file does not exist") from None
        except OSError as e:
            if self.o_direct and e.errno == 22:
                raise DataError(self.path, "this filesystem does not support O_DIRECT "
                                "(use reader='buffered')") from None
            raise DataError(self.path, f"cannot open feature file: {e.strerror}") from None

    def _pick_backend(self, backend: str) -> str:
        if backend not in ("auto", "aio", "threads", "io_uring"):
            raise InputError(f"backend must be auto, aio, threads or io_uring, found {backend!r}")
        if backend == "io_uring":
            ok, why = liburing_status()
            if not ok:
                raise InputError(f"io_uring backend unavailable: {why}")
            return "io_uring"
        # buffered AIO runs synchronously inside io_submit: only O_DIRECT gains from it
        if backend == "aio" or (backend == "auto" and self.o_direct):
            ok, why = aio_status()
            if ok:
                return "aio"
            if backend == "aio":
                raise InputError(f"aio backend unavailable: {why}")
        return "threads"

    # ---- reading -------------------------------------------------------------------------
    def _read(self, ids, out):
        span = self._in_place_span(ids, out)
        if span is not None:
            return self._read_into(out, *self._span_reads(*span), len(ids), span[1] - span[0])
        increasing = len(ids) > 1 and bool((ids[1:] > ids[:-1]).all())   # sorted and distinct
        if increasing:
            uniq, inv = ids, np.arange(len(ids), dtype=np.int64)
        else:
            uniq, inv = np.unique(ids, return_inverse=True)
        plan = plan_reads(uniq, self.row_stride, self.row_bytes, self.block, self.max_io_bytes)
        if increasing and self._fits_in_place(plan, len(ids), out):
            return self._read_into(out, plan.file_offsets, plan.buf_offsets, plan.lengths, len(ids), plan.total_bytes)
        src = plan.row_pos[inv]  # staging-buffer byte offset of each requested row
        target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        with self._lock:
            mv, arr = self._staging.ensure(plan.total_bytes)
            ops = self._issue(plan.file_offsets, plan.buf_offsets, plan.lengths, mv, arr, src,
                              target.view(np.uint8).reshape(len(ids), self.row_bytes))
        if target is not out:
            out[...] = target
        return len(uniq), ops, plan.total_bytes

    def _in_place_span(self, ids, out) -> tuple[int, int] | None:
        """The file bytes [start, end) to read straight into `out`, or None to go through staging.

        That is possible when the batch is consecutive rows packed without padding (so the file
        range is byte for byte what `out` holds), the range starts and ends on block boundaries
        (the reads are exactly the blocks the plan would read) and `out` is C-contiguous and, for
        O_DIRECT, block-aligned in memory (`FeatureStore.empty_rows` allocates such buffers).
        """
        n = len(ids)
        first, last = int(ids[0]), int(ids[-1])
        if last - first != n - 1 or self.row_stride != self.row_bytes or not out.flags.c_contiguous:
            return None
        start, end = first * self.row_stride, (last + 1) * self.row_stride
        if start % self.block or end % self.block or (self.o_direct and out.ctypes.data % self.block):
            return None
        if n > 1 and not bool((ids[1:] - ids[:-1] == 1).all()):  # same ends, but not consecutive
            return None
        return start, end

    def _fits_in_place(self, plan: ReadPlan, n: int, out) -> bool:
        """Whether the plan of n distinct rows in increasing order lays them out as `out` holds them:
        rows of whole blocks with no padding (each row its own blocks, so the plan reads exactly the
        rows, in order, packed) and `out` C-contiguous and, for O_DIRECT, block-aligned."""
        return (self.sparse_in_place and self.row_stride == self.row_bytes and self.row_bytes % self.block == 0
                and out.flags.c_contiguous and not (self.o_direct and out.ctypes.data % self.block)
                and plan.total_bytes == n * self.row_bytes)

    def _read_into(self, out, offs, boffs, lens, n: int, nbytes: int) -> tuple[int, int, int]:
        """Reads that land in `out` itself (`boffs`: each read's offset there): no staging buffer, no
        gather. Measured against staging: `lsm-gnn bench inplace`."""
        dst = out.reshape(-1).view(np.uint8)
        with self._lock:
            ops = self._issue(offs, boffs, lens, memoryview(dst), dst, np.empty(0, np.int64),
                              np.empty((0, self.row_bytes), np.uint8))
        self.in_place_batches += 1
        return n, ops, nbytes

    def _span_reads(self, start: int, end: int):
        """File bytes [start, end) as the plan would read them: the run cut at max_io_bytes
        (offsets, offsets in `out`, lengths)."""
        step = self.max_io_bytes // self.block * self.block
        offs = np.arange(start, end, step, dtype=np.int64)
        return offs, offs - start, np.minimum(end - offs, step)

    def read_plan(self, ids) -> ReadPlan:
        """The reads a batch of `ids` would issue (for inspection and tests)."""
        uniq = np.unique(self.check_ids(ids))
        return plan_reads(uniq, self.row_stride, self.row_bytes, self.block, self.max_io_bytes)

    def _issue(self, offs, boffs, lens, mv: memoryview, arr: np.ndarray, src: np.ndarray,
               out: np.ndarray) -> int:
        """Run the reads (file offset, buffer offset, length) into `arr` (`mv` is a memoryview of
        it) and copy the requested rows, which start at `src` in `arr`, to `out` (uint8 rows);
        return the I/O operations issued."""
        rb = self.row_bytes
        if self.backend == "io_uring":
            ops = self._issue_uring(offs.tolist(), boffs.tolist(), lens.tolist(), mv)
            _copy_rows(arr, src, np.arange(len(src), dtype=np.int64), 0, len(src), rb, out)
            return ops
        n = len(offs)
        # group the requested rows by the read that brings them; rows split across two reads
        # (longer than a block, cut at max_io_bytes) are copied once every read is done
        op_first = np.searchsorted(boffs, src, "right") - 1
        op_last = np.searchsorted(boffs, src + (rb - 1), "right") - 1
        key = np.where(op_first == op_last, op_first, n)
        order = np.argsort(key, kind="stable")
        seg = np.searchsorted(key[order], np.arange(n + 2))
        got = np.full(n, -1, np.int64)  # bytes each read returned; -1: failed or not issued
        base = arr.ctypes.data
        args = (arr, offs, boffs, lens)
        workers = min(self.threads, n)
        if self.backend == "aio":
            self._run_aio(arr, offs, boffs, lens, got, src, order, seg, out)
        elif workers <= 1:
            _native_reads(self.fd, base, *args, 0, 1, got, src, order, seg, rb, out)
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"lsm-{self.reader_name}")
            # worker w reads ops w, w+workers, ...: each is one read in flight, without the GIL
            futs = [self._pool.submit(_native_reads, self.fd, base, *args, w, workers, got, src, order, seg, rb, out)
                    for w in range(workers)]
            for f in futs:
                f.result()
        ops = n
        for i in np.flatnonzero(got != lens).tolist():  # short, failed or unissued reads: finish them here
            done = max(int(got[i]), 0)
            if got[i] == 0:
                raise DataError(self.path, f"file ends before its metadata says (short read at offset "
                                f"{int(offs[i])})", expected=f"{int(lens[i])} more bytes", found="end of file")
            ops += self._read_full(self.fd, mv, int(boffs[i]) + done, int(lens[i]) - done, int(offs[i]) + done)
            _copy_rows(arr, src, order, seg[i], seg[i + 1], rb, out)
        _copy_rows(arr, src, order, seg[n], seg[n + 1], rb, out)
        return ops

    def _run_aio(self, arr, offs, boffs, lens, got, src, order, seg, out) -> None:
        if self._aio is None:
            self._aio = AioContext(self.queue_depth)
        if aio_reads(self._aio.ctx, self.fd, arr, offs, boffs, lens, self.queue_depth, got, src, order, seg,
                     self.row_bytes, out) == -2:
            self._aio.close()  # waits for the reads still in flight; the caller re-reads them
            self._aio = None

    def _read_full(self, fd, mv, boff: int, length: int, off: int) -> int:
        """Read exactly `length` bytes; retry short reads; DataError at end of file or on error."""
        ops, done = 0, 0
        while done < length:
            try:
                got = _preadv(fd, [mv[boff + done: boff + length]], off + done)
            except OSError as e:
                raise DataError(self.path, f"read of {length - done} bytes at offset {off + done} failed: "
                                f"{e.strerror}") from None
            ops += 1
            if got == 0:
                raise DataError(self.path, f"file ends before its metadata says (short read at offset "
                                f"{off + done})", expected=f"{length - done} more bytes", found="end of file")
            done += got
        return ops

    def _issue_uring(self, offs, boffs, lens, mv) -> int:
        import liburing as L

        if self._ring is None:
            self._ring = L.io_uring()
            L.io_uring_queue_init(self.queue_depth, self._ring, 0)
            self._cqe = L.io_uring_cqe()
        try:
            return self._run_ring(L, offs, boffs, lens, mv)
        except BaseException:  # reads may still be in flight: retire the ring with them
            L.io_uring_queue_exit(self._ring)
            self._ring = None
            raise

    def _run_ring(self, L, offs, boffs, lens, mv) -> int:
        ring, cqe, fd = self._ring, self._cqe, self.fd
        pending = list(range(len(offs) - 1, -1, -1))  # stack of read indices still to submit
        done_bytes = [0] * len(offs)
        inflight = ops = 0
        while pending or inflight:
            while pending and inflight < self.queue_depth:
                i = pending.pop()
                d = done_bytes[i]
                sqe = L.io_uring_get_sqe(ring)
                L.io_uring_prep_read(sqe, fd, mv[boffs[i] + d: boffs[i] + lens[i]], lens[i] - d, offs[i] + d)
                L.io_uring_sqe_set_data64(sqe, i + 1)
                inflight += 1
                ops += 1
            # one system call submits the new reads and waits for a quarter of the queue
            L.io_uring_submit_and_wait(ring, min(inflight, max(1, self.queue_depth // 4)))
            for _ in range(L.io_uring_cq_ready(ring)):  # one at a time: this liburing indexes a Cqe only at [0]
                L.io_uring_peek_cqe(ring, cqe)
                res, data = cqe.res, cqe.user_data
                L.io_uring_cqe_seen(ring, cqe)
                inflight -= 1
                i = data - 1
                if res < 0:
                    raise DataError(self.path, f"read of {lens[i]} bytes at offset {offs[i]} failed: "
                                    f"{os.strerror(-res)}")
                if res == 0:
                    raise DataError(self.path, f"file ends before its metadata says (short read at offset "
                                    f"{offs[i] + done_bytes[i]})", expected=f"{lens[i] - done_bytes[i]} more bytes",
                                    found="end of file")
                done_bytes[i] += res
                if done_bytes[i] < lens[i]:
                    pending.append(i)  # short read: resubmit the rest
        return ops

    # ---- housekeeping --------------------------------------------------------------------
    def drop_page_cache(self) -> None:
        from lsm_gnn.storage.pagecache import drop_file_cache

        drop_file_cache(self.path)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._ring is not None:
            import liburing as L

            L.io_uring_queue_exit(self._ring)
            self._ring = None
        if getattr(self, "_aio", None) is not None:
            self._aio.close()
            self._aio = None
        self._staging.close()
        if self.fd is not None and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class DirectStore(BlockStore):
    """O_DIRECT reads: the page cache is bypassed and left untouched."""

    reader_name = "direct"
    o_direct = True

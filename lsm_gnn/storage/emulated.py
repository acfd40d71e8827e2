"""The emulated storage device: real rows, served when the device model says.

`storage.device: emulated` (with `storage.device_profile`, lsm_gnn.storage.device_model) turns the
direct and buffered readers into an `EmulatedStore`: the same read plan, read with buffered `pread`
from a page-cache-resident copy of the same feature file (warmed when the store opens; the rows
and their checksums are exactly the real ones), while every read's completion time is computed at
submission on the virtual clock of the SSD that holds its page (the NVMeVirt model, FAST'23). The
batch is handed back when its last read completes: the store waits for that absolute deadline
(`wait_until`: sleep, then a short spin; timer slack lowered to 1 ns for the waiting thread), so
overshoot never accumulates from one batch to the next.

Block-layer throttles (null_blk, dm-delay, cgroup io.max) never see reads that the page cache
serves, so the pacing lives here, in user space.

SSDs of their own (`shared: false`, the paper's testbed) are one clock per rank. SSDs shared by
every device (`shared: true`, this VM's disk) are one clock for all the ranks of a run: its state
lives in a small file under `$LSM_GNN_DEVICE_CLOCK` (the launcher creates the folder before it
spawns the ranks: `device_clock_env`), mapped by every rank and updated under an flock.

Each batch records how late it was handed back against the model (`lateness`: the time after its
last read's deadline; a copy slower than the model shows here too), split into the copy's overshoot
(the real copy itself ended after the deadline) and the wake's (the waiting thread returned late),
and the copy's time off the CPU (its wall time less its busiest thread's CPU time, from the threads'
CPU clocks: the rows are resident, so a copy thread not running waits for a CPU that the machine's
other work holds; the kernel's schedstat run-queue wait reads 0 on this VM). `emulation_stats()`
sums the batches handed back inside the run's timed windows (`timed_window`: the training loop
marks the iterations its metrics measure; warm-up batches, whose times no metric reads, do not
decide validity, but stay in the record as `all_batches`); a run whose lateness there exceeds
LATENESS_LIMIT of its storage time is invalid, with the cause. Lateness is not forgiven for the
copy's time off the CPU: the emulator's copy is CPU work a DMA read would not need, so a loaded machine
that starves it makes the emulated time differ from the model's, and the run is flagged (the
cause says how much of the copy was off the CPU, so that a rerun on a quiet machine is the fix).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import mmap
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Callable, Iterator

import numpy as np

from lsm_gnn.storage.buffered import BufferedStore
from lsm_gnn.storage.device_model import PAGE, ClockState, DeviceProfile, read_pages, schedule, stripe
from lsm_gnn.utils.errors import InputError

CLOCK_ENV = "LSM_GNN_DEVICE_CLOCK"
LATENESS_LIMIT = 0.01
"""A run whose reads were handed back later than the model by more than 1 % of its storage time is invalid."""
SPIN_NS = 50_000
"""The last 50 us before a deadline are spun, not slept (a sleep wakes 50-60 us late on the VM even
with 1 ns of timer slack)."""
PR_SET_TIMERSLACK = 29
SWITCH_INTERVAL_S = 0.0005
"""The GIL switch interval of a process with an emulated store (Python's default: 5 ms). A reader
thread woken at its deadline waits for the GIL while another thread runs Python: measured with a
busy Python thread beside 40 batches of 2,567 rows (paper profile, time scale 16), lateness 29.1 %
of the storage time (p99 45 ms) at 5 ms and 4.8 % (p99 8.7 ms) at 0.5 ms; without it 2.0 and 1.0 %."""

_slack = threading.local()

_windows: list[list[int | None]] = []
"""This process's timed windows ([start, end] in perf_counter ns; end None while open)."""


def timed_window_begin(now_ns: int | None = None) -> None:
    """The iterations the run's metrics measure start now (the training loop, at its first timed
    iteration of an epoch)."""
    t = time.perf_counter_ns() if now_ns is None else int(now_ns)
    if _windows and _windows[-1][1] is None:
        return
    _windows.append([t, None])


def timed_window_end(now_ns: int | None = None) -> None:
    """The timed iterations of this epoch end now."""
    if _windows and _windows[-1][1] is None:
        _windows[-1][1] = time.perf_counter_ns() if now_ns is None else int(now_ns)


def timed_windows_reset() -> None:
    """Forget the windows (a new run in this process)."""
    _windows.clear()


def timed_windows() -> list[tuple[int, int]]:
    """The closed windows and an open one (ending now)."""
    now = time.perf_counter_ns()
    return [(a, b if b is not None else now) for a, b in _windows]


def thread_cpu_ns(idents) -> list[int]:
    """The CPU time (ns) of each of this process's threads `idents` (threading idents; a thread
    that has ended reads 0)."""
    out = []
    for ident in idents:
        try:
            out.append(time.clock_gettime_ns(time.pthread_getcpuclockid(ident)))
        except (OSError, AttributeError, OverflowError):
            out.append(0)
    return out


def lower_timer_slack() -> bool:
    """Set this thread's timer slack to 1 ns (prctl PR_SET_TIMERSLACK; Linux, default 50 us) so that
    its sleeps end when asked. Once per thread; False where prctl is not available."""
    if getattr(_slack, "done", None) is not None:
        return _slack.done
    ok = False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(1), 0, 0, 0) == 0
    except (OSError, AttributeError):
        ok = False
    _slack.done = ok
    return ok


def wait_until(deadline_ns: int, clock: Callable[[], int] = time.perf_counter_ns) -> int:
    """Return at `deadline_ns` (an absolute time of `clock`): sleep until SPIN_NS before it, then
    spin. Returns the time it returned at (never before the deadline)."""
    lower_timer_slack()
    while True:
        now = clock()
        left = deadline_ns - now
        if left <= 0:
            return now
        if left > SPIN_NS:
            time.sleep((left - SPIN_NS) * 1e-9)


class EmulatedDevice:
    """The clocks of one device's SSDs (or of the node's shared SSDs) and the lock around them."""

    def __init__(self, profile: DeviceProfile, time_scale: float = 1.0, *, shared_path: str | None = None):
        self.profile, self.time_scale = profile, float(time_scale)
        self.ssd = profile.ssd.scaled(self.time_scale)
        self.n_ssd = profile.ssds_per_device
        self._tlock = threading.Lock()
        self._fd = None
        self._mm = None
        nbytes = ClockState.nbytes(self.n_ssd, self.ssd.max_queue_depth)
        self.shared_path = shared_path
        # compile the scheduler now (numba, cached on disk), not inside the first batch's deadline
        schedule(ClockState(1, None), self.ssd, np.zeros(1, np.int64), 0, 1)
        if shared_path is None:
            self.state = ClockState(self.n_ssd, self.ssd.max_queue_depth)
        else:
            fd = os.open(shared_path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_size < nbytes:
                    os.ftruncate(fd, nbytes)  # zeros: every SSD free since the clock's epoch
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            self._fd = fd
            self._mm = mmap.mmap(fd, nbytes)
            self.state = ClockState(self.n_ssd, self.ssd.max_queue_depth, buf=self._mm)

    def submit(self, ssd_of: np.ndarray, submit_ns: int, queue_depth: int) -> np.ndarray:
        """Completion times (ns) of reads on SSDs `ssd_of` submitted at `submit_ns`."""
        with self._tlock:
            if self._fd is None:
                return schedule(self.state, self.ssd, ssd_of, submit_ns, queue_depth)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                return schedule(self.state, self.ssd, ssd_of, submit_ns, queue_depth)
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self):
        if self._mm is not None:
            self.state = None
            try:
                self._mm.close()
            except BufferError:
                pass
            self._mm = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def shared_clock_path(profile: DeviceProfile, time_scale: float) -> str | None:
    """Where the ranks of this run keep the shared SSDs' clock (None: no launcher made a folder, or
    the SSDs are the device's own)."""
    folder = os.environ.get(CLOCK_ENV)
    if not profile.shared or not folder:
        return None
    key = hashlib.sha256(f"{profile.model_dump_json()}|{time_scale}".encode()).hexdigest()[:16]
    return os.path.join(folder, f"{profile.name}-{key}.clock")


@contextlib.contextmanager
def device_clock_env() -> Iterator[str]:
    """A folder for the shared device clocks of one run, named in $LSM_GNN_DEVICE_CLOCK for the
    processes spawned inside the block (they inherit the environment), removed afterwards."""
    folder = tempfile.mkdtemp(prefix="lsm-gnn-clock-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    old = os.environ.get(CLOCK_ENV)
    os.environ[CLOCK_ENV] = folder
    try:
        yield folder
    finally:
        if old is None:
            os.environ.pop(CLOCK_ENV, None)
        else:
            os.environ[CLOCK_ENV] = old
        shutil.rmtree(folder, ignore_errors=True)


def warm_page_cache(path: str, chunk: int = 8 << 20) -> float:
    """Read the file once through the page cache (where it is not resident yet); return the
    resident fraction afterwards (mincore). The emulator serves its rows from these pages."""
    from lsm_gnn.storage.pagecache import resident_fraction

    if resident_fraction(path) < 0.999:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            off = 0
            while True:
                got = os.pread(fd, chunk, off)
                if not got:
                    break
                off += len(got)
        finally:
            os.close(fd)
    return resident_fraction(path)


class EmulatedStore(BufferedStore):
    """The block reader's plan read from the page cache, each batch handed back at the time the
    device model completes its last read (module docstring)."""

    reader_name = "buffered"

    def __init__(self, *args, device: EmulatedDevice, reader: str = "direct",
                 clock: Callable[[], int] = time.perf_counter_ns, wait: Callable[[int], int] | None = None,
                 warm: bool = True, **kw):
        kw["backend"] = "threads"  # buffered AIO blocks inside io_submit
        qd = int(kw.get("queue_depth", 128))
        super().__init__(*args, **kw)
        self.device = device
        self.model_queue_depth = qd
        self.clock = clock
        self.wait = wait or (lambda t: wait_until(t, clock))
        self.resident = warm_page_cache(self.path) if warm else None
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._pacing = False
        if self.num_rows:  # the copy's compiled loop and thread pool ready before the first deadline
            ids = np.unique(np.array([0, self.num_rows - 1], np.int64))
            self._read(ids, self.empty_rows(len(ids)))
        self._pacing = True
        self.reset_stats()
        self.path_info.update({"reader": reader, "device": "emulated", "served_from": "page cache (buffered pread)",
                               "device_profile": device.profile.name, "time_scale": device.time_scale,
                               "queue_depth": qd, "ssds": device.n_ssd, "shared_ssds": device.profile.shared,
                               "shared_clock": device.shared_path is not None, "resident_fraction": self.resident,
                               "switch_interval_s": sys.getswitchinterval()})

    def reset_stats(self) -> None:
        """Forget the batches paced so far (a benchmark's warm-up)."""
        # per batch: ns after its deadline it was handed back; ns from submission to its last read's
        # completion (the model); ns the real copy ended after the deadline (0: in time); ns its
        # copy was off the CPU; when it was handed back (the store's clock, perf_counter_ns as the
        # timed windows unless a test gives its own); reads; ns the copy took
        self._lat, self._model, self._copy_over, self._offcpu, self._end, self._nreads, self._copy = \
            [], [], [], [], [], [], []

    def _issue(self, offs, boffs, lens, mv, arr, src, out) -> int:
        if not self._pacing:  # the warm-up read at open
            return super()._issue(offs, boffs, lens, mv, arr, src, out)
        ssd_of = stripe(read_pages(offs, lens, PAGE), self.device.n_ssd)
        # the copy's threads (this one, and the pool's when it reads in parallel): their CPU time
        # tells the copy's own work from the time the machine held them off the CPU
        idents = [threading.get_ident()] + [t.ident for t in (getattr(self._pool, "_threads", None) or ())]
        cpu0 = thread_cpu_ns(idents)
        t0 = self.clock()
        done = self.device.submit(ssd_of, t0, self.model_queue_depth)
        deadline = int(done.max()) if len(done) else t0
        ops = super()._issue(offs, boffs, lens, mv, arr, src, out)  # the rows themselves
        t_copy = self.clock()
        cpu1 = thread_cpu_ns(idents)
        t_end = int(self.wait(deadline))
        self._lat.append(max(0, t_end - deadline))
        self._model.append(deadline - t0)
        self._copy_over.append(max(0, t_copy - deadline))
        # off the CPU during the copy: its wall time less its busiest thread's CPU time (the rows are
        # resident, so a copy thread that is not running is runnable and waiting for a CPU)
        self._offcpu.append(max(0, (t_copy - t0) - max(b - a for a, b in zip(cpu0, cpu1))))
        self._end.append(t_end)
        self._nreads.append(len(ssd_of))
        self._copy.append(t_copy - t0)
        return ops

    @property
    def reads_paced(self) -> int:
        """Device reads paced so far (since the last reset_stats)."""
        return int(sum(self._nreads))

    def emulation_stats(self) -> dict:
        return emulation_summary([self._raw()], self.device.time_scale)

    def _raw(self, windows: list[tuple[int, int]] | None = None) -> dict:
        """The pacing of the batches handed back inside `windows` (default: the process's timed
        windows; every batch when there are none), and of every batch (`all_batches`)."""
        windows = timed_windows() if windows is None else windows
        end = np.asarray(self._end, np.int64)
        inside = np.zeros(len(end), bool)
        for a, b in windows:
            inside |= (end > a) & (end <= b)
        if not windows:
            inside[:] = True
        out = _pacing(self, inside)
        out["window"] = "timed" if windows else "all"
        out["all_batches"] = _pacing(self, np.ones(len(end), bool))
        return out

    def close(self) -> None:
        super().close()
        if self.device is not None:
            self.device.close()


def _pacing(store: "EmulatedStore", mask: np.ndarray) -> dict:
    """One store's pacing over the batches `mask` selects."""
    idx = np.flatnonzero(mask)
    lat = np.asarray(store._lat, np.int64)[idx]
    over = np.asarray(store._copy_over, np.int64)[idx]
    rq = np.asarray(store._offcpu, np.int64)[idx]
    worst = idx[np.argsort(lat)[::-1][:5]] if len(lat) else []
    # the copy's own CPU time beyond the model, in the late batches: the copy alone outran the device
    # (its busiest thread's CPU time: wall less off-CPU), which no quiet machine would mend
    cpu_over = np.maximum(0, (np.asarray(store._copy, np.int64)[idx] - rq) - np.asarray(store._model, np.int64)[idx])
    return {"batches": len(idx), "reads": int(np.asarray(store._nreads, np.int64)[idx].sum()),
            "storage_ns": int(np.asarray(store._model, np.int64)[idx].sum()),
            "late_ns": int(lat.sum()), "late_p99_ns": float(np.percentile(lat, 99)) if len(lat) else 0.0,
            "late_max_ns": int(lat.max()) if len(lat) else 0,
            "copy_ns": int(np.asarray(store._copy, np.int64)[idx].sum()),
            "copy_over_ns": int(over.sum()), "wake_late_ns": int(lat.sum() - over.sum()),
            "copy_off_cpu_ns": int(rq.sum()),
            "copy_off_cpu_late_ns": int(rq[lat > 0].sum()),  # in the batches that came back late
            # where the lateness sits: the 5 latest batches (index in the run, ns late, of which the
            # copy's overshoot, the copy's time off the CPU)
            "worst_batches": [[int(i), int(store._lat[i]), int(store._copy_over[i]), int(store._offcpu[i])]
                              for i in worst],
            "copy_late_batches": int((over > 0).sum()), "copy_cpu_over_ns": int(cpu_over[lat > 0].sum())}


def emulation_summary(raws: list[dict], time_scale: float) -> dict:
    """One run's pacing over its stores (every rank's): storage time (the model's, at the run's
    clock), lateness total / p99 (the worst rank's p99) / max, and whether the run is valid:
    lateness at most LATENESS_LIMIT of the storage time (else the cause)."""
    raws = [r for r in raws if r]
    storage = sum(r["storage_ns"] for r in raws) * 1e-9
    late = sum(r["late_ns"] for r in raws) * 1e-9
    copy_late = sum(r["copy_late_batches"] for r in raws)
    batches = sum(r["batches"] for r in raws)
    frac = late / storage if storage > 0 else 0.0
    valid = frac <= LATENESS_LIMIT
    rq = sum(r.get("copy_off_cpu_ns", 0) for r in raws) * 1e-9
    rq_late = sum(r.get("copy_off_cpu_late_ns", 0) for r in raws) * 1e-9
    copy_over = sum(r.get("copy_over_ns", 0) for r in raws) * 1e-9
    cpu_over = sum(r.get("copy_cpu_over_ns", 0) for r in raws) * 1e-9
    cause = None
    if not valid:
        starved = late > 0 and rq_late >= 0.5 * late
        if late > 0 and cpu_over >= 0.5 * late:
            # told apart first: a copy whose own CPU time exceeds the model is too slow on any machine,
            # however much time it also spent off the CPU (at S = 1 on an idle VM the paper's SSDs
            # outrun the copy, and the off-CPU figure of a parallel copy is never 0)
            starved = False
        cause = (f"reads handed back {100 * frac:.2f} % of the storage time late (limit {100 * LATENESS_LIMIT:g} %, "
                 f"{late:.3f} s, of which the copy's overshoot {copy_over:.3f} s; in the late batches the copy was "
                 f"off the CPU {rq_late:.3f} s): "
                 + (("the machine's other work held the CPU (in the late batches the copy was off the CPU for at least "
                     "half the lateness: rerun on a quieter machine)") if starved else
                    (f"in {copy_late} of {batches} batches the real copy from the page cache alone took longer than "
                     f"the model's time (the CPU cannot serve this device at time scale {time_scale:g}: raise "
                     "emulation.time_scale)" if copy_late else "the waits woke late (the machine is loaded)")))
    return {"time_scale": time_scale, "batches": batches, "reads": sum(r["reads"] for r in raws),
            "storage_s": storage, "storage_s_emulated": storage / time_scale,
            "lateness_s": late, "lateness_p99_s": max((r["late_p99_ns"] for r in raws), default=0.0) * 1e-9,
            "lateness_max_s": max((r["late_max_ns"] for r in raws), default=0) * 1e-9,
            "lateness_fraction": frac, "copy_s": sum(r["copy_ns"] for r in raws) * 1e-9,
            "copy_late_batches": copy_late, "copy_over_s": copy_over, "copy_cpu_over_s": cpu_over,
            "cause_kind": None if valid else ("busy" if starved else ("scale" if (copy_late or cpu_over) else "busy")), "copy_off_cpu_s": rq, "copy_off_cpu_late_s": rq_late,
            "window": "timed" if raws and all(r.get("window") == "timed" for r in raws) else "all",
            "lateness_limit": LATENESS_LIMIT, "valid": valid, "invalid_cause": cause,
            "raw": raws}


def open_emulated(lay, cfg, *, time_scale: float = 1.0, row_map=None, verify_checksums: bool = True,
                  profile: DeviceProfile | None = None, **kw) -> EmulatedStore:
    """The emulated store `cfg` (a StorageConfig with device: emulated) describes, over layout `lay`."""
    from lsm_gnn.storage.device_model import load_device_profile

    if cfg.reader not in ("direct", "buffered"):
        raise InputError(f"storage.device: emulated serves the direct and buffered readers, found storage.reader "
                         f"{cfg.reader!r} (mmap's page faults stay real; memory reads no storage)")
    prof = profile or load_device_profile(cfg.device_profile)
    dev = EmulatedDevice(prof, time_scale, shared_path=shared_clock_path(prof, time_scale))
    try:
        store = EmulatedStore(lay.path, lay.num_rows, lay.dim, lay.dtype, lay.row_stride, lay.file_bytes,
                              device=dev, reader=cfg.reader, threads=min(cfg.threads, os.cpu_count() or 1),
                              queue_depth=cfg.queue_depth, block_size=cfg.block_size, max_io_bytes=cfg.max_io_bytes,
                              row_map=row_map, **kw)
    except BaseException:
        dev.close()
        raise
    sums = lay.checksums if verify_checksums else None
    store.verify_with(sums)
    if lay.checksums is None:
        store.checksum_state = "absent"
    return store

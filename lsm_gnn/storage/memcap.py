"""Cap the page cache a plain mmap loader may fill, with a cgroup memory limit.

Why: a feature file that fits in RAM ends up wholly in the page cache after one epoch, and the
mmap baseline would then be timed at memory speed. The cap gives the page cache the same memory
budget a cached system gets (by default LSM-GNN's total feature memory over all devices, victim
buffers included).

How: the process moves into a child of its own memory cgroup when the run starts (v1:
`memory.limit_in_bytes`, v2: `memory.high`). A memory cgroup charges page cache *and* anonymous
memory, and reclaims page cache first, so a fixed limit would either not bind or OOM-kill the
trainer when a train step allocates. The limit is therefore set before every fetch to
`budget + the cgroup's anonymous memory now + the batch's output bytes + slack`, which leaves the
file's pages at most `budget + slack` (the kernel reclaims them to fit), and lifted after the
fetch, when no feature page is touched. The fetch may run in a thread beside the train step, which
may allocate past the limit meanwhile: no task is ever killed for it (v1: the OOM killer is
disabled for the child and a watchdog *process*, left outside the child cgroup so that it cannot
stall with it, waits on the cgroup's OOM eventfd and lifts the limit; v2:
`memory.high`, which throttles and reclaims but never kills); such lifts are counted. Where no
writable memory cgroup exists the cap falls back to dropping the file's pages before the run and
says plainly that the run was uncapped.
Every outcome is described by `info()`, which goes into the run record as
`metrics.page_cache_cap`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
SLACK_BYTES = 16 << 20
UNLIMITED_V1 = "-1"
UNLIMITED_V2 = "max"


def _die_with_parent():
    """In the watchdog before exec: PR_SET_PDEATHSIG, so a killed trainer leaves no watchdog."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def _own_cgroup() -> tuple[str, Path] | None:
    """('v1'|'v2', directory of this process's memory cgroup), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            d = CGROUP_ROOT / "memory" / path.lstrip("/")
            if (d / "memory.limit_in_bytes").exists():
                return "v1", d
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            for base in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
                d = base / path.lstrip("/")
                if (d / "cgroup.controllers").exists() and "memory" in (d / "cgroup.controllers").read_text().split():
                    return "v2", d
    return None


def _stat(d: Path) -> dict[str, int]:
    out = {}
    for line in (d / "memory.stat").read_text().splitlines():
        k, v = line.split()
        out[k] = int(v)
    return out


class PageCacheCap:
    """Context manager: `with PageCacheCap(budget, file) as cap: ... cap.before_fetch(n); ...`."""

    def __init__(self, budget_bytes: int, file: str | os.PathLike, *, enabled: bool = True):
        self.budget = int(budget_bytes)
        self.file = Path(file)
        self.enabled = enabled
        self.kind: str | None = None
        self.parent: Path | None = None
        self.child: Path | None = None
        self.peak_file_bytes = 0
        self.limit_writes = 0
        self.limit_seconds = 0.0
        self.note = ""
        self._watchdog: subprocess.Popen | None = None
        self.stall_lifts = 0

    # ---- setup / teardown ----------------------------------------------------------------
    def __enter__(self):
        from lsm_gnn.storage.pagecache import drop_file_cache

        drop_file_cache(self.file)  # cold start in every mode
        if not self.enabled:
            self.note = "cap disabled by configuration; file pages dropped before the run"
            return self
        found = _own_cgroup()
        if found is None:
            self.note = "no memory cgroup found; file pages dropped before the run, page cache uncapped"
            return self
        kind, parent = found
        child = parent / f"lsmgnn-pagecache-{os.getpid()}-{time.monotonic_ns()}"
        try:
            self._remove_stale(parent)
            child.mkdir()
            if kind == "v1":
                (child / "memory.oom_control").write_text("1")  # stall, never kill (watchdog lifts)
                self._watchdog = subprocess.Popen([sys.executable, "-m", "lsm_gnn.storage.memcap", str(child)],
                                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                                  stderr=subprocess.DEVNULL, preexec_fn=_die_with_parent)
                if self._watchdog.stdout.readline().strip() != b"ready":
                    raise OSError(0, "the page-cache watchdog did not start")
            (child / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as e:
            self._stop_watchdog()
            try:
                child.rmdir()
            except OSError:
                pass
            self.note = (f"memory cgroup {parent} not usable ({e.strerror}); file pages dropped before the run, "
                         "page cache uncapped")
            return self
        self.kind, self.parent, self.child = kind, parent, child
        self.note = ("cgroup %s child %s; limit set before every fetch to budget + anonymous memory + batch "
                     "bytes + %d MiB slack, lifted after it" % (kind, child.name, SLACK_BYTES >> 20))
        return self

    def __exit__(self, *exc):
        self.close()

    def _stop_watchdog(self) -> None:
        if self._watchdog is None:
            return
        self._watchdog.terminate()
        self._watchdog.wait()
        self._watchdog.stdout.close()
        self._watchdog = None

    def close(self):
        if self.child is None:
            return
        try:
            (self.parent / "cgroup.procs").write_text(str(os.getpid()))
        finally:
            try:
                self._set_limit(None)
            except OSError:
                pass
            self._stop_watchdog()
            try:
                self.child.rmdir()
            except OSError:
                pass  # charges still draining; _remove_stale removes it next time
            self.child = None

    @staticmethod
    def _remove_stale(parent: Path):
        """Children left by runs that were killed (their pid is gone and they hold no process)."""
        for d in parent.glob("lsmgnn-pagecache-*"):
            try:
                pid = int(d.name.split("-")[2])
                if not Path(f"/proc/{pid}").exists() and not (d / "cgroup.procs").read_text().strip():
                    d.rmdir()
            except (OSError, ValueError, IndexError):
                pass

    # ---- per fetch -----------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.child is not None

    def _usage(self) -> tuple[int, int]:
        """(anonymous bytes, file bytes) charged to the child cgroup."""
        st = _stat(self.child)
        if self.kind == "v1":
            return st.get("rss", 0) + st.get("rss_huge", 0), st.get("cache", 0)
        return st.get("anon", 0), st.get("file", 0)

    def _set_limit(self, limit: int | None):
        name = "memory.limit_in_bytes" if self.kind == "v1" else "memory.high"
        value = (UNLIMITED_V1 if self.kind == "v1" else UNLIMITED_V2) if limit is None else str(int(limit))
        t0 = time.perf_counter()
        (self.child / name).write_text(value)
        self.limit_seconds += time.perf_counter() - t0
        self.limit_writes += 1

    def before_fetch(self, out_bytes: int):
        if not self.active:
            return
        for _ in range(3):
            anon, file_bytes = self._usage()
            self.peak_file_bytes = max(self.peak_file_bytes, file_bytes)
            try:
                # the kernel reclaims file pages down to the limit (EBUSY if anonymous memory grew
                # past it meanwhile: measure again)
                self._set_limit(self.budget + anon + int(out_bytes) + SLACK_BYTES)
                return
            except OSError:
                continue
        self.stall_lifts += 1  # this fetch runs uncapped; counted in info()

    def after_fetch(self):
        if not self.active:
            return
        self.peak_file_bytes = max(self.peak_file_bytes, self._usage()[1])
        if self.kind == "v1" and int((self.child / "memory.limit_in_bytes").read_text()) > 1 << 60:
            self.stall_lifts += 1  # the watchdog lifted the limit during this fetch
        self._set_limit(None)  # train steps may allocate freely; they touch no feature page

    def info(self) -> dict:
        return {"method": (f"cgroup-{self.kind}" if self.active or self.limit_writes else "uncapped"),
                "capped": bool(self.limit_writes), "budget_bytes": self.budget,
                "slack_bytes": SLACK_BYTES if self.limit_writes else 0,
                "peak_page_cache_bytes": self.peak_file_bytes if self.limit_writes else None,
                "limit_writes": self.limit_writes, "limit_seconds": self.limit_seconds,
                "stall_lifts": self.stall_lifts,
                "dropped_before_run": True, "note": self.note}


def _watchdog_main(child: str) -> None:
    """`python -m lsm_gnn.storage.memcap CGROUP_DIR`: lift the v1 limit whenever the cgroup stalls.

    Waits on the cgroup's OOM notification (an eventfd registered in cgroup.event_control), so it
    costs no CPU; prints one line per lift and exits when terminated or the cgroup is removed.
    """
    import signal

    d = Path(child)
    efd = os.eventfd(0)
    ofd = os.open(d / "memory.oom_control", os.O_RDONLY)
    (d / "cgroup.event_control").write_text(f"{efd} {ofd}")
    signal.signal(signal.SIGTERM, lambda *_: (sys.stdout.flush(), os._exit(0)))
    print("ready", flush=True)
    while True:
        os.eventfd_read(efd)
        if not d.exists():
            return
        try:
            if "under_oom 1" in (d / "memory.oom_control").read_text():
                (d / "memory.limit_in_bytes").write_text(UNLIMITED_V1)
        except OSError:
            return


if __name__ == "__main__":
    _watchdog_main(sys.argv[1])

"""One charging primitive for every stage of the emulated testbed: each stage ends when its part's
model says, at time scale S (issue 43; the part of each stage: lsm_gnn.testbed).

Beside the emulated storage device (lsm_gnn.storage.emulated: a batch handed back at the deadline
its reads' model gives, late time recorded), a `Charger` gives every other stage its deadline:

- link stages (`link`): PCIe copies, NIC bytes and round trips, `(bytes / bandwidth + n x latency) x S`
  from the stage's start;
- host stages (`host`): the stage's thread CPU time `cpu` (time.thread_time_ns of the thread that runs
  it: never its wall time, which on 2 shared cores holds the queueing of every other process) padded
  to `S x f x cpu`, where f is the paper's host core's time relative to this machine's core
  (`emulation.host_speed`, default the hardware profile's `cpu.host_time_factor`), the CPU time first
  put at the reference core's speed (`CoreSpeed`: a shared VM's core runs the same work up to 2x
  slower from one half hour to the next, and without it a host-charged system's emulated epoch moved
  with it). A stage that also
  waits on parts charged elsewhere (a trainer waiting for a server's answer) is charged `additive`:
  its own work stretched by (S f - 1) x cpu after it ends, the waits left as they were charged;
- GPU stages (`gpu`): a measured rate (lsm_gnn.testbed.GPU_RATES: fixed per batch + per request) x S;
- `until`: any part's own model time in seconds x S (the accelerator's step, a model's time).

Every stage records how late it ended against its deadline. Lateness has two causes, told apart
per stage: the work itself took longer than the charge (its thread CPU time alone exceeded it, or
S x f < 1: the scale is too small for the profile, `scale`), or the thread was held off the CPU or
woke late (wall time beyond its CPU time: the machine is busy, `busy`). A part whose late time
exceeds LATENESS_LIMIT (1 %) of its charged time makes the run invalid, with the cause, as the
storage pacing does.

All times in the summary are the model's (divided back by S): what the paper's testbed takes.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable

from lsm_gnn.storage import emulated
from lsm_gnn.storage.emulated import LATENESS_LIMIT, wait_until
from lsm_gnn.testbed import CORE_PROBE_REF_S, PARTS

NS = 1_000_000_000


class CoreSpeed:
    """How fast this process's core runs host work now, against the reference core whose time f is
    stated against (lsm_gnn.testbed.CORE_PROBE_REF_S).

    Why: the emulated testbed charges host work at S x f x its thread CPU time, and on a shared VM the
    same work's CPU time moves with the neighbours' load on the physical core. In one reference run
    (2026-12-05) Dist-DGL's trainers took 29 ms of CPU an iteration at batch 128 in one round and 56 ms
    in the next (same code, same batch sizes): its emulated epoch read 45.4 s, then 82.8 s, while the
    systems charged by device models stayed within 1 %. The probe (`probe_seconds`: a fixed gather of
    4 KiB rows and a pass over them, about half a millisecond a repeat) runs in the charging thread at most every
    `every_s` of wall time; `factor()` is the reference probe time over the median of the last `keep`
    probes, so host work is charged as the reference core would have taken it. Each thread keeps its
    own probes (thread CPU time is per thread)."""

    def __init__(self, ref_s: float, *, every_s: float = 0.25, keep: int = 9,
                 probe: Callable[[], float] | None = None, clock: Callable[[], int] = time.perf_counter_ns):
        import threading

        if not ref_s > 0:
            from lsm_gnn.utils.errors import InputError

            raise InputError(f"the core probe's reference time must be positive, found {ref_s!r}")
        self.ref_s, self.every_ns, self.keep = float(ref_s), int(every_s * NS), int(keep)
        self.probe, self.clock = probe or probe_seconds, clock
        self._local = threading.local()
        self.probes = 0

    def factor(self) -> float:
        loc = self._local
        if not hasattr(loc, "times"):
            loc.times, loc.last = [], None
        times = loc.times
        now = self.clock()
        if loc.last is None or now - loc.last >= self.every_ns:
            times.append(self.probe())
            del times[:-self.keep]
            loc.last = self.clock()
            self.probes += 1
        ordered = sorted(times)
        return self.ref_s / max(ordered[len(ordered) // 2], 1e-9)


_PROBE = {}


def probe_seconds(reps: int = 3) -> float:
    """Thread CPU seconds of the probe workload (the fastest of `reps`): 1,024 random 4 KiB rows
    gathered from a 32 MiB table (past this VM's last-level cache) and summed, the memory-bound copy and the arithmetic of a host
    stage in miniature (NumPy, one thread)."""
    import numpy as np

    if not _PROBE:
        rng = np.random.default_rng(0)
        _PROBE["table"] = rng.random((8192, 1024), dtype=np.float32)
        _PROBE["ids"] = rng.integers(0, 8192, 1024)
        _PROBE["out"] = np.empty((1024, 1024), np.float32)
    table, ids, out = _PROBE["table"], _PROBE["ids"], _PROBE["out"]
    best = None
    for _ in range(reps):
        c0 = time.thread_time_ns()
        np.take(table, ids, axis=0, out=out)
        float(np.square(out).sum())
        t = (time.thread_time_ns() - c0) / NS
        best = t if best is None else min(best, t)
    return best


def link_seconds(nbytes: float, bandwidth: float, latency_s: float = 0.0, transfers: float = 1.0) -> float:
    """A link's model time (undilated): bytes / bandwidth + transfers x latency."""
    return (float(nbytes) / float(bandwidth) if nbytes else 0.0) + float(transfers) * float(latency_s)


class _Stage:
    __slots__ = ("part", "count", "charged_ns", "late_ns", "cpu_ns", "ref_cpu_ns", "wall_ns", "scale_late_ns",
                 "busy_late_ns")

    def __init__(self, part: str):
        self.part = part
        self.count = self.charged_ns = self.late_ns = self.cpu_ns = self.ref_cpu_ns = self.wall_ns = 0
        self.scale_late_ns = self.busy_late_ns = 0


class Charger:
    """The deadlines of one process's charged stages at scale `time_scale` with host factor
    `host_speed` (f); `core`: a CoreSpeed that puts host CPU time at the reference core's speed
    (None: this core's time as it ran). `clock`, `cpu_clock` and `wait` are the test seams
    (perf_counter_ns, time.thread_time_ns, wait_until)."""

    def __init__(self, time_scale: float, host_speed: float = 1.0, *, clock: Callable[[], int] = time.perf_counter_ns,
                 cpu_clock: Callable[[], int] = time.thread_time_ns, wait: Callable[[int], int] | None = None,
                 enabled: bool = True, core: CoreSpeed | None = None):
        if not time_scale > 0 or not host_speed > 0:
            from lsm_gnn.utils.errors import InputError

            raise InputError(f"a charger needs a positive time scale and host speed, found {time_scale!r}, "
                             f"{host_speed!r}")
        self.S, self.f = float(time_scale), float(host_speed)
        self.clock, self.cpu_clock = clock, cpu_clock
        self.core = core
        self.wait = wait or (lambda t: wait_until(t, clock))
        self.enabled = enabled
        self.stages: dict[str, _Stage] = {}
        self._outside: dict[str, _Stage] = {}
        """What a windowed charger recorded while no timed window was open (the warm-up): reported only
        by a process that never opened one."""
        self._saw_window = False
        self.recording = True
        self.windowed = False
        """True: report only the stages that ended inside the process's timed windows
        (lsm_gnn.storage.emulated.timed_window_begin: the training loop's timed iterations), as the
        storage pacing does; every stage is still paced. Before the first window opens nothing is
        known yet of windows, so those stages go to `_outside` (on synthetic-small at S = 512 the
        shared cache's first fetch, every row a miss, ended 2.7 s late, and it alone made the GPU
        part of every run 18-33 % late, 2026-12-05)."""

    # ---- the primitive ----------------------------------------------------------------------------
    def _stage(self, name: str, part: str, book: dict | None = None) -> _Stage:
        if part not in PARTS:
            from lsm_gnn.utils.errors import InputError

            raise InputError(f"stage {name!r}: unknown part {part!r}; expected one of {', '.join(PARTS)}")
        book = self.stages if book is None else book
        st = book.get(name)
        if st is None:
            st = book[name] = _Stage(part)
        return st

    def _end(self, name: str, part: str, start_ns: int, charge_ns: int, cpu_ns: int, work_end_ns: int,
             own_cpu_bound: bool, with_stage: bool = False, ref_cpu_ns: int | None = None):
        """Wait until start + charge; record the stage. Returns when it ended (`with_stage`: the
        stage's record instead, None when nothing was recorded)."""
        deadline = start_ns + max(0, int(charge_ns))
        end = int(self.wait(deadline)) if self.enabled else self.clock()
        if not self.recording:
            return None if with_stage else end
        book = self.stages
        if self.windowed:
            if emulated._windows and emulated._windows[-1][1] is None:
                self._saw_window = True
            else:
                book = self._outside   # between the windows, or before the first one
        st = self._stage(name, part, book)
        st.count += 1
        st.charged_ns += max(0, int(charge_ns))
        st.cpu_ns += cpu_ns
        st.ref_cpu_ns += cpu_ns if ref_cpu_ns is None else ref_cpu_ns
        st.wall_ns += work_end_ns - start_ns
        # a stage charged nothing (Dist-DGL's round trips on one machine: every server is local) has
        # no model time to be late against: the few microseconds between its start and this line
        # made the NIC of a 1 x 1 run "n/a late" and the run invalid (2026-12-05)
        late = max(0, end - deadline) if charge_ns > 0 else 0
        st.late_ns += late
        if late:
            # the work alone (its CPU time) over the charge: the scale is too small; the rest (held off
            # the CPU, a late wake) the machine's other work
            scale = max(0, min(late, (start_ns + cpu_ns) - deadline)) if own_cpu_bound else 0
            st.scale_late_ns += scale
            st.busy_late_ns += late - scale
        return st if with_stage else end

    def until(self, name: str, part: str, start_ns: int, model_s: float, work_cpu_ns: int | None = None) -> int:
        """End stage `name` (on `part`) at start + model_s x S. `work_cpu_ns`: the CPU time of the real
        work inside the stage (a copy), so that a copy slower than the charge reads as a scale too small."""
        now = self.clock()
        return self._end(name, part, start_ns, round(model_s * self.S * NS), int(work_cpu_ns or 0), now,
                         work_cpu_ns is not None)

    def link(self, name: str, part: str, start_ns: int, nbytes: float, bandwidth: float, latency_s: float = 0.0,
             transfers: float = 1.0, work_cpu_ns: int | None = None) -> int:
        """End a link stage at start + (bytes / bandwidth + transfers x latency) x S."""
        return self.until(name, part, start_ns, link_seconds(nbytes, bandwidth, latency_s, transfers), work_cpu_ns)

    def gpu(self, name: str, start_ns: int, rate, requests: float) -> int:
        """End a GPU stage at start + rate.seconds(requests) x S (rate: lsm_gnn.testbed.GpuRate)."""
        return self.until(name, "gpu", start_ns, rate.seconds(requests))

    @contextlib.contextmanager
    def host(self, name: str, *, additive: bool = False):
        """Charge the block as host work of this thread: it ends at start + S x f x its thread CPU
        time (`additive`: at its own end + (S f - 1) x its CPU time, for a block that also waits on
        parts charged elsewhere)."""
        t0, c0 = self.clock(), self.cpu_clock()
        yield
        t1, c1 = self.clock(), self.cpu_clock()
        cpu = max(0, c1 - c0)
        # the work as the reference core runs it (the probe runs after the stage's own clocks)
        ref = round(cpu * self.core.factor()) if self.core is not None and cpu else cpu
        if additive:
            extra = max(0.0, self.S * self.f * ref - cpu)
            st = self._end(name, "host", t1, round(extra), cpu, t1, False, with_stage=True, ref_cpu_ns=ref)
            # the charge the summary counts is the whole of the stage's own work: S f ref
            if st is not None:
                st.charged_ns += cpu
        else:
            self._end(name, "host", t0, round(self.S * self.f * ref), cpu, t1, True, ref_cpu_ns=ref)

    # ---- what a run reports -----------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the stages charged so far (the warm-up)."""
        self.stages.clear()
        self._outside.clear()
        self._saw_window = False

    def raw(self) -> dict:
        """Per stage: part, count and the ns sums (mergeable across processes: merge_raw); a windowed
        charger that never charged a stage inside a timed window reports every stage (whether the
        windows are still known then or not: the loop forgets them when it ends)."""
        if self.windowed and not self._saw_window:
            return merge_raw([_as_raw(self.stages), _as_raw(self._outside)])
        return _as_raw(self.stages)

    def summary(self) -> dict:
        return charge_summary([self.raw()], self.S, self.f)


def _as_raw(book: dict) -> dict:
    return {k: {"part": v.part, "count": v.count, "charged_ns": v.charged_ns, "late_ns": v.late_ns,
                "cpu_ns": v.cpu_ns, "ref_cpu_ns": v.ref_cpu_ns, "wall_ns": v.wall_ns,
                "scale_late_ns": v.scale_late_ns, "busy_late_ns": v.busy_late_ns} for k, v in book.items()}


def merge_raw(raws: list[dict]) -> dict:
    """Sum the per-stage figures of several processes' `Charger.raw()`."""
    out: dict[str, dict] = {}
    for raw in raws:
        for k, v in (raw or {}).items():
            o = out.setdefault(k, {"part": v["part"], **{x: 0 for x in v if x != "part"}})
            for x, y in v.items():
                if x != "part":
                    o[x] += y
    return out


def charge_summary(raws: list[dict], time_scale: float, host_speed: float) -> dict:
    """Per stage and per part: charged seconds (the model's, divided back by S), late seconds, the
    late fraction; valid unless a part's late time exceeds LATENESS_LIMIT of its charged time, with
    the cause (scale too small, or a busy machine) and the figures that tell them apart."""
    S = float(time_scale)
    merged = merge_raw(raws)
    stages = {}
    parts: dict[str, dict] = {}
    for k, v in merged.items():
        ch, late = v["charged_ns"], v["late_ns"]
        stages[k] = {"component": v["part"], "count": v["count"], "charged_s": ch / NS / S,
                     "late_s": late / NS / S, "late_fraction": (late / ch) if ch else (0.0 if not late else None),
                     "cpu_s": v["cpu_ns"] / NS, "cpu_reference_s": v.get("ref_cpu_ns", v["cpu_ns"]) / NS,
                     "scale_late_s": v["scale_late_ns"] / NS / S,
                     "busy_late_s": v["busy_late_ns"] / NS / S}
        p = parts.setdefault(v["part"], {"charged_ns": 0, "late_ns": 0, "scale_late_ns": 0, "busy_late_ns": 0})
        for x in p:
            p[x] += v[x]
    causes = []
    part_out = {}
    for part, p in parts.items():
        frac = (p["late_ns"] / p["charged_ns"]) if p["charged_ns"] else (0.0 if not p["late_ns"] else None)
        ok = frac is not None and frac <= LATENESS_LIMIT
        part_out[part] = {"charged_s": p["charged_ns"] / NS / S, "late_s": p["late_ns"] / NS / S,
                          "late_fraction": frac, "valid": ok, "cause": None}
        if not ok:
            # the scale first: where the work alone outran its charge beyond the limit, no quiet machine
            # would make the run valid (a busy one may add to it)
            scale = p["scale_late_ns"] > LATENESS_LIMIT * p["charged_ns"] or p["scale_late_ns"] >= p["busy_late_ns"]
            part_out[part]["cause"] = "scale" if scale else "busy"
            why = (f"the scale is too small for the profile: the work itself outran its charge (S x f = "
                   f"{S * host_speed:g}); raise emulation.time_scale" if scale else
                   "the machine is busy: the charged threads were held off the CPU or woke late; rerun on a quiet "
                   "machine")
            frac_txt = "n/a" if frac is None else f"{100 * frac:.2f} %"
            causes.append(f"{part} stages ended {frac_txt} of their charged time late (limit "
                          f"{100 * LATENESS_LIMIT:g} %): {why}")
    return {"time_scale": S, "host_speed": float(host_speed), "lateness_limit": LATENESS_LIMIT,
            "stages": stages, "parts": part_out, "valid": not causes, "invalid_causes": causes}


STATS_PREFIX = "testbed:"


def raw_as_stats(raw: dict) -> dict:
    """A charger's raw figures as flat numeric stats (`testbed:<stage>:<field>`, the part as
    `testbed:<stage>:part=<part>` = 1), so that they travel in a source's numeric stats."""
    out = {}
    for k, v in raw.items():
        out[f"{STATS_PREFIX}{k}:part={v['part']}"] = 1
        out.update({f"{STATS_PREFIX}{k}:{x}": y for x, y in v.items() if x != "part"})
    return out


def raw_from_stats(stats: dict) -> dict:
    """raw_as_stats undone (other keys ignored)."""
    out: dict[str, dict] = {}
    for k, v in stats.items():
        if not k.startswith(STATS_PREFIX):
            continue
        stage, _, field = k[len(STATS_PREFIX):].rpartition(":")
        o = out.setdefault(stage, {})
        if field.startswith("part="):
            o["part"] = field[5:]
        else:
            o[field] = v
    return {k: v for k, v in out.items() if "part" in v}


def charger_for(tb: dict) -> Charger:
    """The charger of a testbed's arguments (baselines.harness.testbed_args): its S, f and, where
    `host_core` is "reference", host CPU time put at the reference core's speed."""
    core = CoreSpeed(CORE_PROBE_REF_S) if tb.get("host_core", "this") == "reference" else None
    return Charger(float(tb["time_scale"]), float(tb["host_speed"]), core=core)
